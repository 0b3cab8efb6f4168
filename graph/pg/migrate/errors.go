package migrate

import "github.com/omnigraph/omnigraph-worker/graph/errs"

// UnsupportedError refuses a plan that holds an unsupported_change: Step is the first (whose
// message it carries, "[code] reason"), Steps all of them in plan order.
type UnsupportedError struct {
	Step  Step
	Steps []Step
}

func (e *UnsupportedError) Error() string {
	msg := e.Step.UnsupportedMessage()
	if msg == "" {
		msg = "unsupported schema migration plan"
	}
	return msg
}

// Reason is the first refusal's reason.
func (e *UnsupportedError) Reason() string { return e.Step.Reason }

// Code is the first refusal's diagnostic code ("" when it has none).
func (e *UnsupportedError) Code() string { return e.Step.Code }

// ErrorKind classifies the refusal for graph/errs (exit code of `worker schema plan`).
func (e *UnsupportedError) ErrorKind() string { return errs.KindSchemaUnsupported }

// ErrorDetail gives the refusal's fields.
func (e *UnsupportedError) ErrorDetail() map[string]any {
	d := map[string]any{"entity": e.Step.Entity, "reason": e.Step.Reason, "unsupported": len(e.Steps)}
	if e.Step.Code != "" {
		d["code"] = e.Step.Code
	}
	return d
}
