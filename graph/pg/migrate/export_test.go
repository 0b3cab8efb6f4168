package migrate

import "testing"

// ApplyCase is one planning scenario as the apply tests of package migrate_test run it
// through the engine (which imports this package, so they cannot live here).
type ApplyCase struct {
	Name, Ref, Old, Via, New string
	DataLoss                 bool
	Err                      string // a resolution error expected instead of a plan
	Supported                bool
	Steps                    int
}

// ApplyCases are the reference's scenarios, then this project's further cases.
func ApplyCases() (ref, further []ApplyCase) {
	conv := func(scs []scenario) []ApplyCase {
		var out []ApplyCase
		for _, sc := range scs {
			c := ApplyCase{Name: sc.name, Ref: sc.ref, Old: sc.old, Via: sc.via, New: sc.new, DataLoss: sc.dataLoss, Err: sc.err,
				Supported: true, Steps: len(sc.steps)}
			for _, s := range sc.steps {
				if len(s) >= len("unsupported change") && s[:len("unsupported change")] == "unsupported change" {
					c.Supported = false
				}
			}
			out = append(out, c)
		}
		return out
	}
	return conv(scenarios), conv(extraScenarios)
}

// DocBlock checks (or with -update rewrites) a generated block of docs/schema-evolution.md.
func DocBlock(t *testing.T, name, want string) { t.Helper(); block(t, name, want) }
