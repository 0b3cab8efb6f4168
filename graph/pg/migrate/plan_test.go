package migrate

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

func planScenario(t *testing.T, sc scenario) (*Plan, error) {
	t.Helper()
	acc, err := sc.acceptedIR()
	if err != nil {
		t.Fatalf("accepted schema: %v", err)
	}
	p, _, err := PlanSchema(acc, "desired.pg", sc.new)
	if err != nil {
		return nil, err
	}
	if sc.dataLoss {
		p = p.WithDataLoss()
	}
	return p, nil
}

// Every scenario of the reference's tests plans as the reference does: the same steps, in
// the same order, the same verdict, codes and reasons.
func TestScenarios(t *testing.T) {
	names := map[string]bool{}
	for _, sc := range append(slices.Clone(scenarios), extraScenarios...) {
		if names[sc.name] {
			t.Fatalf("scenario %q twice", sc.name)
		}
		names[sc.name] = true
		t.Run(sc.name, func(t *testing.T) {
			p, err := planScenario(t, sc)
			if sc.err != "" {
				var ie *pg.IdentityError
				if !errors.As(err, &ie) || !strings.Contains(err.Error(), sc.err) {
					t.Fatalf("err %v, want an identity error containing %q", err, sc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(p.Steps))
			for i, s := range p.Steps {
				got[i] = s.String()
			}
			if !slices.Equal(got, sc.steps) {
				t.Fatalf("steps\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(sc.steps, "\n  "))
			}
			unsupported := slices.ContainsFunc(sc.steps, func(s string) bool { return strings.HasPrefix(s, "unsupported change") })
			if p.Supported == unsupported {
				t.Errorf("supported %v", p.Supported)
			}
			checkRefusal(t, p)
			checkJSONRoundTrip(t, p)
		})
	}
}

// checkRefusal: Err is nil for a supported plan, else an *UnsupportedError (errors.As through
// wrapping) carrying the first refusal, of kind schema_unsupported.
func checkRefusal(t *testing.T, p *Plan) {
	t.Helper()
	err := p.Err()
	if p.Supported {
		if err != nil {
			t.Errorf("supported plan: Err %v", err)
		}
		return
	}
	var ue *UnsupportedError
	wrapped := errors.Join(errors.New("context"), err)
	if !errors.As(wrapped, &ue) {
		t.Fatalf("Err %T %v", err, err)
	}
	first := p.Unsupported()[0]
	if !ue.Step.Equal(first) || len(ue.Steps) != len(p.Unsupported()) || ue.Reason() != first.Reason || ue.Code() != first.Code {
		t.Errorf("refusal %+v, first unsupported step %+v", ue, first)
	}
	want := first.Reason
	if first.Code != "" {
		want = "[" + first.Code + "] " + first.Reason
	}
	if err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	if errs.Kind(wrapped) != errs.KindSchemaUnsupported || errs.ExitCode(wrapped) != 12 {
		t.Errorf("kind %s exit %d", errs.Kind(wrapped), errs.ExitCode(wrapped))
	}
}

// checkJSONRoundTrip: the plan's JSON reads back (ParsePlan) to the same steps, identities
// aside, and encodes to the same bytes.
func checkJSONRoundTrip(t *testing.T, p *Plan) {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParsePlan(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if q.Supported != p.Supported || len(q.Steps) != len(p.Steps) {
		t.Fatalf("round trip %s", b)
	}
	for i := range p.Steps {
		s := p.Steps[i]
		s.Identity = Identity{}
		if !q.Steps[i].Equal(s) {
			t.Errorf("step %d: %+v, read back %+v", i, s, q.Steps[i])
		}
	}
	c, _ := json.Marshal(q)
	if string(c) != string(b) {
		t.Errorf("re-encoded\n%s\nwas\n%s", c, b)
	}
}

// The JSON keys, kinds and values are the reference's (the CLI's assertions on
// `schema plan --json`).
func TestPlanJSON(t *testing.T) {
	sc := scenarios[0] // add nullable property
	p, err := planScenario(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	want := `{"supported":true,"steps":[{"kind":"add_property","type_kind":"node","type_name":"Person","property_name":"nickname",` +
		`"property_type":{"scalar":"String","nullable":true,"list":false,"enum_values":null}}]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	steps := []Step{
		{Kind: AddType, TypeKind: Interface, Name: "Named"},
		{Kind: RenameType, TypeKind: Node, From: "User", To: "Account"},
		{Kind: RenameProperty, TypeKind: Edge, TypeName: "Knows", From: "a", To: "b"},
		{Kind: AddConstraint, TypeKind: Node, TypeName: "Person", Constraint: &pg.Constr{Kind: pg.IndexConstraint, Columns: []string{"age"}}},
		{Kind: ExtendEnum, TypeKind: Node, TypeName: "Ticket", PropertyName: "status", AddedValues: []string{"blocked"}},
		{Kind: UpdateTypeMetadata, TypeKind: Node, Name: "Person", Annotations: []pg.Annot{{Name: "description", Value: ptr("new")}}},
		{Kind: UpdatePropertyMetadata, TypeKind: Node, TypeName: "Doc", PropertyName: "e", Annotations: []pg.Annot{{Name: "embed", Value: ptr("t"), Kwargs: map[string]string{"model": "m"}}}},
		{Kind: UpdateTypeMetadata, TypeKind: Edge, Name: "Knows", Annotations: nil},
		{Kind: UpdateTypeMetadata, TypeKind: Node, Name: "P", Annotations: []pg.Annot{{Name: "description", Value: ptr("a<b & c>\"é")}}},
		{Kind: DropType, TypeKind: Node, Name: "Person", Mode: Soft},
		{Kind: DropType, TypeKind: Edge, Name: "Knows", Mode: Hard},
		{Kind: DropProperty, TypeKind: Node, TypeName: "Person", PropertyName: "age", Mode: Soft},
		{Kind: DropProperty, TypeKind: Interface, TypeName: "Named", PropertyName: "alias", Mode: Hard},
		{Kind: UnsupportedChange, Entity: "node:Person.age", Reason: "r", Code: CodeTypeChange},
		{Kind: UnsupportedChange, Entity: "schema", Reason: "r"},
		{Kind: AddProperty, TypeKind: Node, TypeName: "Doc", PropertyName: "v", PropertyType: &pg.PropType{Scalar: pg.Vector, VectorDim: 3, Nullable: true}},
		{Kind: AddProperty, TypeKind: Node, TypeName: "T", PropertyName: "s", PropertyType: &pg.PropType{Scalar: pg.String, Nullable: true, List: true, EnumValues: []string{"a", "b"}}},
		{Kind: AddConstraint, TypeKind: Node, TypeName: "T", Constraint: &pg.Constr{Kind: pg.RangeConstraint, Property: "n", Min: &pg.Bound{Int: -1}, Max: &pg.Bound{IsFloat: true, Float: 2}}},
		{Kind: AddConstraint, TypeKind: Node, TypeName: "T", Constraint: &pg.Constr{Kind: pg.CheckConstraint, Property: "s", Pattern: "^a"}},
	}
	wants := []string{
		`{"kind":"add_type","type_kind":"interface","name":"Named"}`,
		`{"kind":"rename_type","type_kind":"node","from":"User","to":"Account"}`,
		`{"kind":"rename_property","type_kind":"edge","type_name":"Knows","from":"a","to":"b"}`,
		`{"kind":"add_constraint","type_kind":"node","type_name":"Person","constraint":{"Index":["age"]}}`,
		`{"kind":"extend_enum","type_kind":"node","type_name":"Ticket","property_name":"status","added_values":["blocked"]}`,
		`{"kind":"update_type_metadata","type_kind":"node","name":"Person","annotations":[{"name":"description","value":"new"}]}`,
		`{"kind":"update_property_metadata","type_kind":"node","type_name":"Doc","property_name":"e","annotations":[{"name":"embed","value":"t","kwargs":{"model":"m"}}]}`,
		`{"kind":"update_type_metadata","type_kind":"edge","name":"Knows","annotations":[]}`,
		`{"kind":"update_type_metadata","type_kind":"node","name":"P","annotations":[{"name":"description","value":"a<b & c>\"é"}]}`,
		`{"kind":"drop_type","type_kind":"node","name":"Person","mode":"soft"}`,
		`{"kind":"drop_type","type_kind":"edge","name":"Knows","mode":"hard"}`,
		`{"kind":"drop_property","type_kind":"node","type_name":"Person","property_name":"age","mode":"soft"}`,
		`{"kind":"drop_property","type_kind":"interface","type_name":"Named","property_name":"alias","mode":"hard"}`,
		`{"kind":"unsupported_change","entity":"node:Person.age","reason":"r","code":"OG-MF-106"}`,
		`{"kind":"unsupported_change","entity":"schema","reason":"r"}`,
		`{"kind":"add_property","type_kind":"node","type_name":"Doc","property_name":"v","property_type":{"scalar":{"Vector":3},"nullable":true,"list":false,"enum_values":null}}`,
		`{"kind":"add_property","type_kind":"node","type_name":"T","property_name":"s","property_type":{"scalar":"String","nullable":true,"list":true,"enum_values":["a","b"]}}`,
		`{"kind":"add_constraint","type_kind":"node","type_name":"T","constraint":{"Range":{"property":"n","min":{"Integer":-1},"max":{"Float":2.0}}}}`,
		`{"kind":"add_constraint","type_kind":"node","type_name":"T","constraint":{"Check":{"property":"s","pattern":"^a"}}}`,
	}
	for i, s := range steps {
		b, err := s.MarshalJSON() // (json.Marshal would escape < > & again)
		if err != nil || string(b) != wants[i] {
			t.Errorf("step %d: %s %v\nwant %s", i, b, err, wants[i])
			continue
		}
		// Every step reads back as itself (the reference's serde round trip of drops, and
		// the rest), an empty annotation list as empty.
		var back Step
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("step %d: %v", i, err)
			continue
		}
		if s.Annotations == nil && back.Annotations != nil && len(back.Annotations) == 0 {
			back.Annotations = nil
		}
		if !back.Equal(s) {
			t.Errorf("step %d read back %+v", i, back)
		}
	}
	// The reference's drop mode spelling (drop_mode_serde_uses_snake_case).
	if m, _ := json.Marshal(Soft); string(m) != `"soft"` {
		t.Errorf("soft: %s", m)
	}
	if m, _ := json.Marshal(Hard); string(m) != `"hard"` {
		t.Errorf("hard: %s", m)
	}
}

func ptr(s string) *string { return &s }

// ParsePlan refuses what is not a plan.
func TestParsePlanRefuses(t *testing.T) {
	for _, in := range []string{
		``, `null`, `[]`, `{}`, `{"supported":true}`, `{"steps":[]}`,
		`{"supported":true,"steps":[{"kind":"unsupported_change","entity":"e","reason":"r"}]}`,
		`{"supported":false,"steps":[]}`,
		`{"supported":true,"steps":[{"kind":"nope"}]}`,
		`{"supported":true,"steps":[{"type_kind":"node","name":"A"}]}`,
		`{"supported":true,"steps":[{"kind":"add_type","type_kind":"table","name":"A"}]}`,
		`{"supported":true,"steps":[{"kind":"add_type","type_kind":"node"}]}`,
		`{"supported":true,"steps":[{"kind":"add_type","type_kind":"node","name":null}]}`,
		`{"supported":true,"steps":[{"kind":"drop_type","type_kind":"node","name":"A","mode":"gentle"}]}`,
		`{"supported":true,"steps":[{"kind":"add_property","type_kind":"node","type_name":"A","property_name":"p","property_type":{"scalar":"Str","nullable":true,"list":false}}]}`,
		`{"supported":true,"steps":[{"kind":"add_property","type_kind":"node","type_name":"A","property_name":"p","property_type":{"scalar":{"Vector":0},"nullable":true,"list":false}}]}`,
		`{"supported":true,"steps":[{"kind":"add_constraint","type_kind":"node","type_name":"A","constraint":{"Index":["a"],"Key":["b"]}}]}`,
		`{"supported":true,"steps":[{"kind":"add_constraint","type_kind":"node","type_name":"A","constraint":{"Primary":["a"]}}]}`,
		`{"supported":true,"steps":[{"kind":"add_constraint","type_kind":"node","type_name":"A","constraint":{"Range":{"property":"a","min":{"Integer":1,"Float":1.0},"max":null}}}]}`,
	} {
		if p, err := ParsePlan([]byte(in)); err == nil {
			t.Errorf("%s: read as %+v", in, p)
		}
	}
	// `worker schema plan --json` output reads as its plan.
	p, err := ParsePlan([]byte(`{"uri":"/g","supported":true,"step_count":1,"steps":[{"kind":"add_type","type_kind":"node","name":"A","extra":1}]}`))
	if err != nil || len(p.Steps) != 1 || p.Steps[0].Name != "A" {
		t.Errorf("%+v %v", p, err)
	}
}

// A difference no rule names is refused, not planned as no change
// (plan_guard_rejects_unclassified_zero_step_ir_change).
func TestUnclassifiedChange(t *testing.T) {
	acc := initIR(t, "node N { value: String }")
	desired := *acc
	desired.NextIdentityID++
	p, err := PlanIR(acc, &desired)
	if err != nil {
		t.Fatal(err)
	}
	if p.Supported || len(p.Steps) != 1 || p.Steps[0].String() != "unsupported change on schema: schema migration contains an unclassified semantic IR change" {
		t.Errorf("%+v", p)
	}
}

func initIR(t *testing.T, src string) *pg.SchemaIR {
	t.Helper()
	shape, err := pg.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	ir, _, err := pg.Initialize(testDomain, shape)
	if err != nil {
		t.Fatal(err)
	}
	return ir
}

func resolveIR(t *testing.T, acc *pg.SchemaIR, src string) *pg.SchemaIR {
	t.Helper()
	shape, err := pg.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	ir, _, err := pg.Resolve(acc, shape)
	if err != nil {
		t.Fatal(err)
	}
	return ir
}

// A desired IR that does not descend from the accepted one is refused with an identity
// error: another domain, a regressed allocator, an id moved to another kind or owner, a new
// id from retired space.
func TestEvolutionIdentityRefused(t *testing.T) {
	acc := initIR(t, "node A { p: String } node B { q: String }")
	other := *acc
	other.Domain = "01BX5ZZKBKACTAV9WEVGEMMVRZ"
	grown := resolveIR(t, acc, "node A { p: String } node B { q: String } node C { r: String }")
	kind := initIR(t, "node A { p: String } edge B: A -> A { q: String }") // B's id now an edge's
	dropped := resolveIR(t, acc, "node A { p: String }")
	fresh := initIR(t, "node A { p: String } node C { q: String }") // C takes B's retired ids
	swapped := initIR(t, "node A { p: String } node B { q: String }")
	swapped.Nodes[0].Properties[0].PropertyID, swapped.Nodes[1].Properties[0].PropertyID =
		swapped.Nodes[1].Properties[0].PropertyID, swapped.Nodes[0].Properties[0].PropertyID
	for name, c := range map[string]struct {
		accepted, desired *pg.SchemaIR
		want              string
	}{
		"domain":    {acc, &other, "same identity domain"},
		"regressed": {grown, acc, "regresses accepted high-water mark"},
		"kind":      {acc, kind, "changes declaration kind or table incarnation"},
		"retired":   {dropped, fresh, "reuses retired allocator space"},
		"moved":     {acc, swapped, "moves across owners"},
	} {
		_, err := PlanIR(c.accepted, c.desired)
		var ie *pg.IdentityError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if _, err := PlanIR(nil, acc); err == nil {
		t.Error("nil accepted")
	}
}

// Steps carry the identities an apply addresses tables and columns by: a rename keeps its
// ids, a re-added type gets fresh ones, a drop names the accepted ones.
func TestStepIdentities(t *testing.T) {
	acc := initIR(t, testSchema)
	person := acc.Nodes[1]
	if person.Name != "Person" {
		t.Fatalf("fixture order: %s", person.Name)
	}
	var age *pg.PropertyIR
	for _, q := range person.Properties {
		if q.Name == "age" {
			age = q
		}
	}
	p, _, err := PlanSchema(acc, "x.pg", replace(humanRenamed, "    age: I32?\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{TypeID: person.TypeID, IncarnationID: person.IncarnationID}
	if p.Steps[0].Kind != RenameType || p.Steps[0].Identity != want || p.Steps[0].TableKey() != "node:Human" {
		t.Errorf("rename %+v", p.Steps[0])
	}
	want.PropertyID = age.PropertyID
	if p.Steps[1].Kind != DropProperty || p.Steps[1].Identity != want || p.Steps[1].TableKey() != "node:Human" {
		t.Errorf("drop %+v", p.Steps[1])
	}
	if p.Accepted != acc || p.Desired == nil || p.Desired.Nodes[1].Name != "Human" {
		t.Errorf("schemas %v %v", p.Accepted, p.Desired)
	}

	// Drop then re-add: the drop names the old ids, the add fresh ones above them.
	acc = initIR(t, "node Person { name: String @key }\nnode Anchor { name: String @key }\n")
	old := acc.Nodes[1]
	drop, _, err := PlanSchema(acc, "x.pg", "node Anchor { name: String @key }")
	if err != nil || len(drop.Steps) != 1 || drop.Steps[0].Identity != (Identity{TypeID: old.TypeID, IncarnationID: old.IncarnationID}) {
		t.Fatalf("%+v %v", drop, err)
	}
	readd, _, err := PlanSchema(drop.Desired, "x.pg", "node Person { name: String @key }\nnode Anchor { name: String @key }\n")
	if err != nil {
		t.Fatal(err)
	}
	id := readd.Steps[0].Identity
	if id.TypeID < acc.NextIdentityID || id.IncarnationID < acc.NextIdentityID || id.TypeID == old.TypeID {
		t.Errorf("re-added Person %+v (old %d/%d, next %d)", id, old.TypeID, old.IncarnationID, acc.NextIdentityID)
	}
}

// Planning does not modify its inputs, and WithDataLoss does not modify the plan it copies.
func TestPlanIsPure(t *testing.T) {
	acc := initIR(t, testSchema)
	before := acc.Hash()
	p, _, err := PlanSchema(acc, "x.pg", replace(testSchema, "    age: I32?\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	hard := p.WithDataLoss()
	if acc.Hash() != before || p.Steps[0].Mode != Soft || hard.Steps[0].Mode != Hard {
		t.Errorf("%+v %+v", p.Steps, hard.Steps)
	}
}

func TestCodes(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes {
		if seen[c.Code] || !strings.HasPrefix(c.Code, "OG-"+c.Family+"-") || len(c.Code) != len("OG-XX-000") {
			t.Errorf("%+v", c)
		}
		seen[c.Code] = true
	}
	for _, c := range []string{CodeRequiredProperty, CodeTypeChange} {
		if e, ok := LookupCode(c); !ok || !e.Emitted {
			t.Errorf("%s: %+v", c, e)
		}
	}
	if _, ok := LookupCode("OG-XX-999"); ok {
		t.Error("unknown code found")
	}
}
