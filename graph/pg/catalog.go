package pg

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Field metadata of physical graph tables (docs/omnigraph-format.md §6).
const (
	// PrimaryKeyMetadataKey marks `id` as Lance's unenforced primary key
	// (legacy boolean form, value "true").
	PrimaryKeyMetadataKey = "lance-schema:unenforced-primary-key"
	// StablePropertyIDMetadataKey carries a user property's decimal stable
	// property id. id/src/dst carry none.
	StablePropertyIDMetadataKey = "omnigraph.stable_property_id"
)

// Catalog is the runtime view of an accepted schema, projected from its
// SchemaIR (never from names), with one Arrow schema per physical table.
type Catalog struct {
	IR         *SchemaIR
	Interfaces []*InterfaceType // sorted by name
	Nodes      []*NodeType      // sorted by name
	Edges      []*EdgeType      // sorted by name
	nodes      map[string]*NodeType
	edges      map[string]*EdgeType
	edgesFold  map[string]*EdgeType
}

// InterfaceType is an interface and its declared properties.
type InterfaceType struct {
	Name       string
	TypeID     uint64
	Properties []*Property
}

// Property is one user column.
type Property struct {
	Name        string
	ID          uint64 // stable property id
	Type        PropType
	Annotations []Annot
	Embed       *EmbedSpec // @embed source and model (Vector properties)
}

// RangeSpec is a node @range constraint (inclusive; nil bound = open).
type RangeSpec struct {
	Property string
	Min, Max *Bound
}

// CheckSpec is a node @check constraint: an unanchored regex match on a
// String property (Rust regex syntax, close to Go's RE2).
type CheckSpec struct {
	Property string
	Pattern  string
}

// Table is what node and edge types share: one physical Lance dataset.
type Table struct {
	Name          string
	TypeID        uint64 // stable_table_id
	IncarnationID uint64 // table_incarnation_id
	// Properties in column order (after id, or id/src/dst), which is the
	// IR's name order.
	Properties  []*Property
	Annotations []Annot
	Unique      [][]string // includes src/dst on edges
	Indexes     [][]string // a @key also appears here (it implies an index)
	// Arrow is the physical schema: id (+ src, dst) then the properties.
	Arrow *arrow.Schema
}

