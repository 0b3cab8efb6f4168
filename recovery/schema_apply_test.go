package recovery

import (
	"bytes"
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
