package migrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// The JSON of a plan is the reference's, key for key and in its order: a plan is
// {"supported", "steps"}; a step is internally tagged by "kind" with its fields after it
// (Step's table); a property type is {"scalar", "nullable", "list", "enum_values"} with
// {"Vector": n} for a vector scalar; a constraint is externally tagged ({"Index": ["age"]});
// an annotation is {"name", "value"} with "kwargs" only when it has some. Identities are not
// part of it.

// jsonObject writes an object's members in the order they are added.
type jsonObject struct {
	buf bytes.Buffer
	err error
}

func (o *jsonObject) add(key string, v any) *jsonObject {
	if o.err != nil {
		return o
	}
	if o.buf.Len() == 0 {
		o.buf.WriteByte('{')
	} else {
		o.buf.WriteByte(',')
	}
	k, _ := marshal(key)
	o.buf.Write(k)
	o.buf.WriteByte(':')
	b, err := marshal(v)
	if err != nil {
		o.err = err
		return o
	}
	o.buf.Write(b)
	return o
}

// marshal is json.Marshal without HTML escaping: `<`, `>` and `&` stay as they are, as
// serde_json writes them.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func (o *jsonObject) bytes() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	if o.buf.Len() == 0 {
		return []byte("{}"), nil
	}
	o.buf.WriteByte('}')
	return o.buf.Bytes(), nil
}

// MarshalJSON encodes the plan as the reference does: {"supported": …, "steps": […]}.
func (p *Plan) MarshalJSON() ([]byte, error) {
	steps := p.Steps
	if steps == nil {
		steps = []Step{}
	}
	o := &jsonObject{}
	return o.add("supported", p.Supported).add("steps", steps).bytes()
}

