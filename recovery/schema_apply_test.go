package recovery

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// The SchemaApply documents below are written by hand in the reference's layout
// (RecoverySidecar with protocol_v7 = RecoveryProtocolV7, serde_json::to_string_pretty): the
// effect kind is internally tagged inside "kind", registration/rename paths are graph-relative,
// a main registration omits table_branch, confirmed_transaction / confirmed / confirmed_version
// are absent while Armed, and rollback_audit_outcomes is absent while no rollback is prepared.

// goldenSchemaArmed: an Armed SchemaApply on main that overwrites node:Person, creates the added
// type node:Tag (first touch, registered), rewrites edge:Knows under its new alias edge:Follows
// (a rename with a physical output slot) and tombstones node:Old.
const goldenSchemaArmed = `{
  "schema_version": 9,
  "operation_id": "01JZ0000000000000000000000",
  "started_at": "1767225600000000",
  "branch": null,
  "actor_id": "alice",
  "writer_kind": "SchemaApply",
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
    },
    {
      "identity": {
        "stable_table_id": 10,
        "table_incarnation_id": 11
      },
      "table_key": "node:Tag",
      "table_path": "/data/g1/nodes/000000000000000a-000000000000000b",
      "expected_version": 0,
      "post_commit_pin": 1
    },
    {
      "identity": {
        "stable_table_id": 26,
        "table_incarnation_id": 255
      },
      "table_key": "edge:Follows",
      "table_path": "/data/g1/edges/000000000000001a-00000000000000ff",
      "expected_version": 2,
      "post_commit_pin": 3
    }
  ],
  "schema_apply_manifest_published": false,
  "protocol_v7": {
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
    "target_schema_ir_hash": "sha256:cd34",
    "effect_phase": "Armed",
    "effects": [
      {
        "identity": {
          "stable_table_id": 1,
          "table_incarnation_id": 4
        },
        "table_key": "node:Person",
        "kind": {
          "kind": "ExistingOverwrite",
          "planned_transaction": {
            "read_version": 3,
            "uuid": "omnigraph-schema-01JZ0000000000000000000001"
          }
        }
      },
      {
        "identity": {
          "stable_table_id": 10,
          "table_incarnation_id": 11
        },
        "table_key": "node:Tag",
        "kind": {
          "kind": "FirstTouchDataset",
          "planned_transaction": {
            "read_version": 0,
            "uuid": "omnigraph-schema-01JZ0000000000000000000002"
          }
        }
      },
      {
        "identity": {
          "stable_table_id": 26,
          "table_incarnation_id": 255
        },
        "table_key": "edge:Follows",
        "kind": {
          "kind": "ExistingOverwrite",
          "planned_transaction": {
            "read_version": 2,
            "uuid": "omnigraph-schema-01JZ0000000000000000000003"
          }
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
        },
        {
          "identity": {
            "stable_table_id": 10,
            "table_incarnation_id": 11
          },
          "table_key": "node:Tag",
          "expected_version": 0,
          "table_branch": null
        },
        {
          "identity": {
            "stable_table_id": 26,
            "table_incarnation_id": 255
          },
          "table_key": "edge:Follows",
          "expected_version": 2,
          "table_branch": null
        }
      ],
      "registrations": [
        {
          "identity": {
            "stable_table_id": 10,
            "table_incarnation_id": 11
          },
          "table_key": "node:Tag",
          "table_path": "nodes/000000000000000a-000000000000000b"
        }
      ],
      "renames": [
        {
          "identity": {
            "stable_table_id": 26,
            "table_incarnation_id": 255
          },
          "expected_table_key": "edge:Knows",
          "expected_version": 2,
          "table_key": "edge:Follows",
          "table_path": "edges/000000000000001a-00000000000000ff"
        }
      ],
      "tombstones": [
        {
          "identity": {
            "stable_table_id": 5,
            "table_incarnation_id": 6
          },
          "table_key": "node:Old",
          "tombstone_version": 8
        }
      ]
    }
  }
}`

// goldenSchemaConfirmed is goldenSchemaArmed after every effect landed exactly.
const goldenSchemaConfirmed = `{
  "schema_version": 9,
  "operation_id": "01JZ0000000000000000000000",
  "started_at": "1767225600000000",
  "branch": null,
  "actor_id": "alice",
  "writer_kind": "SchemaApply",
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
      "confirmed_version": 4
    },
    {
      "identity": {
        "stable_table_id": 10,
        "table_incarnation_id": 11
      },
      "table_key": "node:Tag",
      "table_path": "/data/g1/nodes/000000000000000a-000000000000000b",
      "expected_version": 0,
      "post_commit_pin": 1,
      "confirmed_version": 1
    },
    {
      "identity": {
        "stable_table_id": 26,
        "table_incarnation_id": 255
      },
      "table_key": "edge:Follows",
      "table_path": "/data/g1/edges/000000000000001a-00000000000000ff",
      "expected_version": 2,
      "post_commit_pin": 3,
      "confirmed_version": 3
    }
  ],
  "schema_apply_manifest_published": false,
  "protocol_v7": {
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
    "target_schema_ir_hash": "sha256:cd34",
    "effect_phase": "EffectsConfirmed",
    "effects": [
      {
        "identity": {
          "stable_table_id": 1,
          "table_incarnation_id": 4
        },
        "table_key": "node:Person",
        "kind": {
          "kind": "ExistingOverwrite",
          "planned_transaction": {
            "read_version": 3,
            "uuid": "omnigraph-schema-01JZ0000000000000000000001"
          },
          "confirmed_transaction": {
            "read_version": 3,
            "uuid": "omnigraph-schema-01JZ0000000000000000000001"
          }
        }
      },
      {
        "identity": {
          "stable_table_id": 10,
          "table_incarnation_id": 11
        },
        "table_key": "node:Tag",
        "kind": {
          "kind": "FirstTouchDataset",
          "planned_transaction": {
            "read_version": 0,
            "uuid": "omnigraph-schema-01JZ0000000000000000000002"
          },
          "confirmed_transaction": {
            "read_version": 0,
            "uuid": "omnigraph-schema-01JZ0000000000000000000002"
          }
        }
      },
      {
        "identity": {
          "stable_table_id": 26,
          "table_incarnation_id": 255
        },
        "table_key": "edge:Follows",
        "kind": {
          "kind": "ExistingOverwrite",
          "planned_transaction": {
            "read_version": 2,
            "uuid": "omnigraph-schema-01JZ0000000000000000000003"
          },
          "confirmed_transaction": {
            "read_version": 2,
            "uuid": "omnigraph-schema-01JZ0000000000000000000003"
          }
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
          "table_branch": null,
          "confirmed": {
            "table_version": 4,
            "table_branch": null,
            "row_count": 12,
            "version_metadata": {
              "manifest_path": "/data/g1/nodes/0000000000000001-0000000000000004/_versions/18446744073709551611.manifest",
              "manifest_size": 1234,
              "e_tag": null,
              "naming_scheme": "V2"
            }
          }
        },
        {
          "identity": {
            "stable_table_id": 10,
            "table_incarnation_id": 11
          },
          "table_key": "node:Tag",
          "expected_version": 0,
          "table_branch": null,
          "confirmed": {
            "table_version": 1,
            "table_branch": null,
            "row_count": 0,
            "version_metadata": {
              "manifest_path": "/data/g1/nodes/000000000000000a-000000000000000b/_versions/18446744073709551614.manifest",
              "manifest_size": null,
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
          "table_key": "edge:Follows",
          "expected_version": 2,
          "table_branch": null,
          "confirmed": {
            "table_version": 3,
            "table_branch": null,
            "row_count": 3,
            "version_metadata": {
              "manifest_path": "/data/g1/edges/000000000000001a-00000000000000ff/_versions/18446744073709551612.manifest",
              "manifest_size": null,
              "e_tag": "\"9b2cf535\"",
              "naming_scheme": null
            }
          }
        }
      ],
      "registrations": [
        {
          "identity": {
            "stable_table_id": 10,
            "table_incarnation_id": 11
          },
          "table_key": "node:Tag",
          "table_path": "nodes/000000000000000a-000000000000000b"
        }
      ],
      "renames": [
        {
          "identity": {
            "stable_table_id": 26,
            "table_incarnation_id": 255
          },
          "expected_table_key": "edge:Knows",
          "expected_version": 2,
          "table_key": "edge:Follows",
          "table_path": "edges/000000000000001a-00000000000000ff"
        }
      ],
      "tombstones": [
        {
          "identity": {
            "stable_table_id": 5,
            "table_incarnation_id": 6
          },
          "table_key": "node:Old",
          "tombstone_version": 8
        }
      ]
    }
  }
}`

