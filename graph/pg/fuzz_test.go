package pg

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: any input either compiles into a schema whose identity
// round-trips, or fails with a typed, positioned error. Never a panic.
// Seeds live in testdata/fuzz/FuzzParse (plus the schema files below).
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.pg")
	more, _ := filepath.Glob("testdata/*/*.pg")
	for _, p := range append(files, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		shape, err := Compile(src)
		if err != nil {
			var pe *ParseError
			var se *SemanticError
			switch {
			case errors.As(err, &pe):
				if pe.Line < 1 || pe.Column < 1 || pe.Expected == "" || pe.Found == "" {
					t.Fatalf("bad parse error %+v", pe)
				}
			case errors.As(err, &se):
				if se.Line < 1 || se.Column < 1 || se.Code == "" || se.Message == "" {
					t.Fatalf("bad semantic error %+v", se)
				}
			default:
				t.Fatalf("untyped error %T: %v", err, err)
			}
			_ = err.Error()
			return
		}
		ir, _, err := Initialize(testDomain, shape)
		if err != nil {
			t.Fatalf("accepted schema failed to initialize: %v\n%s", err, src)
		}
		if ir.Shape().Hash() != shape.Hash() {
			t.Fatalf("IR projection changed the shape hash\n%s", src)
		}
		back, err := ParseSchemaIR([]byte(ir.PrettyJSON()))
		if err != nil || back.Hash() != ir.Hash() {
			t.Fatalf("IR did not round-trip: %v\n%s", err, src)
		}
		if _, err := NewCatalog(ir); err != nil {
			t.Fatalf("catalog: %v\n%s", err, src)
		}
	})
}
