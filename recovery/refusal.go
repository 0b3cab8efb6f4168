package recovery

import (
	"fmt"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// StateError is recovery refusing to resolve an intent because the tables are not in any state
// the intent can have left them in. The sidecar stays and nothing of the refused step was
// written; the graph needs an operator, as its kind says.
type StateError struct {
	Table string
	// Foreign: a writer outside this intent moved the table (kind table_drift). Otherwise the
	// tables and the manifest contradict the intent itself (kind corrupt).
	Foreign bool
	msg     string
}

func (e *StateError) Error() string { return e.msg }

// ErrorKind is errs.KindTableDrift for a table a foreign writer moved, else errs.KindCorrupt.
func (e *StateError) ErrorKind() string {
	if e.Foreign {
		return errs.KindTableDrift
	}
	return errs.KindCorrupt
}

// refuseState builds the refusal "table <table><rest>".
func refuseState(table string, foreign bool, rest string, args ...any) *StateError {
	return &StateError{Table: table, Foreign: foreign, msg: "table " + table + fmt.Sprintf(rest, args...)}
}