const (
	schemaUUIDPerson  = "omnigraph-schema-01JZ0000000000000000000001"
	schemaUUIDTag     = "omnigraph-schema-01JZ0000000000000000000002"
	schemaUUIDFollows = "omnigraph-schema-01JZ0000000000000000000003"
)

var (
	idTag = ids.TableIdentity{StableTableID: 10, TableIncarnationID: 11}
	idOld = ids.TableIdentity{StableTableID: 5, TableIncarnationID: 6}
	// idKnows is the renamed edge table: edge:Knows becomes edge:Follows.
)

func schemaSpec() SchemaApplySpec {
	a := armedSpec()
	return SchemaApplySpec{
		Root:               goldenRoot,
		ActorID:            sp("alice"),
		Authority:          a.Authority,
		Lineage:            a.Lineage,
		TargetSchemaIRHash: "sha256:cd34",
		Tables: []SchemaApplyTable{
			{Identity: idPerson, TableKey: "node:Person", ExpectedVersion: 3},
			{Identity: idTag, TableKey: "node:Tag", FirstTouch: true},
			{Identity: idKnows, TableKey: "edge:Follows", ExpectedVersion: 2},
		},
		Registrations: []Registration{{Identity: idTag, TableKey: "node:Tag", TablePath: "nodes/000000000000000a-000000000000000b"}},
		Renames: []Rename{{Identity: idKnows, ExpectedTableKey: "edge:Knows", ExpectedVersion: 2, TableKey: "edge:Follows",
			TablePath: "edges/000000000000001a-00000000000000ff"}},
		Tombstones: []Tombstone{{Identity: idOld, TableKey: "node:Old", TombstoneVersion: 8}},
	}
}

// pinSchemaFixed overwrites the freshly minted values so the output is deterministic.
func pinSchemaFixed(s *Sidecar) *Sidecar {
	s.OperationID = goldenOp
	s.StartedAt = "1767225600000000"
	p := s.ProtocolV7
	p.RollbackGraphCommitID = goldenRollback
	for i, u := range []string{schemaUUIDPerson, schemaUUIDTag, schemaUUIDFollows}[:len(p.Effects)] {
		p.Effects[i].PlannedTransaction.UUID = u
	}
	return s
}

func newSchemaArmed(t testing.TB) *Sidecar {
	t.Helper()
	s, err := NewSchemaApplySidecar(schemaSpec())
	if err != nil {
		t.Fatal(err)
	}
	return pinSchemaFixed(s)
}

// schemaDone is the exact outcome of every planned effect of s.
func schemaDone(s *Sidecar) map[ids.TableIdentity]SchemaApplyDone {
	ups := map[ids.TableIdentity]publisher.DatasetUpdate{
		idPerson: {Identity: idPerson, TableKey: "node:Person", Version: 4, RowCount: 12, Meta: publisher.TableVersionMetadata{
			ManifestPath: "/data/g1/nodes/0000000000000001-0000000000000004/_versions/18446744073709551611.manifest", ManifestSize: u64p(1234), NamingScheme: sp("V2")}},
		idTag: {Identity: idTag, TableKey: "node:Tag", Version: 1, RowCount: 0, Meta: publisher.TableVersionMetadata{
			ManifestPath: "/data/g1/nodes/000000000000000a-000000000000000b/_versions/18446744073709551614.manifest", NamingScheme: sp("V2")}},
		idKnows: {Identity: idKnows, TableKey: "edge:Follows", Version: 3, RowCount: 3, Meta: publisher.TableVersionMetadata{
			ManifestPath: "/data/g1/edges/000000000000001a-00000000000000ff/_versions/18446744073709551612.manifest", ETag: sp(`"9b2cf535"`)}},
	}
	done := map[ids.TableIdentity]SchemaApplyDone{}
	for _, e := range s.ProtocolV7.Effects {
		done[e.Identity] = SchemaApplyDone{Transaction: e.PlannedTransaction, Update: ups[e.Identity]}
	}
	return done
}

