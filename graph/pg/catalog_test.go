package pg

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

const testDomain = "01ARZ3NDEKTSV4RRFFQ69G5FAV"

func mustContract(t *testing.T, file string) *Contract {
	t.Helper()
	src, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := InitContract(string(src), testDomain)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// describe renders a physical schema as "name:type[?][ pk][ #id]" entries.
func describe(s *arrow.Schema) string {
	var out []string
	for _, f := range s.Fields() {
		e := f.Name + ":" + f.Type.String()
		if f.Nullable {
			e += "?"
		}
		if v, ok := f.Metadata.GetValue(PrimaryKeyMetadataKey); ok {
			e += " pk=" + v
		}
		if v, ok := f.Metadata.GetValue(StablePropertyIDMetadataKey); ok {
			e += " #" + v
		}
		if f.Metadata.Len() > 1 {
			e += " (extra metadata)"
		}
		out = append(out, e)
	}
	return strings.Join(out, ", ")
}

type tableWant struct {
	path, cols string
	key        []string
	unique     [][]string
	indexes    [][]string
}

func checkTable(t *testing.T, c *Catalog, name string, w tableWant) {
	t.Helper()
	var tb *Table
	var path string
	var key []string
	if n := c.Node(name); n != nil {
		tb, path, key = &n.Table, n.TablePath(), n.Key
	} else if e := c.Edge(name); e != nil {
		tb, path = &e.Table, e.TablePath()
	} else {
		t.Fatalf("no table %s", name)
	}
	if path != w.path {
		t.Errorf("%s path %s, want %s", name, path, w.path)
	}
	if got := describe(tb.Arrow); got != w.cols {
		t.Errorf("%s columns\n got %s\nwant %s", name, got, w.cols)
	}
	if !slices.Equal(key, w.key) {
		t.Errorf("%s key %v, want %v", name, key, w.key)
	}
	if fmt.Sprint(tb.Unique) != fmt.Sprint(w.unique) || fmt.Sprint(tb.Indexes) != fmt.Sprint(w.indexes) {
		t.Errorf("%s unique %v indexes %v, want %v %v", name, tb.Unique, tb.Indexes, w.unique, w.indexes)
	}
}

func TestCatalogCRM(t *testing.T) {
	c := mustContract(t, "crm.pg")
	cat := c.Catalog
	if c.IR.NextIdentityID != 24 || len(cat.Interfaces) != 1 || cat.Interfaces[0].TypeID != 1 {
		t.Fatalf("next %d interfaces %+v", c.IR.NextIdentityID, cat.Interfaces)
	}
	checkTable(t, cat, "Org", tableWant{path: "nodes/0000000000000002-0000000000000014",
		cols: "id:utf8 pk=true, domain:utf8? #7, founded:date32? #8, name:utf8 #9, slug:utf8 #10, " +
			"tags:list<item: utf8, nullable>? #11, tier:utf8 #12",
		key: []string{"slug"}, unique: [][]string{{"domain"}}, indexes: [][]string{{"name"}, {"slug"}}})
	checkTable(t, cat, "Person", tableWant{path: "nodes/0000000000000003-0000000000000015",
		cols: "id:utf8 pk=true, age:int32? #13, email:utf8 #14, joined_at:date64 #15, name:utf8 #16",
		key:  []string{"email"}, indexes: [][]string{{"name"}, {"email"}}})
	checkTable(t, cat, "EmployedBy", tableWant{path: "edges/0000000000000004-0000000000000016",
		cols: "id:utf8 pk=true, src:utf8, dst:utf8, since:date32? #17, title:utf8? #18"})
	checkTable(t, cat, "Knows", tableWant{path: "edges/0000000000000005-0000000000000017",
		cols: "id:utf8 pk=true, src:utf8, dst:utf8, weight:float32? #19", unique: [][]string{{"dst", "src"}}})

	org, person := cat.Node("Org"), cat.Node("Person")
	if !slices.Equal(org.Implements, []string{"Named"}) || org.TableKey() != "node:Org" {
		t.Errorf("org implements %v key %s", org.Implements, org.TableKey())
	}
	if tier := org.Property("tier"); !slices.Equal(tier.Type.EnumValues, []string{"enterprise", "free", "pro"}) {
		t.Errorf("tier enum %v", tier.Type.EnumValues)
	}
	if len(person.Ranges) != 1 || person.Ranges[0].Property != "age" || person.Ranges[0].Min.Int != 0 ||
		person.Ranges[0].Max.Int != 150 {
		t.Errorf("ranges %+v", person.Ranges)
	}
	if len(person.Checks) != 1 || person.Checks[0].Pattern != "^[^@ ]+@[^@ ]+$" {
		t.Errorf("checks %+v", person.Checks)
	}
	if e := cat.Edge("EmployedBy"); e.From != "Person" || e.To != "Org" || e.Card.Min != 0 || *e.Card.Max != 1 {
		t.Errorf("employed by %+v", e)
	}
	if e := cat.Edge("knows"); e == nil || e.Name != "Knows" || e.Card.Max != nil {
		t.Errorf("case-insensitive edge lookup: %+v", e)
	}
	// Injected interface property: not declared directly, satisfies Named.name.
	p := c.IR.Nodes[0].Properties[2]
	if p.Name != "name" || p.DeclaredDirectly || len(p.Satisfies) != 1 || p.Satisfies[0].PropertyID != 6 ||
		!slices.Equal(p.PropertyConstraints, []string{"index"}) {
		t.Errorf("injected property %+v", p)
	}
}

func TestCatalogTelemetry(t *testing.T) {
	c := mustContract(t, "telemetry.pg")
	cat := c.Catalog
	checkTable(t, cat, "Alert", tableWant{path: "nodes/0000000000000001-0000000000000010",
		cols: "id:utf8 pk=true, message:utf8 #6, payload:large_binary? #7, raised_at:date64 #8, severity:utf8 #9"})
	// Composite key: tuple order is stable property-id order (serial < site),
	// not the order written in @key(site, serial).
	checkTable(t, cat, "Sensor", tableWant{path: "nodes/0000000000000002-0000000000000011",
		cols: "id:utf8 pk=true, installed:date32 #10, model:utf8 #11, serial:uint32 #12, site:utf8 #13",
		key:  []string{"serial", "site"}, indexes: [][]string{{"model"}, {"serial", "site"}}})
	checkTable(t, cat, "Site", tableWant{path: "nodes/0000000000000003-0000000000000012",
		cols: "id:utf8 pk=true, code:utf8 #14, region:utf8 #15", key: []string{"code"}, indexes: [][]string{{"code"}}})
	checkTable(t, cat, "LocatedAt", tableWant{path: "edges/0000000000000004-0000000000000013",
		cols: "id:utf8 pk=true, src:utf8, dst:utf8"})
	checkTable(t, cat, "Raised", tableWant{path: "edges/0000000000000005-0000000000000014",
		cols: "id:utf8 pk=true, src:utf8, dst:utf8"})
	if e := cat.Edge("LocatedAt"); e.Card.Min != 1 || *e.Card.Max != 1 {
		t.Errorf("card %+v", e.Card)
	}
	if got := cat.Node("Site").Property("region").Type.EnumValues; !slices.Equal(got, []string{"eu-central", "us-east", "us-west"}) {
		t.Errorf("region %v", got)
	}
	if c.IR.NextIdentityID != 21 || cat.Node("Alert").Key != nil {
		t.Errorf("next %d", c.IR.NextIdentityID)
	}
}

func TestCatalogDocs(t *testing.T) {
	c := mustContract(t, "docs.pg")
	cat := c.Catalog
	checkTable(t, cat, "Doc", tableWant{path: "nodes/0000000000000001-000000000000000f",
		cols: "id:utf8 pk=true, body:utf8 #5, embedding:fixed_size_list<item: float32, nullable>[768]? #6, " +
			"lang:utf8 #7, pdf:large_binary? #8, published:date64? #9, slug:utf8 #10, title:utf8 #11",
		key: []string{"slug"}, indexes: [][]string{{"embedding"}, {"title"}, {"slug"}}})
	checkTable(t, cat, "Topic", tableWant{path: "nodes/0000000000000002-0000000000000010",
		cols: "id:utf8 pk=true, label:utf8 #12, slug:utf8 #13", key: []string{"slug"}, indexes: [][]string{{"slug"}}})
	checkTable(t, cat, "About", tableWant{path: "edges/0000000000000003-0000000000000011",
		cols:   "id:utf8 pk=true, src:utf8, dst:utf8, score:float64? #14",
		unique: [][]string{{"dst", "src"}}, indexes: [][]string{{"score"}}})
	checkTable(t, cat, "Cites", tableWant{path: "edges/0000000000000004-0000000000000012",
		cols: "id:utf8 pk=true, src:utf8, dst:utf8"})
	emb := cat.Node("Doc").Property("embedding")
	if emb.Embed == nil || emb.Embed.Source != "body" || emb.Embed.Model != nil || emb.Type.VectorDim != 768 {
		t.Errorf("embedding %+v", emb)
	}
	if !cat.Node("Doc").Property("pdf").Type.IsBlob() {
		t.Error("pdf should be a blob")
	}
}

func TestArrowTypes(t *testing.T) {
	cases := map[string]string{
		"String": "utf8", "Bool": "bool", "I32": "int32", "I64": "int64", "U32": "uint32", "U64": "uint64",
		"F32": "float32", "F64": "float64", "Date": "date32", "DateTime": "date64", "Blob": "large_binary",
		"Vector(3)": "fixed_size_list<item: float32, nullable>[3]", "[I64]": "list<item: int64, nullable>",
		"[Date]": "list<item: date32, nullable>", "enum(b, a)": "utf8",
	}
	for typ, want := range cases {
		shape, err := Compile("node A { p: " + typ + " }")
		if err != nil {
			t.Fatal(typ, err)
		}
		if got := shape.Nodes[0].Properties[0].Type.ArrowType().String(); got != want {
			t.Errorf("%s -> %s, want %s", typ, got, want)
		}
	}
}