// MarshalJSON encodes the step with its kind's keys (Step's table).
func (s Step) MarshalJSON() ([]byte, error) {
	o := (&jsonObject{}).add("kind", s.Kind)
	switch s.Kind {
	case AddType:
		o.add("type_kind", s.TypeKind).add("name", s.Name)
	case RenameType:
		o.add("type_kind", s.TypeKind).add("from", s.From).add("to", s.To)
	case AddProperty:
		o.add("type_kind", s.TypeKind).add("type_name", s.TypeName).add("property_name", s.PropertyName).add("property_type", propTypeJSON(s.PropertyType))
	case RenameProperty:
		o.add("type_kind", s.TypeKind).add("type_name", s.TypeName).add("from", s.From).add("to", s.To)
	case AddConstraint, DropConstraint:
		c, err := constrJSON(s.Constraint)
		if err != nil {
			return nil, err
		}
		o.add("type_kind", s.TypeKind).add("type_name", s.TypeName).add("constraint", c)
	case ExtendEnum:
		o.add("type_kind", s.TypeKind).add("type_name", s.TypeName).add("property_name", s.PropertyName).add("added_values", nonNil(s.AddedValues))
	case UpdateTypeMetadata:
		o.add("type_kind", s.TypeKind).add("name", s.Name).add("annotations", annotsJSON(s.Annotations))
	case UpdatePropertyMetadata:
		o.add("type_kind", s.TypeKind).add("type_name", s.TypeName).add("property_name", s.PropertyName).add("annotations", annotsJSON(s.Annotations))
	case DropType:
		o.add("type_kind", s.TypeKind).add("name", s.Name).add("mode", s.Mode)
	case DropProperty:
		o.add("type_kind", s.TypeKind).add("type_name", s.TypeName).add("property_name", s.PropertyName).add("mode", s.Mode)
	case UnsupportedChange:
		o.add("entity", s.Entity).add("reason", s.Reason)
		if s.Code != "" {
			o.add("code", s.Code)
		}
	default:
		return nil, fmt.Errorf("migrate: step kind %q has no JSON form", s.Kind)
	}
	return o.bytes()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func propTypeJSON(t *pg.PropType) json.RawMessage {
	if t == nil {
		return json.RawMessage("null")
	}
	var scalar any = string(t.Scalar)
	if t.Scalar == pg.Vector {
		scalar = map[string]uint32{"Vector": t.VectorDim}
	}
	b, _ := (&jsonObject{}).add("scalar", scalar).add("nullable", t.Nullable).add("list", t.List).add("enum_values", t.EnumValues).bytes()
	return b
}

type annotJSON struct {
	Name   string            `json:"name"`
	Value  *string           `json:"value"`
	Kwargs map[string]string `json:"kwargs,omitempty"`
}

func annotsJSON(as []pg.Annot) []annotJSON {
	out := make([]annotJSON, len(as))
	for i, a := range as {
		out[i] = annotJSON{Name: a.Name, Value: a.Value, Kwargs: a.Kwargs}
	}
	return out
}

func boundJSON(b *pg.Bound) json.RawMessage {
	switch {
	case b == nil:
		return json.RawMessage("null")
	case b.IsFloat:
		return json.RawMessage(`{"Float":` + floatDebug(b.Float) + `}`)
	}
	return json.RawMessage(`{"Integer":` + strconv.FormatInt(b.Int, 10) + `}`)
}

var constraintTags = map[pg.ConstraintKind]string{pg.KeyConstraint: "Key", pg.UniqueConstraint: "Unique",
	pg.IndexConstraint: "Index", pg.RangeConstraint: "Range", pg.CheckConstraint: "Check"}

func constrJSON(c *pg.Constr) (json.RawMessage, error) {
	if c == nil {
		return json.RawMessage("null"), nil
	}
	tag, ok := constraintTags[c.Kind]
	if !ok {
		return nil, fmt.Errorf("migrate: constraint kind %q has no JSON form", c.Kind)
	}
	var body any
	switch c.Kind {
	case pg.RangeConstraint:
		b, _ := (&jsonObject{}).add("property", c.Property).add("min", boundJSON(c.Min)).add("max", boundJSON(c.Max)).bytes()
		body = json.RawMessage(b)
	case pg.CheckConstraint:
		b, _ := (&jsonObject{}).add("property", c.Property).add("pattern", c.Pattern).bytes()
		body = json.RawMessage(b)
	default:
		body = nonNil(c.Columns)
	}
	return (&jsonObject{}).add(tag, body).bytes()
}

// ParsePlan reads a plan's JSON (a plan, or `worker schema plan --json`'s output, whose
// other keys it ignores): every step's kind and required fields, the kinds and modes it
// names, and a supported flag that agrees with the steps. The plan has no identities and no
// schemas.
func ParsePlan(data []byte) (*Plan, error) {
	var raw struct {
		Supported *bool              `json:"supported"`
		Steps     *[]json.RawMessage `json:"steps"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("migration plan: %w", err)
	}
	if raw.Supported == nil || raw.Steps == nil {
		return nil, fmt.Errorf("migration plan: supported and steps are required")
	}
	p := &Plan{Supported: *raw.Supported, Steps: []Step{}}
	unsupported := false
	for i, r := range *raw.Steps {
		var s Step
		if err := json.Unmarshal(r, &s); err != nil {
			return nil, fmt.Errorf("migration plan: step %d: %w", i, err)
		}
		unsupported = unsupported || s.Kind == UnsupportedChange
		p.Steps = append(p.Steps, s)
	}
	if p.Supported == unsupported {
		return nil, fmt.Errorf("migration plan: supported is %v but the plan has %s unsupported_change step", p.Supported, map[bool]string{true: "an", false: "no"}[unsupported])
	}
	return p, nil
}

// stepFields are the members each kind requires (beyond "kind"); code is optional.
var stepFields = map[StepKind][]string{
	AddType:                {"type_kind", "name"},
	RenameType:             {"type_kind", "from", "to"},
	AddProperty:            {"type_kind", "type_name", "property_name", "property_type"},
	RenameProperty:         {"type_kind", "type_name", "from", "to"},
	AddConstraint:          {"type_kind", "type_name", "constraint"},
	DropConstraint:         {"type_kind", "type_name", "constraint"},
	ExtendEnum:             {"type_kind", "type_name", "property_name", "added_values"},
	UpdateTypeMetadata:     {"type_kind", "name", "annotations"},
	UpdatePropertyMetadata: {"type_kind", "type_name", "property_name", "annotations"},
	DropType:               {"type_kind", "name", "mode"},
	DropProperty:           {"type_kind", "type_name", "property_name", "mode"},
	UnsupportedChange:      {"entity", "reason"},
}

// UnmarshalJSON reads a step (ParsePlan's rules); members its kind does not use are ignored.
func (s *Step) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	var kind StepKind
	if err := strict(m["kind"], &kind); err != nil || m["kind"] == nil {
		return fmt.Errorf("step kind: missing or not a string")
	}
	fields, ok := stepFields[kind]
	if !ok {
		return fmt.Errorf("unknown step kind %q", kind)
	}
	*s = Step{Kind: kind}
	for _, f := range fields {
		if m[f] == nil {
			return fmt.Errorf("%s step: missing %s", kind, f)
		}
	}
	if kind == UnsupportedChange {
		if m["code"] != nil && string(m["code"]) != "null" {
			if err := strict(m["code"], &s.Code); err != nil {
				return fmt.Errorf("%s step: code: %w", kind, err)
			}
		}
	}
	for _, f := range fields {
		var err error
		switch f {
		case "type_kind":
			err = strict(m[f], &s.TypeKind)
			if err == nil && s.TypeKind != Interface && s.TypeKind != Node && s.TypeKind != Edge {
				err = fmt.Errorf("unknown type kind %q", s.TypeKind)
			}
		case "name":
			err = strict(m[f], &s.Name)
		case "from":
			err = strict(m[f], &s.From)
		case "to":
			err = strict(m[f], &s.To)
		case "type_name":
			err = strict(m[f], &s.TypeName)
		case "property_name":
			err = strict(m[f], &s.PropertyName)
		case "entity":
			err = strict(m[f], &s.Entity)
		case "reason":
			err = strict(m[f], &s.Reason)
		case "mode":
			err = strict(m[f], &s.Mode)
			if err == nil && s.Mode != Soft && s.Mode != Hard {
				err = fmt.Errorf("unknown drop mode %q", s.Mode)
			}
		case "added_values":
			err = strictList(m[f], &s.AddedValues)
		case "annotations":
			s.Annotations, err = parseAnnots(m[f])
		case "property_type":
			s.PropertyType, err = parsePropType(m[f])
		case "constraint":
			s.Constraint, err = parseConstr(m[f])
		}
		if err != nil {
			return fmt.Errorf("%s step: %s: %w", kind, f, err)
		}
	}
	return nil
}

// strict decodes a JSON value into v, refusing null.
func strict(raw json.RawMessage, v any) error {
	if raw == nil || string(bytes.TrimSpace(raw)) == "null" {
		return fmt.Errorf("null where a value is required")
	}
	return json.Unmarshal(raw, v)
}

// strictList decodes a JSON array of strings (never null) into a non-nil slice.
func strictList(raw json.RawMessage, v *[]string) error {
	if err := strict(raw, v); err != nil {
		return err
	}
	if *v == nil {
		*v = []string{}
	}
	return nil
}

func parseAnnots(raw json.RawMessage) ([]pg.Annot, error) {
	var as []struct {
		Name   *string           `json:"name"`
		Value  *string           `json:"value"`
		Kwargs map[string]string `json:"kwargs"`
	}
	if err := strict(raw, &as); err != nil {
		return nil, err
	}
	out := make([]pg.Annot, len(as))
	for i, a := range as {
		if a.Name == nil {
			return nil, fmt.Errorf("annotation %d: missing name", i)
		}
		out[i] = pg.Annot{Name: *a.Name, Value: a.Value}
		if len(a.Kwargs) > 0 {
			out[i].Kwargs = maps.Clone(a.Kwargs)
		}
	}
	return out, nil
}

var scalars = []pg.Scalar{pg.String, pg.Bool, pg.I32, pg.I64, pg.U32, pg.U64, pg.F32, pg.F64, pg.Date, pg.DateTime, pg.Blob}

func parsePropType(raw json.RawMessage) (*pg.PropType, error) {
	var t struct {
		Scalar     json.RawMessage `json:"scalar"`
		Nullable   *bool           `json:"nullable"`
		List       *bool           `json:"list"`
		EnumValues *[]string       `json:"enum_values"`
	}
	if err := strict(raw, &t); err != nil {
		return nil, err
	}
	if t.Nullable == nil || t.List == nil {
		return nil, fmt.Errorf("nullable and list are required")
	}
	out := &pg.PropType{Nullable: *t.Nullable, List: *t.List}
	var name string
	var vec struct {
		Vector *uint32 `json:"Vector"`
	}
	switch {
	case strict(t.Scalar, &name) == nil:
		if !slices.Contains(scalars, pg.Scalar(name)) {
			return nil, fmt.Errorf("unknown scalar %q", name)
		}
		out.Scalar = pg.Scalar(name)
	case strict(t.Scalar, &vec) == nil && vec.Vector != nil:
		if *vec.Vector == 0 || *vec.Vector > pg.MaxVectorDim {
			return nil, fmt.Errorf("invalid Vector dimension %d", *vec.Vector)
		}
		out.Scalar, out.VectorDim = pg.Vector, *vec.Vector
	default:
		return nil, fmt.Errorf("scalar is neither a type name nor {\"Vector\": n}")
	}
	if t.EnumValues != nil {
		out.EnumValues = nonNil(*t.EnumValues)
	}
	return out, nil
}

func parseBound(raw json.RawMessage) (*pg.Bound, error) {
	if raw == nil || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var b struct {
		Integer *int64   `json:"Integer"`
		Float   *float64 `json:"Float"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, err
	}
	switch {
	case b.Integer != nil && b.Float == nil:
		return &pg.Bound{Int: *b.Integer}, nil
	case b.Float != nil && b.Integer == nil:
		return &pg.Bound{IsFloat: true, Float: *b.Float}, nil
	}
	return nil, fmt.Errorf("a bound is {\"Integer\": n} or {\"Float\": x}")
}

func parseConstr(raw json.RawMessage) (*pg.Constr, error) {
	var m map[string]json.RawMessage
	if err := strict(raw, &m); err != nil {
		return nil, err
	}
	if len(m) != 1 {
		return nil, fmt.Errorf("a constraint is an object of one member (Key, Unique, Index, Range or Check)")
	}
	for tag, body := range m {
		for kind, t := range constraintTags {
			if t != tag {
				continue
			}
			c := &pg.Constr{Kind: kind}
			switch kind {
			case pg.RangeConstraint:
				var r struct {
					Property *string         `json:"property"`
					Min      json.RawMessage `json:"min"`
					Max      json.RawMessage `json:"max"`
				}
				if err := strict(body, &r); err != nil {
					return nil, err
				}
				if r.Property == nil {
					return nil, fmt.Errorf("Range: missing property")
				}
				c.Property = *r.Property
				var err error
				if c.Min, err = parseBound(r.Min); err != nil {
					return nil, err
				}
				if c.Max, err = parseBound(r.Max); err != nil {
					return nil, err
				}
			case pg.CheckConstraint:
				var r struct {
					Property *string `json:"property"`
					Pattern  *string `json:"pattern"`
				}
				if err := strict(body, &r); err != nil {
					return nil, err
				}
				if r.Property == nil || r.Pattern == nil {
					return nil, fmt.Errorf("Check: missing property or pattern")
				}
				c.Property, c.Pattern = *r.Property, *r.Pattern
			default:
				if err := strictList(body, &c.Columns); err != nil {
					return nil, err
				}
			}
			return c, nil
		}
		return nil, fmt.Errorf("unknown constraint %q", tag)
	}
	panic("unreachable")
}