// The builder and the confirmation write exactly the reference's documents, and confirming
// leaves the Armed receiver as it is on disk.
func TestSchemaApplyGolden(t *testing.T) {
	s := newSchemaArmed(t)
	out, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, out, goldenSchemaArmed)
	c, err := s.ConfirmSchemaApply(schemaDone(s))
	if err != nil {
		t.Fatal(err)
	}
	out, err = Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, out, goldenSchemaConfirmed)
	if again, _ := Marshal(s); string(again) != goldenSchemaArmed {
		t.Fatal("ConfirmSchemaApply modified its receiver")
	}
}

// Parse reads both phases into typed values and Marshal reproduces them byte for byte, from the
// pretty form and from the compact form.
func TestSchemaApplyGoldenRoundTrip(t *testing.T) {
	for name, doc := range map[string]string{"armed": goldenSchemaArmed, "confirmed": goldenSchemaConfirmed} {
		var compact bytes.Buffer
		if err := compactJSON(&compact, doc); err != nil {
			t.Fatal(err)
		}
		for _, in := range [][]byte{[]byte(doc), compact.Bytes()} {
			s, err := Parse(Key(goldenOp), in, goldenRoot)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out, err := Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, out, doc)
			p := s.ProtocolV7
			d := p.IntendedDelta
			if s.WriterKind != SchemaApply || p.TargetSchemaIRHash != "sha256:cd34" || len(p.Effects) != 3 ||
				p.Effects[0].Kind != ExistingOverwrite || p.Effects[1].Kind != FirstTouchDataset ||
				p.Effects[2].PlannedTransaction != (Transaction{ReadVersion: 2, UUID: schemaUUIDFollows}) ||
				len(d.Registrations) != 1 || d.Registrations[0].TablePath != "nodes/000000000000000a-000000000000000b" || d.Registrations[0].TableBranch != nil ||
				len(d.Renames) != 1 || d.Renames[0].ExpectedTableKey != "edge:Knows" || d.Renames[0].ExpectedVersion != 2 ||
				len(d.Tombstones) != 1 || d.Tombstones[0] != (Tombstone{Identity: idOld, TableKey: "node:Old", TombstoneVersion: 8}) {
				t.Fatalf("%s: decoded %+v", name, p)
			}
			confirmed := name == "confirmed"
			if (p.Effects[1].ConfirmedTransaction != nil) != confirmed || (d.TableUpdates[1].Confirmed != nil) != confirmed {
				t.Fatalf("%s: confirmation %+v", name, p.Effects[1])
			}
		}
	}
}

// A fresh builder mints every identity itself: ULID operation and rollback ids distinct from
// the lineage commit, and a distinct "omnigraph-schema-<ULID>" planned transaction per table;
// its output survives Parse, and so does its confirmation.
func TestNewSchemaApplySidecarMints(t *testing.T) {
	spec := schemaSpec()
	s, err := NewSchemaApplySidecar(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := s.ProtocolV7
	if !ids.IsULID(s.OperationID) || !ids.IsULID(p.RollbackGraphCommitID) ||
		p.RollbackGraphCommitID == p.Lineage.GraphCommitID || p.RollbackGraphCommitID == s.OperationID {
		t.Fatalf("minted ids: op %q rollback %q lineage %q", s.OperationID, p.RollbackGraphCommitID, p.Lineage.GraphCommitID)
	}
	if s.Branch != nil || s.WriterKind != SchemaApply || p.EffectPhase != Armed || s.ProtocolV3 != nil {
		t.Fatalf("envelope %+v", s)
	}
	seen := map[string]bool{}
	for i, e := range p.Effects {
		u, ok := strings.CutPrefix(e.PlannedTransaction.UUID, "omnigraph-schema-")
		if !ok || !ids.IsULID(u) || seen[u] {
			t.Fatalf("effect %d planned uuid %q", i, e.PlannedTransaction.UUID)
		}
		seen[u] = true
		pin, slot := s.Tables[i], p.IntendedDelta.TableUpdates[i]
		want, _ := TablePath(goldenRoot, spec.Tables[i].TableKey, spec.Tables[i].Identity)
		if e.PlannedTransaction.ReadVersion != spec.Tables[i].ExpectedVersion || pin.TablePath != want ||
			pin.PostCommitPin != pin.ExpectedVersion+1 || pin.TableBranch != nil || slot.TableBranch != nil ||
			slot.ExpectedVersion != pin.ExpectedVersion || (e.Kind == FirstTouchDataset) != spec.Tables[i].FirstTouch {
			t.Fatalf("table %d: pin %+v effect %+v slot %+v", i, pin, e, slot)
		}
	}
	// The sidecar does not share the caller's delta slices.
	spec.Registrations[0].TableKey, spec.Renames[0].TableKey, spec.Tombstones[0].TombstoneVersion = "node:X", "edge:X", 99
	if err := s.Validate(goldenRoot); err != nil {
		t.Fatalf("caller's spec edits reached the sidecar: %v", err)
	}
	for _, sc := range []*Sidecar{s, mustConfirmSchema(t, s)} {
		out, err := Marshal(sc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(Key(sc.OperationID), out, goldenRoot)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Marshal(back)
		assertJSON(t, again, string(out))
	}
}

func mustConfirmSchema(t *testing.T, s *Sidecar) *Sidecar {
	t.Helper()
	c, err := s.ConfirmSchemaApply(schemaDone(s))
	if err != nil {
		t.Fatal(err)
	}
	if c.ProtocolV7.EffectPhase != EffectsConfirmed || s.ProtocolV7.EffectPhase != Armed {
		t.Fatal("phases not moved exactly once")
	}
	for i := range c.Tables {
		if c.Tables[i].ConfirmedVersion == nil || *c.Tables[i].ConfirmedVersion != c.Tables[i].PostCommitPin ||
			s.Tables[i].ConfirmedVersion != nil || s.ProtocolV7.Effects[i].ConfirmedTransaction != nil ||
			s.ProtocolV7.IntendedDelta.TableUpdates[i].Confirmed != nil {
			t.Fatalf("table %d confirmation leaked or missing", i)
		}
	}
	return c
}

func TestNewSchemaApplySidecarRefused(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(s *SchemaApplySpec)
		reason string
	}{
		{"lineage commit not a ULID", func(s *SchemaApplySpec) { s.Lineage.GraphCommitID = "c1" }, "not a canonical ULID"},
		{"invalid table key", func(s *SchemaApplySpec) { s.Tables[0].TableKey = "Person" }, "invalid table key"},
		{"no successor", func(s *SchemaApplySpec) { s.Tables[0].ExpectedVersion = ^uint64(0) }, "has no successor"},
		{"first touch at a live version", func(s *SchemaApplySpec) { s.Tables[1].ExpectedVersion = 4 }, "inconsistent first-touch identity"},
		{"overwrite at version 0", func(s *SchemaApplySpec) { s.Tables[0].ExpectedVersion = 0 }, "inconsistent first-touch identity"},
		{"registration missing", func(s *SchemaApplySpec) { s.Registrations = nil }, "must match unique registration identities"},
		{"registration of an overwrite", func(s *SchemaApplySpec) {
			s.Registrations = append(s.Registrations, Registration{Identity: idPerson, TableKey: "node:Person", TablePath: "nodes/0000000000000001-0000000000000004"})
		}, "must match unique registration identities"},
		{"lineage on a branch", func(s *SchemaApplySpec) { s.Lineage.Branch = sp("feature") }, "actor/main lineage"},
		{"actor differs", func(s *SchemaApplySpec) { s.ActorID = sp("bob") }, "actor/main lineage"},
		{"empty target", func(s *SchemaApplySpec) { s.TargetSchemaIRHash = "" }, "empty target schema identity"},
		{"zero tombstone version", func(s *SchemaApplySpec) { s.Tombstones[0].TombstoneVersion = 0 }, "tombstone_version 0"},
		{"duplicate table", func(s *SchemaApplySpec) { s.Tables = append(s.Tables, s.Tables[0]) }, "duplicate table identity"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := schemaSpec()
			c.edit(&spec)
			s, err := NewSchemaApplySidecar(spec)
			if s != nil {
				t.Fatal("refused build returned a sidecar")
			}
			wantRefusal(t, err, KindShape, c.reason)
		})
	}
}

