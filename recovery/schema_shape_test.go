package recovery

import (
	"encoding/json"
	"strings"
	"testing"
)

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