// Property returns the named property, or nil.
func (t *Table) Property(name string) *Property {
	for _, p := range t.Properties {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// NodeType is a node table.
type NodeType struct {
	Table
	Implements []string
	// Key lists the @key members in stable property-id order (the order of
	// a composite id tuple); nil when ids are producer-supplied.
	Key    []string
	Ranges []RangeSpec
	Checks []CheckSpec
}

// EdgeType is an edge table.
type EdgeType struct {
	Table
	From, To string
	Card     Cardinality
}

// TableKey is the manifest alias, "node:Name".
func (n *NodeType) TableKey() string { return "node:" + n.Name }

// TablePath is the dataset path under the graph root,
// "nodes/{stable_table_id:016x}-{table_incarnation_id:016x}".
func (n *NodeType) TablePath() string { return tablePath("nodes", n.TypeID, n.IncarnationID) }

// TableKey is the manifest alias, "edge:Name".
func (e *EdgeType) TableKey() string { return "edge:" + e.Name }

// TablePath is "edges/{stable_table_id:016x}-{table_incarnation_id:016x}".
func (e *EdgeType) TablePath() string { return tablePath("edges", e.TypeID, e.IncarnationID) }

func tablePath(dir string, id, inc uint64) string { return fmt.Sprintf("%s/%016x-%016x", dir, id, inc) }

// TableIdentity renders "{stable:016x}:{incarnation:016x}".
func (t *Table) TableIdentity() string { return fmt.Sprintf("%016x:%016x", t.TypeID, t.IncarnationID) }

// Node returns the node type with the given name, or nil.
func (c *Catalog) Node(name string) *NodeType { return c.nodes[name] }

// Edge returns the edge type with the given name, falling back to a
// case-insensitive match as the reference does; nil when unknown.
func (c *Catalog) Edge(name string) *EdgeType {
	if e := c.edges[name]; e != nil {
		return e
	}
	return c.edgesFold[strings.ToLower(name)]
}

// NewCatalog projects a validated SchemaIR into a Catalog.
func NewCatalog(ir *SchemaIR) (*Catalog, error) {
	if err := ir.Validate(); err != nil {
		return nil, err
	}
	c := &Catalog{IR: ir, nodes: map[string]*NodeType{}, edges: map[string]*EdgeType{}, edgesFold: map[string]*EdgeType{}}
	for _, i := range ir.Interfaces {
		c.Interfaces = append(c.Interfaces, &InterfaceType{Name: i.Name, TypeID: i.TypeID, Properties: properties(i.Properties)})
	}
	for _, n := range ir.Nodes {
		nt := &NodeType{Table: Table{Name: n.Name, TypeID: n.TypeID, IncarnationID: n.IncarnationID,
			Properties: properties(n.Properties), Annotations: n.Annotations}}
		for _, r := range n.Implements {
			nt.Implements = append(nt.Implements, r.Name)
		}
		for _, con := range n.Constraints {
			switch con.Kind {
			case KeyConstraint:
				fields := slices.Clone(con.Fields)
				for _, f := range fields {
					if f.Property == nil {
						return nil, invalidIR("node '%s' @key must reference declared properties", n.Name)
					}
				}
				slices.SortFunc(fields, func(a, b FieldRef) int { return cmp.Compare(a.Property.PropertyID, b.Property.PropertyID) })
				nt.Key = mapSlice(fields, FieldRef.Name)
				nt.Indexes = append(nt.Indexes, nt.Key)
			case UniqueConstraint:
				nt.Unique = append(nt.Unique, con.spec().Columns)
			case IndexConstraint:
				nt.Indexes = append(nt.Indexes, con.spec().Columns)
			case RangeConstraint:
				nt.Ranges = append(nt.Ranges, RangeSpec{Property: con.Field.Name(), Min: con.Min, Max: con.Max})
			case CheckConstraint:
				nt.Checks = append(nt.Checks, CheckSpec{Property: con.Field.Name(), Pattern: con.Pattern})
			}
		}
		nt.Arrow = arrowSchema(nt.Properties, "id")
		c.Nodes = append(c.Nodes, nt)
		c.nodes[n.Name] = nt
	}
	for _, e := range ir.Edges {
		et := &EdgeType{Table: Table{Name: e.Name, TypeID: e.TypeID, IncarnationID: e.IncarnationID,
			Properties: properties(e.Properties), Annotations: e.Annotations}, From: e.From.Name, To: e.To.Name, Card: e.Card}
		for _, con := range e.Constraints {
			switch con.Kind {
			case UniqueConstraint:
				et.Unique = append(et.Unique, con.spec().Columns)
			case IndexConstraint:
				et.Indexes = append(et.Indexes, con.spec().Columns)
			}
		}
		et.Arrow = arrowSchema(et.Properties, "id", "src", "dst")
		fold := strings.ToLower(e.Name)
		if prev := c.edgesFold[fold]; prev != nil {
			return nil, invalidIR("edge name collision after case folding: '%s' conflicts with '%s'", e.Name, prev.Name)
		}
		c.Edges = append(c.Edges, et)
		c.edges[e.Name], c.edgesFold[fold] = et, et
	}
	return c, nil
}

func properties(ps []*PropertyIR) []*Property {
	return mapSlice(ps, func(p *PropertyIR) *Property {
		out := &Property{Name: p.Name, ID: p.PropertyID, Type: p.Type, Annotations: p.Annotations}
		if p.Embed != nil {
			out.Embed = &EmbedSpec{Source: p.Embed.Source.PropertyName, Model: p.Embed.Model}
		}
		return out
	})
}

// arrowSchema builds id (primary key), the other system columns, then the
// properties with their stable ids.
func arrowSchema(props []*Property, system ...string) *arrow.Schema {
	var fields []arrow.Field
	for _, name := range system {
		f := arrow.Field{Name: name, Type: arrow.BinaryTypes.String}
		if name == "id" {
			f.Metadata = arrow.NewMetadata([]string{PrimaryKeyMetadataKey}, []string{"true"})
		}
		fields = append(fields, f)
	}
	for _, p := range props {
		fields = append(fields, arrow.Field{Name: p.Name, Type: p.Type.ArrowType(), Nullable: p.Type.Nullable,
			Metadata: arrow.NewMetadata([]string{StablePropertyIDMetadataKey}, []string{strconv.FormatUint(p.ID, 10)})})
	}
	return arrow.NewSchema(fields, nil)
}