func TestConfirmSchemaApplyRefused(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(d map[ids.TableIdentity]SchemaApplyDone)
		reason string
	}{
		{"missing table", func(d map[ids.TableIdentity]SchemaApplyDone) { delete(d, idTag) }, "key set differs"},
		{"extra table", func(d map[ids.TableIdentity]SchemaApplyDone) {
			d[idOld] = SchemaApplyDone{Transaction: Transaction{ReadVersion: 7, UUID: "x"}, Update: publisher.DatasetUpdate{Identity: idOld, TableKey: "node:Old", Version: 8}}
		}, "key set differs"},
		{"swapped for another table", func(d map[ids.TableIdentity]SchemaApplyDone) {
			d[idOld] = d[idTag]
			delete(d, idTag)
		}, "no result for \"node:Tag\""},
		{"other transaction", func(d map[ids.TableIdentity]SchemaApplyDone) {
			x := d[idPerson]
			x.Transaction.UUID = "omnigraph-schema-other"
			d[idPerson] = x
		}, "committed transaction"},
		{"other read version", func(d map[ids.TableIdentity]SchemaApplyDone) {
			x := d[idPerson]
			x.Transaction.ReadVersion = 4
			d[idPerson] = x
		}, "committed transaction"},
		{"other version", func(d map[ids.TableIdentity]SchemaApplyDone) {
			x := d[idTag]
			x.Update.Version = 2
			d[idTag] = x
		}, "achieved"},
		{"on a branch", func(d map[ids.TableIdentity]SchemaApplyDone) {
			x := d[idKnows]
			x.Update.Branch = sp("feature")
			d[idKnows] = x
		}, "achieved"},
		{"update names another identity", func(d map[ids.TableIdentity]SchemaApplyDone) {
			x := d[idKnows]
			x.Update.Identity = idOld
			d[idKnows] = x
		}, "achieved"},
		{"update names the old alias", func(d map[ids.TableIdentity]SchemaApplyDone) {
			x := d[idKnows]
			x.Update.TableKey = "edge:Knows"
			d[idKnows] = x
		}, "achieved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSchemaArmed(t)
			d := schemaDone(s)
			c.edit(d)
			got, err := s.ConfirmSchemaApply(d)
			if got != nil {
				t.Fatal("refused confirmation returned a sidecar")
			}
			wantRefusal(t, err, KindConfirm, c.reason)
			if out, _ := Marshal(s); string(out) != goldenSchemaArmed {
				t.Fatal("refused confirmation modified its receiver")
			}
		})
	}

	s := newSchemaArmed(t)
	c, err := s.ConfirmSchemaApply(schemaDone(s))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ConfirmSchemaApply(schemaDone(c))
	wantRefusal(t, err, KindConfirm, "already EffectsConfirmed")
	_, err = newArmed(t).ConfirmSchemaApply(nil)
	wantRefusal(t, err, KindConfirm, "only a SchemaApply sidecar")
	// The Load/Mutation confirmation refuses a SchemaApply sidecar.
	_, err = s.Confirm(nil, nil)
	wantRefusal(t, err, KindConfirm, "only a Mutation/Load sidecar")
}

// A metadata-only apply (no table effect: a tombstone and an alias rename) is armed with empty
// pin, effect and slot sets, and confirming it only moves the phase.
func TestSchemaApplyMetadataOnly(t *testing.T) {
	spec := schemaSpec()
	spec.Tables, spec.Registrations = nil, nil
	s, err := NewSchemaApplySidecar(spec)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ConfirmSchemaApply(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.ProtocolV7.EffectPhase != EffectsConfirmed || s.ProtocolV7.EffectPhase != Armed {
		t.Fatal("phase not moved")
	}
	for phase, sc := range map[EffectPhase]*Sidecar{Armed: s, EffectsConfirmed: c} {
		out, err := Marshal(sc)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"\n  \"tables\": [],\n", "\n    \"effects\": [],\n", "\n      \"table_updates\": [],\n",
			`"effect_phase": "` + string(phase) + `"`, `"tombstone_version": 8`, `"expected_table_key": "edge:Knows"`} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("%s: %q missing:\n%s", phase, want, out)
			}
		}
		if strings.Contains(string(out), `"registrations"`) {
			t.Fatalf("%s: empty registrations written:\n%s", phase, out)
		}
		back, err := Parse(Key(sc.OperationID), out, goldenRoot)
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		again, _ := Marshal(back)
		assertJSON(t, again, string(out))
	}
	_, err = s.ConfirmSchemaApply(map[ids.TableIdentity]SchemaApplyDone{idPerson: {}})
	wantRefusal(t, err, KindConfirm, "key set differs")

	// With nothing at all in the delta it is still a valid intent (index/enum-only applies).
	spec.Renames, spec.Tombstones = nil, nil
	s, err = NewSchemaApplySidecar(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfirmSchemaApply(map[ids.TableIdentity]SchemaApplyDone{}); err != nil {
		t.Fatal(err)
	}
}

