package recovery

import (
	"bytes"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// The expected documents below are written by hand from the reference's sidecar format
// (docs/omnigraph-format.md §4):
// keys in RecoverySidecar field order, serde_json::to_string_pretty layout (two-space indent,
// `"key": value`, empty array as [], no trailing newline), started_at a string, nulls written
// for branch/actor_id/graph_head/merged_parent_commit_id/table_branch (slot), and the optional
// keys (merge_source_commit_id, additional_registrations, tombstones,
// schema_apply_target_schema_ir_hash, protocol_v4.., rollback_audit_outcomes,
// confirmed_version, pin table_branch on main, confirmed_transaction, confirmed,
// registrations/renames/tombstones) absent.

const (
	goldenRoot     = "/data/g1"
	goldenOp       = "01JZ0000000000000000000000"
	goldenCommit   = "01JZ000000000000000000000A"
	goldenRollback = "01JZ000000000000000000000B"
	uuidPerson     = "3f1c2a9e-7b4d-4c1e-9a2f-0d5e6b7c8a91"
	uuidKnows      = "a0b1c2d3-e4f5-4607-8819-2a3b4c5d6e7f"
)

const goldenArmed = `{
  "schema_version": 9,
  "operation_id": "01JZ0000000000000000000000",
  "started_at": "1767225600000000",
  "branch": null,
  "actor_id": "alice",
  "writer_kind": "Load",
  "tables": [
    {
      "identity": {
        "stable_table_id": 1,
        "table_incarnation_id": 4
      },
      "table_key": "node:Person",
      "table_path": "/data/g1/nodes/0000000000000001-0000000000000004",
      "expected_version": 3,
      "post_commit_pin": 4
    }
  ],
  "schema_apply_manifest_published": false,
  "protocol_v3": {
    "authority": {
      "branch_identifier": {
        "version_mapping": []
      },
      "graph_head": "01JY0000000000000000000000",
      "schema_identity_domain": "01JX0000000000000000000000",
      "schema_ir_hash": "sha256:ab12",
      "schema_identity_version": 2
    },
    "lineage": {
      "graph_commit_id": "01JZ000000000000000000000A",
      "branch": null,
      "actor_id": "alice",
      "merged_parent_commit_id": null,
      "created_at": 1767225600000123
    },
    "rollback_graph_commit_id": "01JZ000000000000000000000B",
    "effect_phase": "Armed",
    "effects": [
      {
        "identity": {
          "stable_table_id": 1,
          "table_incarnation_id": 4
        },
        "table_key": "node:Person",
        "planned_transaction": {
          "read_version": 3,
          "uuid": "3f1c2a9e-7b4d-4c1e-9a2f-0d5e6b7c8a91"
        }
      }
    ],
    "intended_delta": {
      "table_updates": [
        {
          "identity": {
            "stable_table_id": 1,
            "table_incarnation_id": 4
          },
          "table_key": "node:Person",
          "expected_version": 3,
          "table_branch": null
        }
      ]
    }
  }
}`

// goldenConfirmed: a two-table Load on a fresh named branch (graph_head null), both tables
// first-touch forks on "feature", after confirmation. The actor carries <&> to pin that nothing is
// HTML-escaped, and the edge identity has hex letters to pin lowercase zero-padded hex.
const goldenConfirmed = `{
  "schema_version": 9,
  "operation_id": "01JZ0000000000000000000000",
  "started_at": "1767225600000000",
  "branch": "feature",
  "actor_id": "alice<&>",
  "writer_kind": "Load",
  "tables": [
    {
      "identity": {
        "stable_table_id": 1,
        "table_incarnation_id": 4
      },
      "table_key": "node:Person",
      "table_path": "/data/g1/nodes/0000000000000001-0000000000000004",
      "expected_version": 3,
      "post_commit_pin": 4,
      "confirmed_version": 4,
      "table_branch": "feature"
    },
    {
      "identity": {
        "stable_table_id": 26,
        "table_incarnation_id": 255
      },
      "table_key": "edge:Knows",
      "table_path": "/data/g1/edges/000000000000001a-00000000000000ff",
      "expected_version": 1,
      "post_commit_pin": 2,
      "confirmed_version": 2,
      "table_branch": "feature"
    }
  ],
  "schema_apply_manifest_published": false,
  "protocol_v3": {
    "authority": {
      "branch_identifier": {
        "version_mapping": [
          [
            7,
            "0123456789abcdef0123456789abcdef"
          ]
        ]
      },
      "graph_head": null,
      "schema_identity_domain": "01JX0000000000000000000000",
      "schema_ir_hash": "sha256:ab12",
      "schema_identity_version": 2
    },
    "lineage": {
      "graph_commit_id": "01JZ000000000000000000000A",
      "branch": "feature",
      "actor_id": "alice<&>",
      "merged_parent_commit_id": null,
      "created_at": 1767225600000123
    },
    "rollback_graph_commit_id": "01JZ000000000000000000000B",
    "effect_phase": "EffectsConfirmed",
    "effects": [
      {
        "identity": {
          "stable_table_id": 1,
          "table_incarnation_id": 4
        },
        "table_key": "node:Person",
        "planned_transaction": {
          "read_version": 3,
          "uuid": "3f1c2a9e-7b4d-4c1e-9a2f-0d5e6b7c8a91"
        },
        "confirmed_transaction": {
          "read_version": 3,
          "uuid": "3f1c2a9e-7b4d-4c1e-9a2f-0d5e6b7c8a91"
        }
      },
      {
        "identity": {
          "stable_table_id": 26,
          "table_incarnation_id": 255
        },
        "table_key": "edge:Knows",
        "planned_transaction": {
          "read_version": 1,
          "uuid": "a0b1c2d3-e4f5-4607-8819-2a3b4c5d6e7f"
        },
        "confirmed_transaction": {
          "read_version": 1,
          "uuid": "a0b1c2d3-e4f5-4607-8819-2a3b4c5d6e7f"
        }
      }
    ],
    "intended_delta": {
      "table_updates": [
        {
          "identity": {
            "stable_table_id": 1,
            "table_incarnation_id": 4
          },
          "table_key": "node:Person",
          "expected_version": 3,
          "table_branch": "feature",
          "confirmed": {
            "table_version": 4,
            "table_branch": "feature",
            "row_count": 12,
            "version_metadata": {
              "manifest_path": "/data/g1/nodes/0000000000000001-0000000000000004/tree/feature/_versions/18446744073709551611.manifest",
              "manifest_size": 1234,
              "e_tag": null,
              "naming_scheme": "V2"
            }
          }
        },
        {
          "identity": {
            "stable_table_id": 26,
            "table_incarnation_id": 255
          },
          "table_key": "edge:Knows",
          "expected_version": 1,
          "table_branch": "feature",
          "confirmed": {
            "table_version": 2,
            "table_branch": "feature",
            "row_count": 3,
            "version_metadata": {
              "manifest_path": "/data/g1/edges/000000000000001a-00000000000000ff/tree/feature/_versions/18446744073709551613.manifest",
              "manifest_size": null,
              "e_tag": "\"9b2cf535\"",
              "naming_scheme": null
            }
          }
        }
      ]
    }
  }
}`

func sp(s string) *string   { return &s }
func u64p(v uint64) *uint64 { return &v }

var (
	idPerson = ids.TableIdentity{StableTableID: 1, TableIncarnationID: 4}
	idKnows  = ids.TableIdentity{StableTableID: 26, TableIncarnationID: 255}
)

// pinFixed overwrites the freshly minted values so the output is deterministic.
func pinFixed(s *Sidecar) *Sidecar {
	s.OperationID = goldenOp
	s.StartedAt = "1767225600000000"
	s.ProtocolV3.RollbackGraphCommitID = goldenRollback
	return s
}

func armedSpec() LoadSpec {
	return LoadSpec{
		Root:    goldenRoot,
		ActorID: sp("alice"),
		Authority: Authority{
			BranchIdentifier:      lance.BranchIdentifier{},
			GraphHead:             sp("01JY0000000000000000000000"),
			SchemaIdentityDomain:  "01JX0000000000000000000000",
			SchemaIRHash:          "sha256:ab12",
			SchemaIdentityVersion: 2,
		},
		Lineage: Lineage{GraphCommitID: goldenCommit, ActorID: sp("alice"), CreatedAt: 1767225600000123},
		Tables: []PlannedTable{{
			Identity: idPerson, TableKey: "node:Person", ExpectedVersion: 3,
			Transaction: Transaction{ReadVersion: 3, UUID: uuidPerson},
		}},
	}
}

func newArmed(t testing.TB) *Sidecar {
	t.Helper()
	s, err := NewLoadSidecar(armedSpec())
	if err != nil {
		t.Fatal(err)
	}
	return pinFixed(s)
}

func branchSpec() LoadSpec {
	spec := armedSpec()
	spec.Branch, spec.ActorID = sp("feature"), sp("alice<&>")
	spec.Authority.BranchIdentifier = lance.BranchIdentifier{{ParentVersion: 7, UUID: "0123456789abcdef0123456789abcdef"}}
	spec.Authority.GraphHead = nil
	spec.Lineage.Branch, spec.Lineage.ActorID = sp("feature"), sp("alice<&>")
	spec.Tables = []PlannedTable{
		{Identity: idPerson, TableKey: "node:Person", ExpectedVersion: 3, TableBranch: sp("feature"),
			Transaction: Transaction{ReadVersion: 3, UUID: uuidPerson}},
		{Identity: idKnows, TableKey: "edge:Knows", ExpectedVersion: 1, TableBranch: sp("feature"),
			Transaction: Transaction{ReadVersion: 1, UUID: uuidKnows}},
	}
	return spec
}

func confirmedUpdates() ([]publisher.DatasetUpdate, map[ids.TableIdentity]Transaction) {
	ups := []publisher.DatasetUpdate{
		{Identity: idKnows, TableKey: "edge:Knows", Version: 2, Branch: sp("feature"), RowCount: 3,
			Meta: publisher.TableVersionMetadata{ManifestPath: "/data/g1/edges/000000000000001a-00000000000000ff/tree/feature/_versions/18446744073709551613.manifest", ETag: sp(`"9b2cf535"`)}},
		{Identity: idPerson, TableKey: "node:Person", Version: 4, Branch: sp("feature"), RowCount: 12,
			Meta: publisher.TableVersionMetadata{ManifestPath: "/data/g1/nodes/0000000000000001-0000000000000004/tree/feature/_versions/18446744073709551611.manifest", ManifestSize: u64p(1234), NamingScheme: sp("V2")}},
	}
	txns := map[ids.TableIdentity]Transaction{
		idPerson: {ReadVersion: 3, UUID: uuidPerson},
		idKnows:  {ReadVersion: 1, UUID: uuidKnows},
	}
	return ups, txns
}

func newConfirmed(t testing.TB) *Sidecar {
	t.Helper()
	s, err := NewLoadSidecar(branchSpec())
	if err != nil {
		t.Fatal(err)
	}
	ups, txns := confirmedUpdates()
	c, err := pinFixed(s).Confirm(ups, txns)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	if string(got) == want {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("line %d:\n got  %q\n want %q\nfull output:\n%s", i+1, gl, wl, got)
		}
	}
	t.Fatalf("outputs differ only in trailing bytes:\n%q", got)
}

