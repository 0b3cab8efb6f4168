package migrate

// Tier is how a change class may be applied.
type Tier string

// The tiers.
const (
	// Safe applies without a scan or a flag.
	Safe Tier = "safe"
	// Validated needs a scan of the existing entities and fails on the first violation.
	Validated Tier = "validated"
	// Destructive loses data and needs an explicit opt-in (--allow-data-loss).
	Destructive Tier = "destructive"
)

// Code is a stable schema-lint diagnostic code (OG-<family>-<nnn>): its meaning never
// changes once published, so tools and operators can match on it rather than on prose.
type Code struct {
	Code   string
	Family string // DS (destructive), MF (maybe-fail)
	Tier   Tier
	Short  string
	// Emitted is true for the codes the planner attaches to a refusal today; the others are
	// reserved.
	Emitted bool
}

// The codes the planner attaches to an unsupported_change.
const (
	// CodeRequiredProperty: a required (non-nullable) property added to an existing type;
	// its entities have no value for it.
	CodeRequiredProperty = "OG-MF-103"
	// CodeTypeChange: a property's type changed (scalar, list, nullability, or an enum other
	// than widened).
	CodeTypeChange = "OG-MF-106"
)

// Codes is the reference's catalogue of schema-lint codes, reserved ones included. Only
// CodeRequiredProperty and CodeTypeChange appear on plans; drops are soft by default and so
// never refused, and the other refusals carry no code.
var Codes = []Code{
	{Code: "OG-DS-101", Family: "DS", Tier: Destructive, Short: "drop populated graph type"},
	{Code: "OG-DS-102", Family: "DS", Tier: Destructive, Short: "drop populated node type"},
	{Code: "OG-DS-103", Family: "DS", Tier: Destructive, Short: "drop populated edge type"},
	{Code: "OG-DS-104", Family: "DS", Tier: Destructive, Short: "drop property from populated type"},
	{Code: "OG-DS-105", Family: "DS", Tier: Destructive, Short: "drop populated vector property"},
	{Code: CodeRequiredProperty, Family: "MF", Tier: Validated, Short: "add required property without @default to populated type", Emitted: true},
	{Code: "OG-MF-104", Family: "MF", Tier: Validated, Short: "tighten nullable to non-nullable"},
	{Code: CodeTypeChange, Family: "MF", Tier: Destructive, Short: "narrowing scalar type", Emitted: true},
}

// LookupCode returns the catalogue entry of code.
func LookupCode(code string) (Code, bool) {
	for _, c := range Codes {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}
