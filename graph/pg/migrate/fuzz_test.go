package migrate

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzParsePlan: any input is refused or reads as a plan whose JSON reads back to the same
// plan and the same bytes. Never a panic. Seeds: testdata/fuzz/FuzzParsePlan and every
// scenario's plan.
func FuzzParsePlan(f *testing.F) {
	for _, sc := range append(slices.Clone(scenarios), extraScenarios...) {
		if sc.err != "" {
			continue
		}
		acc, err := sc.acceptedIR()
		if err != nil {
			f.Fatal(err)
		}
		p, _, err := PlanSchema(acc, "desired.pg", sc.new)
		if err != nil {
			f.Fatal(err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePlan(data)
		if err != nil {
			_ = err.Error()
			return
		}
		for _, s := range p.Steps {
			_ = s.String()
			_ = s.TableKey()
		}
		_ = p.Err()
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("a parsed plan does not encode: %v", err)
		}
		q, err := ParsePlan(b)
		if err != nil {
			t.Fatalf("re-read: %v\n%s", err, b)
		}
		if q.Supported != p.Supported || len(q.Steps) != len(p.Steps) {
			t.Fatalf("re-read changed the plan\n%s", b)
		}
		for i := range p.Steps {
			if !q.Steps[i].Equal(p.Steps[i]) {
				t.Fatalf("step %d changed: %+v -> %+v\n%s", i, p.Steps[i], q.Steps[i], b)
			}
		}
		if c, _ := json.Marshal(q); string(c) != string(b) {
			t.Fatalf("re-encoding differs\n%s\n%s", b, c)
		}
	})
}