func v7(m jmap) jmap { return obj(m, "protocol_v7") }

func delta7(m jmap) jmap { return obj(m, "protocol_v7", "intended_delta") }

func jnum(v int) json.Number { return json.Number(itoa(v)) }

// Every SchemaApply shape invariant, each broken on its own, is refused with its reason.
func TestSchemaApplyShapeRefused(t *testing.T) {
	A, C := goldenSchemaArmed, goldenSchemaConfirmed
	const (
		envelope  = "must target main and carry authority/delta only in protocol_v7"
		lineage   = "actor/main lineage fields do not match"
		commitIDs = "original and rollback commit ids must be non-empty and distinct"
		oneToOne  = "pins, effects, transaction UUIDs, and delta slots must be unique and one-to-one"
		disjoint  = "first-touch effects must match unique registration identities"
		renameBad = "must carry a live expected version, change alias, and preserve canonical path"
		preState  = "does not match its pin/delta pre-state"
		firstT    = "inconsistent first-touch identity"
		confirmed = "confirmation differs from its exact plan"
	)
	copyV7 := func(m jmap) jmap {
		p := jmap{}
		for k, v := range v7(m) {
			p[k] = v
		}
		p["effects"] = []any{}
		return p
	}
	cases := []struct {
		name   string
		base   string
		edit   func(m jmap)
		kind   ErrorKind
		reason string
	}{
		// Envelope.
		{"branch main spelled out", A, func(m jmap) { m["branch"] = "main" }, KindShape, envelope},
		{"named branch", A, func(m jmap) { m["branch"] = "feature" }, KindShape, envelope},
		{"protocol_v3 too", A, func(m jmap) { m["protocol_v3"] = copyV7(m) }, KindShape, envelope},
		{"protocol_v4 too", A, func(m jmap) { m["protocol_v4"] = copyV7(m) }, KindShape, envelope},
		{"protocol_v8 too", A, func(m jmap) { m["protocol_v8"] = jmap{} }, KindShape, envelope},
		{"merge_source_commit_id", A, func(m jmap) { m["merge_source_commit_id"] = goldenCommit }, KindShape, envelope},
		{"legacy additional_registrations", A, func(m jmap) { m["additional_registrations"] = []any{jmap{}} }, KindShape, envelope},
		{"legacy top-level tombstones", A, func(m jmap) { m["tombstones"] = []any{jmap{}} }, KindShape, envelope},
		{"schema-v5 confirmation", A, func(m jmap) { m["schema_apply_manifest_published"] = true }, KindShape, "schema-v5"},
		{"schema-v5 target", A, func(m jmap) { m["schema_apply_target_schema_ir_hash"] = "sha256:cd34" }, KindShape, "schema-v5"},
		{"schema-v6 rollback", A, func(m jmap) { m["ensure_indices_rollback_v6"] = jmap{} }, KindShape, "schema-v6"},
		{"no protocol_v7", A, func(m jmap) { delete(m, "protocol_v7") }, KindShape, "missing required protocol_v7"},
		// Authority, target, lineage.
		{"empty schema domain", A, func(m jmap) { obj(v7(m), "authority")["schema_identity_domain"] = "" }, KindShape, "authority must carry"},
		{"empty schema hash", A, func(m jmap) { obj(v7(m), "authority")["schema_ir_hash"] = "" }, KindShape, "authority must carry"},
		{"zero identity version", A, func(m jmap) { obj(v7(m), "authority")["schema_identity_version"] = jnum(0) }, KindShape, "authority must carry"},
		{"empty target hash", A, func(m jmap) { v7(m)["target_schema_ir_hash"] = "" }, KindShape, "empty target schema identity"},
		{"actor differs", A, func(m jmap) { obj(v7(m), "lineage")["actor_id"] = "bob" }, KindShape, lineage},
		{"actor null vs set", A, func(m jmap) { m["actor_id"] = nil }, KindShape, lineage},
		{"lineage branch main spelled out", A, func(m jmap) { obj(v7(m), "lineage")["branch"] = "main" }, KindShape, lineage},
		{"lineage merged parent", A, func(m jmap) { obj(v7(m), "lineage")["merged_parent_commit_id"] = goldenOp }, KindShape, lineage},
		{"empty lineage commit", A, func(m jmap) { obj(v7(m), "lineage")["graph_commit_id"] = "" }, KindShape, commitIDs},
		{"empty rollback commit", A, func(m jmap) { v7(m)["rollback_graph_commit_id"] = "" }, KindShape, commitIDs},
		{"rollback == commit", A, func(m jmap) { v7(m)["rollback_graph_commit_id"] = goldenCommit }, KindShape, commitIDs},
		// Pins.
		{"zero pin identity", A, func(m jmap) { obj(m, "tables", 0)["identity"] = ident(0, 4) }, KindShape, "invalid table identity"},
		{"bad pin key", A, func(m jmap) { obj(m, "tables", 0)["table_key"] = "Person" }, KindShape, "invalid table key"},
		{"non-canonical pin path", A, func(m jmap) {
			obj(m, "tables", 0)["table_path"] = "/data/g1/nodes/0000000000000001-0000000000000005"
		}, KindShape, "canonical suffix"},
		{"duplicate pin alias", A, func(m jmap) {
			p := obj(m, "tables", 2)
			p["table_key"], p["table_path"] = "node:Person", "/data/g1/nodes/000000000000001a-00000000000000ff"
		}, KindShape, "duplicate table alias"},
		{"foreign root", A, func(m jmap) {
			obj(m, "tables", 0)["table_path"] = "/data/g2/nodes/0000000000000001-0000000000000004"
		}, KindForeignRoot, "foreign or non-canonical path"},
		// Pins, effects, slots one-to-one; planned uuids.
		{"effect missing", A, func(m jmap) { v7(m)["effects"] = arr(v7(m), "effects")[:2] }, KindShape, oneToOne},
		{"slot missing", A, func(m jmap) { delta7(m)["table_updates"] = arr(delta7(m), "table_updates")[:2] }, KindShape, oneToOne},
		{"extra effect", A, func(m jmap) {
			e := jmap{"identity": ident(9, 9), "table_key": "node:X", "kind": jmap{"kind": "ExistingOverwrite",
				"planned_transaction": jmap{"read_version": jnum(1), "uuid": "omnigraph-schema-x"}}}
			v7(m)["effects"] = append(arr(v7(m), "effects"), e)
		}, KindShape, oneToOne},
		{"duplicate effect identity", A, func(m jmap) { obj(v7(m), "effects", 2)["identity"] = ident(1, 4) }, KindShape, oneToOne},
		{"foreign effect identity", A, func(m jmap) { obj(v7(m), "effects", 0)["identity"] = ident(9, 9) }, KindShape, oneToOne},
		{"duplicate slot identity", A, func(m jmap) { obj(delta7(m), "table_updates", 2)["identity"] = ident(1, 4) }, KindShape, oneToOne},
		{"duplicate planned uuid", A, func(m jmap) {
			obj(v7(m), "effects", 2, "kind", "planned_transaction")["uuid"] = schemaUUIDPerson
		}, KindShape, oneToOne},
		{"empty planned uuid", A, func(m jmap) { obj(v7(m), "effects", 0, "kind", "planned_transaction")["uuid"] = "" }, KindShape, oneToOne},
		// Registrations, renames, tombstones: first touch == registrations, identity-disjoint.
		{"first touch without registration", A, func(m jmap) { delete(delta7(m), "registrations") }, KindShape, disjoint},
		{"registration without first touch", A, func(m jmap) {
			delta7(m)["registrations"] = append(arr(delta7(m), "registrations"),
				jmap{"identity": ident(1, 4), "table_key": "node:Person", "table_path": "nodes/0000000000000001-0000000000000004"})
		}, KindShape, disjoint},
		{"duplicate registration", A, func(m jmap) {
			delta7(m)["registrations"] = append(arr(delta7(m), "registrations"), get(m, "protocol_v7", "intended_delta", "registrations", 0))
		}, KindShape, disjoint},
		{"duplicate rename", A, func(m jmap) {
			delta7(m)["renames"] = append(arr(delta7(m), "renames"), get(m, "protocol_v7", "intended_delta", "renames", 0))
		}, KindShape, disjoint},
		{"duplicate tombstone", A, func(m jmap) {
			delta7(m)["tombstones"] = append(arr(delta7(m), "tombstones"), get(m, "protocol_v7", "intended_delta", "tombstones", 0))
		}, KindShape, disjoint},
		{"rename of a registered identity", A, func(m jmap) { obj(delta7(m), "renames", 0)["identity"] = ident(10, 11) }, KindShape, disjoint},
		{"tombstone of a registered identity", A, func(m jmap) { obj(delta7(m), "tombstones", 0)["identity"] = ident(10, 11) }, KindShape, disjoint},
		{"tombstone of a renamed identity", A, func(m jmap) { obj(delta7(m), "tombstones", 0)["identity"] = ident(26, 255) }, KindShape, disjoint},
		{"registration path absolute", A, func(m jmap) {
			obj(delta7(m), "registrations", 0)["table_path"] = "/data/g1/nodes/000000000000000a-000000000000000b"
		}, KindShape, `alias "node:Tag" has path "/data/g1/nodes/000000000000000a-000000000000000b", expected "nodes/000000000000000a-000000000000000b"`},
		{"registration path of another identity", A, func(m jmap) {
			obj(delta7(m), "registrations", 0)["table_path"] = "nodes/000000000000000a-000000000000000c"
		}, KindShape, "expected \"nodes/000000000000000a-000000000000000b\""},
		{"registration path under edges", A, func(m jmap) {
			obj(delta7(m), "registrations", 0)["table_path"] = "edges/000000000000000a-000000000000000b"
		}, KindShape, "has path"},
		{"registration invalid key", A, func(m jmap) { obj(delta7(m), "registrations", 0)["table_key"] = "Tag" }, KindShape, "has invalid table key \"Tag\""},
		{"registration alias differs from effect", A, func(m jmap) { obj(delta7(m), "registrations", 0)["table_key"] = "node:Label" }, KindShape, "registration alias \"node:Label\" but effect alias \"node:Tag\""},
		{"registration on a branch", A, func(m jmap) { obj(delta7(m), "registrations", 0)["table_branch"] = "feature" }, KindShape, "registrations must target main"},
		{"rename zero identity", A, func(m jmap) { obj(delta7(m), "renames", 0)["identity"] = ident(0, 255) }, KindShape, "invalid rename identity"},
		{"rename invalid key", A, func(m jmap) { obj(delta7(m), "renames", 0)["expected_table_key"] = "Knows" }, KindShape, "invalid table key"},
		{"rename expected_version 0", A, func(m jmap) { obj(delta7(m), "renames", 0)["expected_version"] = jnum(0) }, KindShape, renameBad},
		{"rename keeps its alias", A, func(m jmap) { obj(delta7(m), "renames", 0)["expected_table_key"] = "edge:Follows" }, KindShape, renameBad},
		{"rename changes kind", A, func(m jmap) { obj(delta7(m), "renames", 0)["expected_table_key"] = "node:Knows" }, KindShape, renameBad},
		{"rename path absolute", A, func(m jmap) {
			obj(delta7(m), "renames", 0)["table_path"] = "/data/g1/edges/000000000000001a-00000000000000ff"
		}, KindShape, renameBad},
		{"rename version differs from its slot", A, func(m jmap) { obj(delta7(m), "renames", 0)["expected_version"] = jnum(5) }, KindShape, "does not match its physical output alias/version"},
		{"rename alias differs from its slot", A, func(m jmap) { obj(delta7(m), "renames", 0)["table_key"] = "edge:Likes" }, KindShape, "does not match its physical output alias/version"},
		{"two live identities for one alias", A, func(m jmap) {
			delta7(m)["renames"] = append(arr(delta7(m), "renames"), jmap{"identity": ident(7, 8), "expected_table_key": "node:Label",
				"expected_version": jnum(4), "table_key": "node:Tag", "table_path": "nodes/0000000000000007-0000000000000008"})
		}, KindShape, "binds more than one live identity to alias \"node:Tag\""},
		{"tombstone zero identity", A, func(m jmap) { obj(delta7(m), "tombstones", 0)["identity"] = ident(5, 0) }, KindShape, "invalid tombstone identity"},
		{"tombstone version 0", A, func(m jmap) { obj(delta7(m), "tombstones", 0)["tombstone_version"] = jnum(0) }, KindShape, "tombstone_version 0"},
		// Rollback audit outcomes name restored aliases (a renamed table's old alias).
		{"outcome under the new alias", A, func(m jmap) {
			v7(m)["rollback_audit_outcomes"] = []any{jmap{"table_key": "edge:Follows", "from_version": jnum(3), "to_version": jnum(2)}}
		}, KindShape, "unique subset of restored table aliases"},
		{"outcome not a pin", A, func(m jmap) {
			v7(m)["rollback_audit_outcomes"] = []any{jmap{"table_key": "node:Old", "from_version": jnum(3), "to_version": jnum(2)}}
		}, KindShape, "unique subset of restored table aliases"},
		{"duplicate outcome", A, func(m jmap) {
			o := jmap{"table_key": "node:Person", "from_version": jnum(4), "to_version": jnum(3)}
			v7(m)["rollback_audit_outcomes"] = []any{o, o}
		}, KindShape, "unique subset of restored table aliases"},
		// Per table.
		{"pin on a branch", A, func(m jmap) { obj(m, "tables", 0)["table_branch"] = "feature" }, KindShape, "table \"node:Person\" must target main"},
		{"effect alias differs", A, func(m jmap) { obj(v7(m), "effects", 0)["table_key"] = "node:Human" }, KindShape, "inconsistent aliases"},
		{"slot alias differs", A, func(m jmap) { obj(delta7(m), "table_updates", 0)["table_key"] = "node:Human" }, KindShape, "inconsistent aliases"},
		{"planned read_version differs", A, func(m jmap) {
			obj(v7(m), "effects", 0, "kind", "planned_transaction")["read_version"] = jnum(2)
		}, KindShape, preState},
		{"post_commit_pin not expected+1", A, func(m jmap) { obj(m, "tables", 0)["post_commit_pin"] = jnum(5) }, KindShape, preState},
		{"slot expected_version differs", A, func(m jmap) { obj(delta7(m), "table_updates", 0)["expected_version"] = jnum(2) }, KindShape, preState},
		{"slot on a branch", A, func(m jmap) { obj(delta7(m), "table_updates", 0)["table_branch"] = "feature" }, KindShape, preState},
		{"first touch at a live version", A, func(m jmap) {
			obj(v7(m), "effects", 0, "kind")["kind"] = "FirstTouchDataset"
			delta7(m)["registrations"] = append(arr(delta7(m), "registrations"),
				jmap{"identity": ident(1, 4), "table_key": "node:Person", "table_path": "nodes/0000000000000001-0000000000000004"})
		}, KindShape, firstT},
		{"overwrite at version 0", A, func(m jmap) {
			obj(v7(m), "effects", 1, "kind")["kind"] = "ExistingOverwrite"
			delete(delta7(m), "registrations")
		}, KindShape, firstT},
		// Phases.
		{"Armed with confirmed_transaction", A, func(m jmap) {
			obj(v7(m), "effects", 0, "kind")["confirmed_transaction"] = jmap{"read_version": jnum(3), "uuid": schemaUUIDPerson}
		}, KindShape, "Armed effect \"node:Person\" already carries confirmation"},
		{"Armed with confirmed slot", C, func(m jmap) {
			v7(m)["effect_phase"] = "Armed"
			for _, e := range arr(v7(m), "effects") {
				delete(obj(e.(jmap), "kind"), "confirmed_transaction")
			}
			for _, p := range arr(m, "tables") {
				delete(p.(jmap), "confirmed_version")
			}
		}, KindShape, "already carries confirmation"},
		{"Armed with confirmed_version", A, func(m jmap) { obj(m, "tables", 1)["confirmed_version"] = jnum(1) }, KindShape, "Armed effect \"node:Tag\" already carries confirmation"},
		{"confirmed without confirmed_transaction", C, func(m jmap) {
			delete(obj(v7(m), "effects", 1, "kind"), "confirmed_transaction")
		}, KindShape, "EffectsConfirmed effect \"node:Tag\" lacks transaction confirmation"},
		{"confirmed without slot output", C, func(m jmap) {
			delete(obj(delta7(m), "table_updates", 2), "confirmed")
		}, KindShape, "EffectsConfirmed effect \"edge:Follows\" lacks a manifest output"},
		{"confirmed transaction differs", C, func(m jmap) {
			obj(v7(m), "effects", 0, "kind", "confirmed_transaction")["uuid"] = "omnigraph-schema-other"
		}, KindShape, confirmed},
		{"confirmed version is not the post-commit pin", C, func(m jmap) {
			obj(delta7(m), "table_updates", 0, "confirmed")["table_version"] = jnum(5)
			obj(m, "tables", 0)["confirmed_version"] = jnum(5)
		}, KindShape, confirmed},
		{"confirmed on a branch", C, func(m jmap) {
			obj(delta7(m), "table_updates", 0, "confirmed")["table_branch"] = "feature"
		}, KindShape, confirmed},
		{"pin confirmed_version missing", C, func(m jmap) { delete(obj(m, "tables", 2), "confirmed_version") }, KindShape, confirmed},
		{"pin confirmed_version differs", C, func(m jmap) { obj(m, "tables", 2)["confirmed_version"] = jnum(4) }, KindShape, confirmed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := generic(t, c.base)
			c.edit(m)
			_, err := Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
			wantRefusal(t, err, c.kind, c.reason)
		})
	}
}