func TestGoldenArmedLoad(t *testing.T) {
	out, err := Marshal(newArmed(t))
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, out, goldenArmed)
}

func TestGoldenConfirmedLoad(t *testing.T) {
	out, err := Marshal(newConfirmed(t))
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, out, goldenConfirmed)
}

// Parsing a golden and writing it again reproduces it byte for byte.
func TestGoldenRoundTrip(t *testing.T) {
	for name, doc := range map[string]string{"armed": goldenArmed, "confirmed": goldenConfirmed} {
		s, err := Parse(Key(goldenOp), []byte(doc), goldenRoot)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, out, doc)
	}
}

// Compact input (as the reference's own tests write with to_string) parses to the same value.
func TestParseCompactEqualsPretty(t *testing.T) {
	var buf bytes.Buffer
	if err := compactJSON(&buf, goldenConfirmed); err != nil {
		t.Fatal(err)
	}
	s, err := Parse(Key(goldenOp), buf.Bytes(), goldenRoot)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := Marshal(s)
	assertJSON(t, out, goldenConfirmed)
}

// rollback_audit_outcomes: absent while nil, [] for a prepared lineage-only rollback, and a
// populated plan; each survives a round trip exactly.
func TestRollbackAuditOutcomesPresence(t *testing.T) {
	cases := []struct {
		outcomes []TableOutcome
		want     string
	}{
		{nil, ""},
		{[]TableOutcome{}, `    "rollback_audit_outcomes": [],` + "\n"},
		{[]TableOutcome{{TableKey: "node:Person", FromVersion: 4, ToVersion: 3}}, `    "rollback_audit_outcomes": [
      {
        "table_key": "node:Person",
        "from_version": 4,
        "to_version": 3
      }
    ],` + "\n"},
	}
	for _, c := range cases {
		s := newArmed(t)
		s.ProtocolV3.RollbackAuditOutcomes = c.outcomes
		out, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		anchor := `    "rollback_graph_commit_id": "01JZ000000000000000000000B",` + "\n"
		want := strings.Replace(goldenArmed, anchor, anchor+c.want, 1)
		assertJSON(t, out, want)
		back, err := Parse(Key(goldenOp), out, goldenRoot)
		if err != nil {
			t.Fatal(err)
		}
		got := back.ProtocolV3.RollbackAuditOutcomes
		if (got == nil) != (c.outcomes == nil) || len(got) != len(c.outcomes) {
			t.Fatalf("outcomes %#v came back as %#v", c.outcomes, got)
		}
	}
}
