package ingest

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// FuzzRequests feeds arbitrary bodies to the two request parsers of the queue (merge and
// maintenance) and arbitrary ages to ParseAge. Neither panics; a refusal is InvalidInput
// naming a field; an accepted request says what it means (its members re-encoded parse to the
// same request); an accepted age is positive and exactly its number of units.
func FuzzRequests(f *testing.F) {
	for _, s := range []string{
		`{"source":"stage-1"}`, `{"source":"s","target":"t","delete_source":true}`, `{"source":""}`,
		`{"source":"s","extra":1}`, `{"source":"s"} {}`, `[]`, `null`, `{"source":7}`,
		`{"op":"optimize"}`, `{"op":"optimize","all":true,"fanout":4}`, `{"op":"optimize","fanout":1}`,
		`{"op":"cleanup","keep":3,"older_than":"7d","dry_run":true}`, `{"op":"cleanup","keep":0}`,
		`{"op":"cleanup","keep":1,"older_than":"4294967295w"}`, `{"op":"vacuum"}`,
		"7d", "12h", "0s", "1x", "", "d", "-1d", "99999999999w", "4294967295w", "15250w", "15251w", "106751d", "106752d",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		refused := func(what string, err error) {
			var in *errs.InvalidInput
			if !errors.As(err, &in) || in.Field == "" || in.Reason == "" {
				t.Fatalf("%s refused %q with %T %v: want InvalidInput naming a field", what, data, err, err)
			}
		}
		if m, err := ParseMergeRequest(data); err != nil {
			refused("merge request", err)
		} else {
			if m.Source == "" || m.Target == "" {
				t.Fatalf("merge request %q accepted as %+v", data, m)
			}
			again, err := ParseMergeRequest(mustJSON(t, m))
			if err != nil || again != m {
				t.Fatalf("merge request %+v re-encoded parses to %+v, %v", m, again, err)
			}
		}
		if m, err := ParseMaintenanceRequest(data); err != nil {
			refused("maintenance request", err)
		} else {
			switch m.Op {
			case "optimize":
				if m.Fanout < 0 || m.Fanout == 1 || m.Keep != 0 || m.OlderThan != "" || m.DryRun {
					t.Fatalf("optimize request %q accepted as %+v", data, m)
				}
			case "cleanup":
				if m.Keep < 1 || m.All || m.Fanout != 0 {
					t.Fatalf("cleanup request %q accepted as %+v", data, m)
				}
				if _, err := ParseAge(m.OlderThan); err != nil {
					t.Fatalf("cleanup request %q accepted with older_than %q: %v", data, m.OlderThan, err)
				}
			default:
				t.Fatalf("maintenance request %q accepted with op %q", data, m.Op)
			}
			again, err := ParseMaintenanceRequest(mustJSON(t, m))
			if err != nil || again != m {
				t.Fatalf("maintenance request %+v re-encoded parses to %+v, %v", m, again, err)
			}
		}
		s := string(data)
		d, err := ParseAge(s)
		switch {
		case err != nil:
			if d != 0 {
				t.Fatalf("ParseAge(%q) failed with %v but returned %v", s, err, d)
			}
		case s == "":
			if d != 0 {
				t.Fatalf("ParseAge(\"\") = %v", d)
			}
		default:
			unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[s[len(s)-1]]
			n, perr := strconv.ParseUint(s[:len(s)-1], 10, 64)
			if unit == 0 || perr != nil || n == 0 || d <= 0 || n > math.MaxInt64/uint64(unit) || d != time.Duration(n)*unit {
				t.Fatalf("ParseAge(%q) = %v: not a positive whole number of units", s, d)
			}
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