// Legal variations the reference also accepts.
func TestSchemaApplyShapeAccepted(t *testing.T) {
	cases := map[string]struct {
		base string
		edit func(m jmap)
	}{
		"explicit null registration branch": {goldenSchemaArmed, func(m jmap) { obj(delta7(m), "registrations", 0)["table_branch"] = nil }},
		"absent Option keys": {goldenSchemaArmed, func(m jmap) {
			delete(m, "branch")
			delete(obj(v7(m), "lineage"), "branch")
			delete(obj(v7(m), "lineage"), "merged_parent_commit_id")
			delete(obj(v7(m), "authority"), "graph_head")
		}},
		"explicit null effect confirmation": {goldenSchemaArmed, func(m jmap) { obj(v7(m), "effects", 0, "kind")["confirmed_transaction"] = nil }},
		"empty delta arrays":                {goldenSchemaArmed, func(m jmap) { delta7(m)["renames"], delta7(m)["tombstones"] = []any{}, []any{} }},
		"unknown keys ignored": {goldenSchemaConfirmed, func(m jmap) {
			obj(v7(m), "effects", 0, "kind")["note"] = 1
			obj(delta7(m), "renames", 0)["note"] = "x"
			v7(m)["future"] = jmap{}
		}},
		"prepared rollback under old aliases": {goldenSchemaConfirmed, func(m jmap) {
			v7(m)["rollback_audit_outcomes"] = []any{
				jmap{"table_key": "edge:Knows", "from_version": jnum(3), "to_version": jnum(2)},
				jmap{"table_key": "node:Person", "from_version": jnum(4), "to_version": jnum(3)},
			}
		}},
		"lineage-only prepared rollback": {goldenSchemaArmed, func(m jmap) { v7(m)["rollback_audit_outcomes"] = []any{} }},
		"metadata-only rename (no physical slot)": {goldenSchemaArmed, func(m jmap) {
			m["tables"] = arr(m, "tables")[:2]
			v7(m)["effects"] = arr(v7(m), "effects")[:2]
			delta7(m)["table_updates"] = arr(delta7(m), "table_updates")[:2]
		}},
		"metadata-only apply, confirmed": {goldenSchemaConfirmed, func(m jmap) {
			m["tables"], v7(m)["effects"] = []any{}, []any{}
			delta7(m)["table_updates"] = []any{}
			delete(delta7(m), "registrations")
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := generic(t, c.base)
			c.edit(m)
			s, err := Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(Key(goldenOp), out, goldenRoot)
			if err != nil {
				t.Fatalf("written form refused: %v", err)
			}
			again, _ := Marshal(back)
			assertJSON(t, again, string(out))
		})
	}
}

