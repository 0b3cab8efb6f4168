package pg

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"

	"github.com/oklog/ulid/v2"
)

// Contract file names at the graph root.
const (
	SchemaSourceFile        = "_schema.pg"
	SchemaIRFile            = "_schema.ir.json"
	SchemaStateFile         = "__schema_state.json"
	SchemaSourceStagingFile = "_schema.pg.staging"
	SchemaIRStagingFile     = "_schema.ir.json.staging"
	SchemaStateStagingFile  = "__schema_state.json.staging"
)

// Versions recorded in __schema_state.json.
const (
	SchemaStateFormatVersion = 2
	SchemaIdentityVersion    = 2
)

// NewIdentityDomain mints a schema_identity_domain: a canonical uppercase
// ULID (current time, crypto-random entropy).
func NewIdentityDomain() string {
	return ulid.MustNew(ulid.Now(), rand.Reader).String()
}

// SchemaState is `__schema_state.json`.
type SchemaState struct {
	FormatVersion   uint32 `json:"format_version"`
	ShapeHash       string `json:"schema_shape_hash"`
	IRHash          string `json:"schema_ir_hash"`
	IdentityVersion uint32 `json:"schema_identity_version"`
	Domain          string `json:"schema_identity_domain"`
}

// NewSchemaState derives the state recorded beside an accepted IR: the shape
// hash of the IR's projection, the IR hash, and the identity domain.
func NewSchemaState(ir *SchemaIR) (*SchemaState, error) {
	if err := ir.Validate(); err != nil {
		return nil, err
	}
	return &SchemaState{FormatVersion: SchemaStateFormatVersion, ShapeHash: ir.Shape().Hash(),
		IRHash: ir.Hash(), IdentityVersion: SchemaIdentityVersion, Domain: ir.Domain}, nil
}

// JSON is the file content (serde_json pretty form, no trailing newline).
func (s *SchemaState) JSON() string {
	return prettyJSON(obj("format_version", uint64(s.FormatVersion), "schema_shape_hash", s.ShapeHash,
		"schema_ir_hash", s.IRHash, "schema_identity_version", uint64(s.IdentityVersion),
		"schema_identity_domain", s.Domain))
}

// ParseSchemaState decodes and checks the envelope of __schema_state.json.
func ParseSchemaState(data []byte) (*SchemaState, error) {
	var s SchemaState
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("graph schema state in %s is invalid: %w", SchemaStateFile, err)
	}
	switch {
	case s.FormatVersion != SchemaStateFormatVersion:
		return nil, fmt.Errorf("graph schema state format %d is unsupported", s.FormatVersion)
	case s.IdentityVersion != SchemaIdentityVersion:
		return nil, fmt.Errorf("graph schema identity version %d is unsupported", s.IdentityVersion)
	}
	if err := checkDomain(s.Domain); err != nil {
		return nil, fmt.Errorf("graph schema identity domain is invalid: %w", err)
	}
	return &s, nil
}

// Contract is an accepted schema: source, identity-bearing IR, recorded
// state and the catalog built from the IR.
type Contract struct {
	Source      string
	IR          *SchemaIR
	State       *SchemaState
	Catalog     *Catalog
	Diagnostics []Diagnostic // inert @rename_from hints at initialization
}

// InitContract compiles source for a brand-new graph and mints its
// identities. An empty domain mints a fresh one.
func InitContract(source, domain string) (*Contract, error) {
	shape, err := Compile(source)
	if err != nil {
		return nil, err
	}
	if domain == "" {
		domain = NewIdentityDomain()
	}
	ir, diags, err := Initialize(domain, shape)
	if err != nil {
		return nil, err
	}
	c, err := contractFor(source, ir)
	if err != nil {
		return nil, err
	}
	c.Diagnostics = diags
	return c, nil
}

// NewContract is the contract of source and its identity-bearing IR (as a migration plan's
// desired IR): its state and catalog derived from the IR.
func NewContract(source string, ir *SchemaIR) (*Contract, error) { return contractFor(source, ir) }

func contractFor(source string, ir *SchemaIR) (*Contract, error) {
	state, err := NewSchemaState(ir)
	if err != nil {
		return nil, err
	}
	cat, err := NewCatalog(ir)
	if err != nil {
		return nil, err
	}
	return &Contract{Source: source, IR: ir, State: state, Catalog: cat}, nil
}

// OpenContract validates the three contract files of an existing graph the
// way the reference does on open: state envelope, valid IR, IR hash and
// projected shape hash equal to the recorded ones, matching domain, and the
// current source's shape equal to the recorded shape.
func OpenContract(source string, irJSON, stateJSON []byte) (*Contract, error) {
	state, err := ParseSchemaState(stateJSON)
	if err != nil {
		return nil, err
	}
	ir, err := ParseSchemaIR(irJSON)
	if err != nil {
		return nil, err
	}
	switch {
	case ir.Hash() != state.IRHash:
		return nil, fmt.Errorf("accepted compiled schema does not match the recorded schema state (schema_ir_hash %s, recorded %s)", ir.Hash(), state.IRHash)
	case ir.Shape().Hash() != state.ShapeHash:
		return nil, fmt.Errorf("accepted compiled schema's semantic projection does not match the recorded schema shape")
	case ir.Domain != state.Domain:
		return nil, fmt.Errorf("accepted compiled schema identity domain does not match the recorded schema state")
	}
	shape, err := CompileFile(SchemaSourceFile, source)
	if err != nil {
		return nil, err
	}
	if shape.Hash() != state.ShapeHash {
		return nil, fmt.Errorf("current %s no longer matches the accepted compiled schema", SchemaSourceFile)
	}
	return contractFor(source, ir)
}

// Files returns the three root files and their contents.
func (c *Contract) Files() map[string]string {
	return map[string]string{
		SchemaSourceFile: c.Source,
		SchemaIRFile:     c.IR.PrettyJSON(),
		SchemaStateFile:  c.State.JSON(),
	}
}
