package recovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func compactJSON(buf *bytes.Buffer, doc string) error { return json.Compact(buf, []byte(doc)) }

type jmap = map[string]any

// generic decodes a golden into maps so a case can edit it.
func generic(t *testing.T, doc string) jmap {
	t.Helper()
	var m jmap
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func get(m jmap, path ...any) any {
	var cur any = m
	for _, p := range path {
		switch k := p.(type) {
		case string:
			cur = cur.(jmap)[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur
}

func obj(m jmap, path ...any) jmap { return get(m, path...).(jmap) }

func arr(m jmap, path ...any) []any { return get(m, path...).([]any) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantRefusal(t *testing.T, err error, kind ErrorKind, reason string) {
	t.Helper()
	var se *SidecarError
	if !errors.As(err, &se) {
		t.Fatalf("want *SidecarError %s %q, got %v", kind, reason, err)
	}
	if se.Kind != kind || !strings.Contains(se.Reason, reason) {
		t.Fatalf("want %s containing %q, got %s: %s", kind, reason, se.Kind, se.Reason)
	}
}

func v3(m jmap) jmap { return obj(m, "protocol_v3") }

func ident(s, i int) jmap {
	return jmap{"stable_table_id": json.Number(itoa(s)), "table_incarnation_id": json.Number(itoa(i))}
}

func itoa(v int) string { b, _ := json.Marshal(v); return string(b) }

// Every §4.1 Mutation/Load shape invariant, each broken on its own, is refused with its reason.
func TestShapeInvariantsRefused(t *testing.T) {
	type tc struct {
		name   string
		base   string // goldenArmed or goldenConfirmed
		edit   func(m jmap)
		kind   ErrorKind
		reason string
	}
	C, A := goldenConfirmed, goldenArmed
	cases := []tc{
		{"effect missing", C, func(m jmap) { v3(m)["effects"] = arr(v3(m), "effects")[:1] }, KindShape, "not one-to-one"},
		{"slot missing", C, func(m jmap) {
			obj(v3(m), "intended_delta")["table_updates"] = arr(v3(m), "intended_delta", "table_updates")[:1]
		}, KindShape, "not one-to-one"},
		{"duplicate effect identity", C, func(m jmap) { obj(v3(m), "effects", 1)["identity"] = ident(1, 4) }, KindShape, "not one-to-one"},
		{"foreign effect identity", C, func(m jmap) { obj(v3(m), "effects", 1)["identity"] = ident(9, 9) }, KindShape, "not one-to-one"},
		{"extra effect", C, func(m jmap) {
			e := jmap{"identity": ident(9, 9), "table_key": "node:X", "planned_transaction": jmap{"read_version": json.Number("0"), "uuid": "zz"}}
			v3(m)["effects"] = append(arr(v3(m), "effects"), e)
		}, KindShape, "not one-to-one"},
		{"duplicate slot identity", C, func(m jmap) { obj(v3(m), "intended_delta", "table_updates", 1)["identity"] = ident(1, 4) }, KindShape, "not one-to-one"},
		{"duplicate planned uuid", C, func(m jmap) {
			obj(v3(m), "effects", 1, "planned_transaction")["uuid"] = uuidPerson
			obj(v3(m), "effects", 1, "confirmed_transaction")["uuid"] = uuidPerson
		}, KindShape, "not one-to-one"},
		{"duplicate pin identity", C, func(m jmap) {
			p := obj(m, "tables", 1)
			p["identity"], p["table_key"], p["table_path"] = ident(1, 4), "node:Other", "/data/g1/nodes/0000000000000001-0000000000000004"
		}, KindShape, "duplicate table identity"},
		{"duplicate pin alias", C, func(m jmap) {
			p := obj(m, "tables", 1)
			p["table_key"], p["table_path"] = "node:Person", "/data/g1/nodes/000000000000001a-00000000000000ff"
		}, KindShape, "duplicate table alias"},
		{"effect alias disagrees", C, func(m jmap) { obj(v3(m), "effects", 0)["table_key"] = "node:Human" }, KindShape, "inconsistent aliases"},
		{"slot alias disagrees", C, func(m jmap) { obj(v3(m), "intended_delta", "table_updates", 0)["table_key"] = "node:Human" }, KindShape, "inconsistent aliases"},
		{"read_version != expected_version", A, func(m jmap) {
			obj(v3(m), "effects", 0, "planned_transaction")["read_version"] = json.Number("2")
		}, KindShape, "reads version 2, pin expects 3"},
		{"slot expected_version", A, func(m jmap) { obj(v3(m), "intended_delta", "table_updates", 0)["expected_version"] = json.Number("2") }, KindShape, "pre-state"},
		{"slot table_branch", A, func(m jmap) { obj(v3(m), "intended_delta", "table_updates", 0)["table_branch"] = "feature" }, KindShape, "pre-state"},
		{"post_commit_pin not expected+1", A, func(m jmap) { obj(m, "tables", 0)["post_commit_pin"] = json.Number("5") }, KindShape, "post_commit_pin 5 is not expected_version 3 + 1"},
		{"Armed with confirmed_transaction", A, func(m jmap) {
			obj(v3(m), "effects", 0)["confirmed_transaction"] = jmap{"read_version": json.Number("3"), "uuid": uuidPerson}
		}, KindShape, "Armed effect \"node:Person\" already carries confirmation"},
		{"Armed with confirmed slot", C, func(m jmap) {
			v3(m)["effect_phase"] = "Armed"
			for _, e := range arr(v3(m), "effects") {
				delete(e.(jmap), "confirmed_transaction")
			}
			for _, p := range arr(m, "tables") {
				delete(p.(jmap), "confirmed_version")
			}
		}, KindShape, "already carries confirmation"},
		{"Armed with confirmed_version", A, func(m jmap) { obj(m, "tables", 0)["confirmed_version"] = json.Number("4") }, KindShape, "already carries confirmation"},
		{"EffectsConfirmed without confirmed_transaction", C, func(m jmap) { delete(obj(v3(m), "effects", 1), "confirmed_transaction") }, KindShape, "lacks a confirmed transaction"},
		{"EffectsConfirmed without slot confirmed", C, func(m jmap) { delete(obj(v3(m), "intended_delta", "table_updates", 1), "confirmed") }, KindShape, "lacks a confirmed manifest update"},
		{"confirmed transaction differs", C, func(m jmap) { obj(v3(m), "effects", 0, "confirmed_transaction")["uuid"] = "other" }, KindShape, "differs from its planned identity"},
		{"confirmed version differs from pin", C, func(m jmap) { obj(m, "tables", 0)["confirmed_version"] = json.Number("5") }, KindShape, "confirmed update for \"node:Person\" does not match its table pin"},
		{"pin confirmed_version missing", C, func(m jmap) { delete(obj(m, "tables", 0), "confirmed_version") }, KindShape, "does not match its table pin"},
		{"confirmed branch differs", C, func(m jmap) { obj(v3(m), "intended_delta", "table_updates", 1, "confirmed")["table_branch"] = nil }, KindShape, "confirmed update for \"edge:Knows\" does not match"},
		{"empty Load", A, func(m jmap) {
			m["tables"], v3(m)["effects"] = []any{}, []any{}
			obj(v3(m), "intended_delta")["table_updates"] = []any{}
		}, KindShape, "must not be empty"},
		{"zero identity", A, func(m jmap) { obj(m, "tables", 0)["identity"] = ident(0, 4) }, KindShape, "invalid table identity"},
		{"bad table key", A, func(m jmap) { obj(m, "tables", 0)["table_key"] = "Person" }, KindShape, "invalid table key"},
		{"non-canonical path suffix", A, func(m jmap) {
			obj(m, "tables", 0)["table_path"] = "/data/g1/nodes/0000000000000001-0000000000000005"
		}, KindShape, "canonical suffix"},
		{"empty schema domain", A, func(m jmap) { obj(v3(m), "authority")["schema_identity_domain"] = "" }, KindShape, "authority must carry"},
		{"empty schema hash", A, func(m jmap) { obj(v3(m), "authority")["schema_ir_hash"] = "" }, KindShape, "authority must carry"},
		{"zero identity version", A, func(m jmap) { obj(v3(m), "authority")["schema_identity_version"] = json.Number("0") }, KindShape, "authority must carry"},
		{"branch mismatch", C, func(m jmap) { obj(v3(m), "lineage")["branch"] = nil }, KindShape, "branch does not match"},
		{"actor mismatch", A, func(m jmap) { obj(v3(m), "lineage")["actor_id"] = "bob" }, KindShape, "actor_id does not match"},
		{"actor null vs set", A, func(m jmap) { m["actor_id"] = nil }, KindShape, "actor_id does not match"},
		{"merged parent", A, func(m jmap) { obj(v3(m), "lineage")["merged_parent_commit_id"] = goldenOp }, KindShape, "merged parent"},
		{"rollback id == commit id", A, func(m jmap) { v3(m)["rollback_graph_commit_id"] = goldenCommit }, KindShape, "must differ"},
		{"outcome not a pin", A, func(m jmap) {
			v3(m)["rollback_audit_outcomes"] = []any{jmap{"table_key": "node:X", "from_version": json.Number("4"), "to_version": json.Number("3")}}
		}, KindShape, "unique subset"},
		{"duplicate outcome", A, func(m jmap) {
			o := jmap{"table_key": "node:Person", "from_version": json.Number("4"), "to_version": json.Number("3")}
			v3(m)["rollback_audit_outcomes"] = []any{o, o}
		}, KindShape, "unique subset"},
		{"no protocol_v3", A, func(m jmap) { delete(m, "protocol_v3") }, KindShape, "missing required protocol_v3"},
		{"protocol_v4 on Load", A, func(m jmap) {
			p4 := jmap{}
			for k, v := range v3(m) {
				p4[k] = v
			}
			p4["effects"] = []any{}
			m["protocol_v4"] = p4
		}, KindShape, "only the protocol_v3"},
		{"protocol_v7 on Load", A, func(m jmap) {
			p7 := jmap{}
			for k, v := range v3(m) {
				p7[k] = v
			}
			p7["effects"], p7["target_schema_ir_hash"] = []any{}, "sha256:t"
			m["protocol_v7"] = p7
		}, KindShape, "only the protocol_v3"},
		{"merge_source_commit_id on Load", A, func(m jmap) { m["merge_source_commit_id"] = goldenCommit }, KindShape, "only the protocol_v3"},
		{"additional_registrations", A, func(m jmap) { m["additional_registrations"] = []any{jmap{}} }, KindShape, "cannot register"},
		{"envelope tombstones", A, func(m jmap) { m["tombstones"] = []any{jmap{}} }, KindShape, "cannot register"},
		{"delta registrations", A, func(m jmap) {
			obj(v3(m), "intended_delta")["registrations"] = []any{jmap{"identity": ident(9, 9), "table_key": "node:X", "table_path": "nodes/0000000000000009-0000000000000009"}}
		}, KindShape, "cannot register"},
		{"delta renames", A, func(m jmap) {
			obj(v3(m), "intended_delta")["renames"] = []any{jmap{"identity": ident(9, 9), "expected_table_key": "node:X", "expected_version": json.Number("1"),
				"table_key": "node:Y", "table_path": "nodes/0000000000000009-0000000000000009"}}
		}, KindShape, "cannot register"},
		{"delta tombstones", A, func(m jmap) {
			obj(v3(m), "intended_delta")["tombstones"] = []any{jmap{"identity": ident(9, 9), "table_key": "node:X", "tombstone_version": json.Number("2")}}
		}, KindShape, "cannot register"},
		{"schema_apply_manifest_published", A, func(m jmap) { m["schema_apply_manifest_published"] = true }, KindShape, "schema-v5"},
		{"schema_apply_target_schema_ir_hash", A, func(m jmap) { m["schema_apply_target_schema_ir_hash"] = "sha256:x" }, KindShape, "schema-v5"},
		{"ensure_indices_rollback_v6", A, func(m jmap) { m["ensure_indices_rollback_v6"] = jmap{} }, KindShape, "schema-v6"},
		{"foreign root", A, func(m jmap) {
			obj(m, "tables", 0)["table_path"] = "/data/g2/nodes/0000000000000001-0000000000000004"
		}, KindForeignRoot, "foreign or non-canonical path"},
		{"relative pin path", A, func(m jmap) { obj(m, "tables", 0)["table_path"] = "nodes/0000000000000001-0000000000000004" }, KindForeignRoot, "expected exact graph-owned path"},
		{"operation_id differs from stem", A, func(m jmap) { m["operation_id"] = goldenCommit }, KindName, "does not equal the file stem"},
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
func TestShapeAccepted(t *testing.T) {
	cases := map[string]struct {
		base string
		edit func(m jmap)
	}{
		"lineage branch main == envelope null": {goldenArmed, func(m jmap) { obj(v3(m), "lineage")["branch"] = "main" }},
		"absent Option keys read as null": {goldenArmed, func(m jmap) {
			delete(m, "branch")
			delete(obj(v3(m), "authority"), "graph_head")
			delete(obj(v3(m), "lineage"), "branch")
			delete(obj(v3(m), "lineage"), "merged_parent_commit_id")
			delete(m, "schema_apply_manifest_published")
		}},
		"explicit null optionals": {goldenArmed, func(m jmap) {
			m["merge_source_commit_id"], m["protocol_v4"], v3(m)["rollback_audit_outcomes"] = nil, nil, nil
			obj(m, "tables", 0)["confirmed_version"], obj(m, "tables", 0)["table_branch"] = nil, nil
		}},
		"unknown keys ignored":   {goldenConfirmed, func(m jmap) { m["future_key"] = jmap{"x": 1}; obj(m, "tables", 0)["note"] = "hi" }},
		"empty optional arrays":  {goldenArmed, func(m jmap) { m["tombstones"], m["additional_registrations"] = []any{}, []any{} }},
		"prepared rollback plan": {goldenConfirmed, func(m jmap) { v3(m)["rollback_audit_outcomes"] = []any{} }},
		"trailing slash on root": {goldenArmed, func(m jmap) {}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := generic(t, c.base)
			c.edit(m)
			root := goldenRoot
			if strings.Contains(name, "trailing slash") {
				root += "/"
			}
			if _, err := Parse(Key(goldenOp), mustJSON(t, m), root); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestVersionGate(t *testing.T) {
	m := generic(t, goldenArmed)
	if _, err := Parse(Key(goldenOp), mustJSON(t, m), goldenRoot); err != nil {
		t.Fatalf("v9: %v", err)
	}

	// A pre-v9 file has no pin identity; it is refused before decoding, never inferred.
	m = generic(t, goldenArmed)
	m["schema_version"] = json.Number("8")
	delete(obj(m, "tables", 0), "identity")
	_, err := Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindPreIdentity, "schema_version=8: pre-v9 sidecars carry no explicit table identity")

	// Even one that happens to carry identity keys is not interpreted as v9.
	m = generic(t, goldenArmed)
	m["schema_version"] = json.Number("3")
	_, err = Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindPreIdentity, "schema_version=3")

	// A v9 file missing a pin identity is malformed, not legacy.
	m = generic(t, goldenArmed)
	delete(obj(m, "tables", 0), "identity")
	_, err = Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindCorrupt, "missing field `identity`")

	// The future gate runs before any decoding, so an unknown v10 shape still says "upgrade".
	for _, doc := range []string{`{"schema_version":10}`, `{"schema_version":10,"tables":"whatever"}`} {
		_, err = Parse(Key(goldenOp), []byte(doc), goldenRoot)
		wantRefusal(t, err, KindFutureVersion, "schema_version=10, newer than the maximum")
	}
	m = generic(t, goldenConfirmed)
	m["schema_version"] = json.Number("10")
	_, err = Parse(Key(goldenOp), mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindFutureVersion, "upgrade")

	for _, doc := range []string{`{"schema_version":"9"}`, `{"schema_version":-1}`, `{"schema_version":4294967296}`, `{"schema_version":9.0}`, `{"tables":[]}`, `{"schema_version":null}`} {
		_, err = Parse(Key(goldenOp), []byte(doc), goldenRoot)
		wantRefusal(t, err, KindCorrupt, "schema_version")
	}
}

func TestForeignRootRefused(t *testing.T) {
	for _, root := range []string{"/data/g2", "/data", "/data/g1/sub", "s3://bucket/data/g1", ""} {
		_, err := Parse(Key(goldenOp), []byte(goldenConfirmed), root)
		wantRefusal(t, err, KindForeignRoot, "foreign or non-canonical path")
	}
}

func TestFileNameChecks(t *testing.T) {
	for name, reason := range map[string]string{
		"__recovery/" + goldenOp:                            "does not end in .json",
		"__recovery/" + goldenOp + ".json.tmp":              "does not end in .json",
		"__recovery/not-a-ulid.json":                        "is not a canonical ULID",
		"__recovery/" + strings.ToLower(goldenOp) + ".json": "is not a canonical ULID",
		"__recovery/" + goldenCommit + ".json":              "does not equal the file stem",
	} {
		_, err := Parse(name, []byte(goldenArmed), goldenRoot)
		wantRefusal(t, err, KindName, reason)
	}
	// The name may be a key, a bare name or a full location.
	for _, name := range []string{FileName(goldenOp), Key(goldenOp), "/data/g1/__recovery/" + goldenOp + ".json", "s3://b/g/__recovery/" + goldenOp + ".json"} {
		if _, err := Parse(name, []byte(goldenArmed), goldenRoot); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// operation_id itself must be canonical even when it equals the stem.
	m := generic(t, goldenArmed)
	m["operation_id"] = "x"
	_, err := Parse("__recovery/x.json", mustJSON(t, m), goldenRoot)
	wantRefusal(t, err, KindName, "not a canonical ULID")
}

// Inputs serde_json would refuse are refused here too, as KindCorrupt, instead of decoding to
// zero values.
func TestCorruptRefused(t *testing.T) {
	armed := goldenArmed
	cases := map[string]struct{ doc, reason string }{
		"empty":                  {"", "not valid JSON"},
		"truncated":              {armed[:len(armed)/2], "not valid JSON"},
		"trailing garbage":       {armed + "x", "not valid JSON"},
		"two documents":          {armed + armed, "not valid JSON"},
		"array":                  {"[]", "expected an object, found an array"},
		"null":                   {"null", "expected an object, found null"},
		"invalid UTF-8":          {mustReplace(armed, "alice", "al\xffce"), "not valid UTF-8"},
		"duplicate top key":      {mustReplace(armed, `"branch": null,`, `"branch": null, "branch": "x",`), "duplicate field `branch`"},
		"duplicate nested key":   {mustReplace(armed, `"post_commit_pin": 4`, `"post_commit_pin": 4, "post_commit_pin": 4`), "duplicate field `post_commit_pin`"},
		"case-folded key":        {mustReplace(armed, `"operation_id"`, `"Operation_ID"`), "missing field `operation_id`"},
		"missing row key":        {mustReplace(goldenConfirmed, `"row_count": 12,`, ``), "missing field `row_count`"},
		"missing expected":       {mustReplace(armed, "\"expected_version\": 3,\n      \"post_commit_pin\"", `"post_commit_pin"`), "tables: [0]: missing field `expected_version`"},
		"null tables":            {mustReplace(armed, `"tables": [`, `"tables": null, "x": [`), "tables: invalid type: null"},
		"null required number":   {mustReplace(armed, `"post_commit_pin": 4`, `"post_commit_pin": null`), "post_commit_pin: invalid type: null"},
		"null published flag":    {mustReplace(armed, `"schema_apply_manifest_published": false`, `"schema_apply_manifest_published": null`), "invalid type: null"},
		"null registrations":     {mustReplace(armed, `"schema_apply_manifest_published": false`, `"additional_registrations": null, "schema_apply_manifest_published": false`), "additional_registrations: invalid type: null"},
		"unknown writer kind":    {mustReplace(armed, `"Load"`, `"load"`), "unknown variant `load`"},
		"unknown phase":          {mustReplace(armed, `"Armed"`, `"armed"`), "unknown variant `armed`"},
		"fractional version":     {mustReplace(armed, `"post_commit_pin": 4`, `"post_commit_pin": 4.0`), "post_commit_pin"},
		"negative version":       {mustReplace(armed, `"post_commit_pin": 4`, `"post_commit_pin": -4`), "post_commit_pin"},
		"overflowing version":    {mustReplace(armed, `"post_commit_pin": 4`, `"post_commit_pin": 18446744073709551616`), "post_commit_pin"},
		"numeric started_at":     {mustReplace(armed, `"1767225600000000"`, `1767225600000000`), "started_at"},
		"string identity":        {mustReplace(armed, `"stable_table_id": 1,`, `"stable_table_id": "1",`), "stable_table_id"},
		"bad version_mapping":    {mustReplace(armed, `"version_mapping": []`, `"version_mapping": [[1]]`), "expected a [version, uuid] pair"},
		"null version_mapping":   {mustReplace(armed, `"version_mapping": []`, `"version_mapping": null`), "version_mapping: invalid type: null"},
		"protocol_v3 not object": {mustReplace(armed, `"protocol_v3": {`, `"protocol_v3": [], "x": {`), "protocol_v3"},
		"protocol_v7 not object": {mustReplace(armed, `"protocol_v3": {`, `"protocol_v7": 1, "protocol_v3": {`), "protocol_v7"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(Key(goldenOp), []byte(c.doc), goldenRoot)
			wantRefusal(t, err, KindCorrupt, c.reason)
		})
	}
}

// mustReplace is strings.Replace of the first old that panics when old is absent, so a case can
// never silently test the unchanged golden.
func mustReplace(doc, old, new string) string {
	if !strings.Contains(doc, old) {
		panic("fixture edit does not apply: " + old)
	}
	return strings.Replace(doc, old, new, 1)
}

func jsonUnmarshalNumber(doc string, v any) error {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	return dec.Decode(v)
}
