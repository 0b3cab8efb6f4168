package lance

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Filter selects rows. SQL is the same predicate in the official engine's syntax; it is recorded
// in Delete transactions and lets another tool repeat the selection.
type Filter struct {
	SQL     string
	Columns []string
	// Match reports, for each row of rec (which holds at least Columns), whether it is selected.
	Match func(rec arrow.Record) ([]bool, error)
}

// In selects rows whose column equals one of the values (strings or integers). Values of the
// other kind than the column's (a string for an Int64 column, an integer for a String one)
// make Match fail, rather than match no row: "5" is not 5, and a delete that silently
// removed nothing would look like one that worked.
func In(column string, values ...any) Filter {
	strs := map[string]bool{}
	ints := map[int64]bool{}
	var lits []string
	for _, v := range values {
		switch x := v.(type) {
		case string:
			strs[x] = true
			lits = append(lits, "'"+strings.ReplaceAll(x, "'", "''")+"'")
		case int:
			ints[int64(x)] = true
			lits = append(lits, strconv.FormatInt(int64(x), 10))
		case int64:
			ints[x] = true
			lits = append(lits, strconv.FormatInt(x, 10))
		case int32:
			ints[int64(x)] = true
			lits = append(lits, strconv.FormatInt(int64(x), 10))
		default:
			panic(fmt.Sprintf("lance.In: unsupported value type %T", v))
		}
	}
	sql := fmt.Sprintf("%s IN (%s)", quoteIdent(column), strings.Join(lits, ", "))
	if len(lits) == 0 {
		sql = "false"
	}
	return Filter{SQL: sql, Columns: []string{column}, Match: func(rec arrow.Record) ([]bool, error) {
		col, err := recordColumn(rec, column)
		if err != nil {
			return nil, err
		}
		out := make([]bool, col.Len())
		switch col.(type) {
		case *array.String, *array.LargeString:
			if len(ints) > 0 {
				return nil, fmt.Errorf("lance: filter %s: column %q is %s, given integer values", sql, column, col.DataType())
			}
		case *array.Int64, *array.Int32:
			if len(strs) > 0 {
				return nil, fmt.Errorf("lance: filter %s: column %q is %s, given string values", sql, column, col.DataType())
			}
		}
		switch a := col.(type) {
		case *array.String:
			for i := range out {
				out[i] = a.IsValid(i) && strs[a.Value(i)]
			}
		case *array.LargeString:
			for i := range out {
				out[i] = a.IsValid(i) && strs[a.Value(i)]
			}
		case *array.Int64:
			for i := range out {
				out[i] = a.IsValid(i) && ints[a.Value(i)]
			}
		case *array.Int32:
			for i := range out {
				out[i] = a.IsValid(i) && ints[int64(a.Value(i))]
			}
		default:
			return nil, fmt.Errorf("lance: filter on column %q of type %s is not supported", column, col.DataType())
		}
		return out, nil
	}}
}

// quoteIdent quotes a column name for the official engine's SQL when it is not a plain word.
func quoteIdent(s string) string {
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return "`" + strings.ReplaceAll(s, "`", "``") + "`"
		}
	}
	return s
}

func recordColumn(rec arrow.Record, name string) (arrow.Array, error) {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) == 0 {
		return nil, fmt.Errorf("lance: no column %q", name)
	}
	return rec.Column(idx[0]), nil
}

// columnKeys collects the values of a string or integer key column, for an upsert.
func columnKeys(recs []arrow.Record, key string) ([]any, error) {
	var out []any
	for _, rec := range recs {
		col, err := recordColumn(rec, key)
		if err != nil {
			return nil, err
		}
		for i := 0; i < col.Len(); i++ {
			if col.IsNull(i) {
				return nil, fmt.Errorf("lance: key column %q is null at row %d", key, i)
			}
			switch a := col.(type) {
			case *array.String:
				out = append(out, a.Value(i))
			case *array.LargeString:
				out = append(out, a.Value(i))
			case *array.Int64:
				out = append(out, a.Value(i))
			case *array.Int32:
				out = append(out, a.Value(i))
			default:
				return nil, fmt.Errorf("lance: key column %q of type %s is not supported", key, col.DataType())
			}
		}
	}
	return out, nil
}
