package recovery

import (
	"errors"
	"testing"
)

// FuzzParse: Parse never panics, refuses only with *SidecarError, and whatever it accepts writes
// back to a fixed point that it accepts again.
func FuzzParse(f *testing.F) {
	f.Add(Key(goldenOp), []byte(goldenArmed))
	f.Add(Key(goldenOp), []byte(goldenConfirmed))
	f.Add(Key(goldenOp), []byte(goldenSchemaArmed))
	f.Add(Key(goldenOp), []byte(goldenSchemaConfirmed))
	f.Add(FileName(goldenOp), []byte(`{"schema_version":10}`))
	f.Add(FileName(goldenOp), []byte(`{"schema_version":8,"tables":[{}]}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		s, err := Parse(name, data, goldenRoot)
		if err != nil {
			var se *SidecarError
			if !errors.As(err, &se) || s != nil {
				t.Fatalf("untyped refusal %T: %v", err, err)
			}
			if se.Kind == "" || se.Reason == "" {
				t.Fatalf("refusal without kind or reason: %+v", se)
			}
			return
		}
		out, err := Marshal(s)
		if err != nil {
			t.Fatalf("accepted sidecar does not marshal: %v", err)
		}
		back, err := Parse(name, out, goldenRoot)
		if err != nil {
			t.Fatalf("written form refused: %v\n%s", err, out)
		}
		again, err := Marshal(back)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not a fixed point (%v):\n%s\n---\n%s", err, out, again)
		}
	})
}