// The typed payload is decoded as strictly as the rest of the envelope.
func TestSchemaApplyCorruptRefused(t *testing.T) {
	A, C := goldenSchemaArmed, goldenSchemaConfirmed
	cases := map[string]struct{ doc, reason string }{
		"unknown effect kind":       {mustReplace(A, `"kind": "FirstTouchDataset"`, `"kind": "FirstTouch"`), "protocol_v7: effects: [1]: kind: kind: unknown variant `FirstTouch`"},
		"lowercase effect kind":     {mustReplace(A, `"kind": "ExistingOverwrite"`, `"kind": "existingOverwrite"`), "unknown variant `existingOverwrite`"},
		"effect kind not an object": {mustReplace(A, `"kind": {`, `"kind": "ExistingOverwrite", "x": {`), "effects: [0]: kind: expected an object, found a string"},
		"effect kind without tag":   {mustReplace(A, `"kind": "ExistingOverwrite",`, ``), "effects: [0]: kind: missing field `kind`"},
		"effect without kind":       {mustReplace(A, `"kind": {`, `"other": {`), "effects: [0]: missing field `kind`"},
		"effect without planned transaction": {mustReplace(A, `"planned_transaction": {
            "read_version": 3,`, `"other": {
            "read_version": 3,`), "effects: [0]: kind: missing field `planned_transaction`"},
		"null planned transaction":   {mustReplace(A, `"planned_transaction": {`, `"planned_transaction": null, "x": {`), "planned_transaction: invalid type: null"},
		"duplicate kind tag":         {mustReplace(A, `"kind": "ExistingOverwrite",`, `"kind": "ExistingOverwrite", "kind": "ExistingOverwrite",`), "duplicate field `kind`"},
		"missing target hash":        {mustReplace(A, `"target_schema_ir_hash": "sha256:cd34",`, ``), "protocol_v7: missing field `target_schema_ir_hash`"},
		"null target hash":           {mustReplace(A, `"target_schema_ir_hash": "sha256:cd34"`, `"target_schema_ir_hash": null`), "target_schema_ir_hash: invalid type: null"},
		"missing effects":            {mustReplace(A, `"effects": [`, `"x": [`), "protocol_v7: missing field `effects`"},
		"null registrations":         {mustReplace(A, `"registrations": [`, `"registrations": null, "x": [`), "registrations: invalid type: null"},
		"registration without path":  {mustReplace(A, `"table_path": "nodes/000000000000000a-000000000000000b"`, `"x": 1`), "registrations: [0]: missing field `table_path`"},
		"registration branch number": {mustReplace(A, `"table_path": "nodes/000000000000000a-000000000000000b"`, `"table_path": "nodes/000000000000000a-000000000000000b", "table_branch": 1`), "registrations: [0]: table_branch"},
		"rename without expected version": {mustReplace(A, `"expected_version": 2,
          "table_key": "edge:Follows"`, `"table_key": "edge:Follows"`), "renames: [0]: missing field `expected_version`"},
		"rename without expected key": {mustReplace(A, `"expected_table_key": "edge:Knows",`, ``), "renames: [0]: missing field `expected_table_key`"},
		"tombstone version string":    {mustReplace(A, `"tombstone_version": 8`, `"tombstone_version": "8"`), "tombstones: [0]: tombstone_version"},
		"tombstone version negative":  {mustReplace(A, `"tombstone_version": 8`, `"tombstone_version": -8`), "tombstone_version"},
		"tombstone without identity": {mustReplace(A, `"stable_table_id": 5,
            "table_incarnation_id": 6`, `"x": 5`), "tombstones: [0]: identity: missing field `stable_table_id`"},
		"confirmed_transaction not an object": {mustReplace(C, `"confirmed_transaction": {`, `"confirmed_transaction": [], "x": {`), "confirmed_transaction"},
		"protocol_v7 an array":                {mustReplace(A, `"protocol_v7": {`, `"protocol_v7": [], "x": {`), "protocol_v7: expected an object, found an array"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(Key(goldenOp), []byte(c.doc), goldenRoot)
			wantRefusal(t, err, KindCorrupt, c.reason)
		})
	}
}

// Writing refuses a value the reader would refuse.
func TestSchemaApplyMarshalRefusesUnknownEnums(t *testing.T) {
	s := newSchemaArmed(t)
	s.ProtocolV7.Effects[0].Kind = "Other"
	if _, err := Marshal(s); err == nil || !strings.Contains(err.Error(), "unknown schema-apply effect kind") {
		t.Fatalf("got %v", err)
	}
	s = newSchemaArmed(t)
	s.ProtocolV7.EffectPhase = "Done"
	if _, err := Marshal(s); err == nil || !strings.Contains(err.Error(), "unknown effect_phase") {
		t.Fatalf("got %v", err)
	}
	s = newSchemaArmed(t)
	s.ProtocolV7.Effects[0].Kind = "Other"
	wantRefusal(t, s.Validate(goldenRoot), KindShape, "unknown effect kind \"Other\"")
}
