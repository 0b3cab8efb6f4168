package migrate

import (
	"strings"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

// A scenario is one planning case of the reference's own tests, rewritten as a pair of
// schemas and the plan expected of them: steps rendered as `worker schema plan` prints them
// (Step.String), in order. A plan with an "unsupported change" line is unsupported.
type scenario struct {
	name string
	// ref names the reference tests the scenario comes from (file: test).
	ref string
	// old is initialised; with via, the accepted schema is old evolved to via first.
	old, via, new string
	dataLoss      bool     // the plan as --allow-data-loss shows it
	steps         []string // the expected plan
	err           string   // instead of a plan: a planning error containing this
	outcome       string   // one line for docs/schema-evolution.md
}

// testSchema is the reference's test fixture (crates/omnigraph/tests/fixtures/test.pg).
const testSchema = `node Person {
    name: String @key
    age: I32?
}

node Company {
    name: String @key
}

edge Knows: Person -> Person {
    since: Date?
}

edge WorksAt: Person -> Company
`

const ticket = "node Ticket {\n    slug: String @key\n    status: enum(todo, doing, done)\n}\n"

// humanRenamed is testSchema with Person renamed Human by @rename_from, edges retargeted.
var humanRenamed = strings.NewReplacer("node Person {\n", "node Human @rename_from(\"Person\") {\n",
	"edge Knows: Person -> Person", "edge Knows: Human -> Human",
	"edge WorksAt: Person -> Company", "edge WorksAt: Human -> Company").Replace(testSchema)

func replace(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("scenario fixture: " + old + " not found")
	}
	return strings.Replace(s, old, new, 1)
}

// The reference's test files (docs/schema-evolution.md gives their full paths).
const (
	planRS   = "schema_plan.rs"
	applyRS  = "schema_apply.rs"
	cliRS    = "cli_schema_config.rs"
	routesRS = "schema_routes.rs"
	irRS     = "schema_ir.rs"
	// The cluster controller's plan embeds a migration preview; its apply refuses what the
	// planner refuses.
	clusterRS = "cluster tests.rs"
	e2eRS     = "cli_cluster_e2e.rs"
)

// clusterSchema is the cluster tests' people.pg.
const clusterSchema = "\nnode Person {\n  name: String @key\n  age: I32?\n}\n"

const (
	mf106 = " [OG-MF-106, destructive]: changing property type for "
	mf103 = " [OG-MF-103, validated]: adding required property "
)

var scenarios = []scenario{
	// ── additive ──
	{name: "add nullable property", ref: applyRS + ": plan_schema_reports_supported_additive_change; " + cliRS + ": schema_plan_json_reports_supported_additive_change, schema_plan_parity_cli_and_sdk, schema_apply_json_applies_supported_migration",
		old: testSchema, new: replace(testSchema, "    age: I32?\n}", "    age: I32?\n    nickname: String?\n}"),
		steps:   []string{"add property 'Person.nickname' (String?) on node 'Person'"},
		outcome: "supported: add_property Person.nickname (String?), the only step"},
	{name: "add nullable property and index", ref: planRS + ": plan_supports_additive_nullable_property_and_index",
		old:     "node Person {\n    name: String @key\n    age: I32?\n}\n",
		new:     "node Person {\n    name: String @key\n    age: I32? @index\n    nickname: String?\n}\n",
		steps:   []string{"add constraint @index(age) on node 'Person'", "add property 'Person.nickname' (String?) on node 'Person'"},
		outcome: "supported: add_constraint Index([age]) once (property and table constraint are one step), add_property nickname"},
	{name: "add index to a nullable property", ref: routesRS + ": schema_apply_route_can_add_index",
		old: testSchema, new: replace(testSchema, "age: I32?", "age: I32? @index"),
		steps:   []string{"add constraint @index(age) on node 'Person'"},
		outcome: "supported: add_constraint Index([age])"},
	{name: "add index to the key property", ref: cliRS + ": schema_apply_json_adds_index_for_existing_property",
		old: testSchema, new: replace(testSchema, "name: String @key", "name: String @key @index"),
		steps:   []string{"add constraint @index(name) on node 'Person'"},
		outcome: "supported: add_constraint Index([name])"},
	{name: "add index beside a vector index", ref: applyRS + ": apply_schema_defers_vector_index_on_empty_table",
		old:     "node Doc {\n    slug: String @key\n    body: String?\n    embedding: Vector(8) @index\n}\n",
		new:     "node Doc {\n    slug: String @key\n    body: String? @index\n    embedding: Vector(8) @index\n}\n",
		steps:   []string{"add constraint @index(body) on node 'Doc'"},
		outcome: "supported: add_constraint Index([body])"},
	{name: "add index to a required property", ref: applyRS + ": index_only_constraint_apply_touches_no_table_data",
		old: "node Doc {\n    slug: String @key\n    n: I64\n}\n", new: "node Doc {\n    slug: String @key\n    n: I64 @index\n}\n",
		steps:   []string{"add constraint @index(n) on node 'Doc'"},
		outcome: "supported: add_constraint Index([n])"},
	{name: "add interface", ref: applyRS + ": apply_schema_interface_evolution_is_identity_only_and_durable (1)",
		old: testSchema, new: "interface Named {\n    name: String\n}\n\n" + testSchema,
		steps:   []string{"add interface type 'Named'"},
		outcome: "supported: add_type interface Named"},
	{name: "add interface property", ref: applyRS + ": apply_schema_interface_evolution_is_identity_only_and_durable (2)",
		old: "interface Named {\n    name: String\n}\n\n" + testSchema, new: "interface Named {\n    name: String\n    alias: String?\n}\n\n" + testSchema,
		steps:   []string{"add property 'Named.alias' (String?) on interface 'Named'"},
		outcome: "supported: add_property on interface Named.alias"},
	{name: "no change", ref: applyRS + ": apply_schema_noop_returns_not_applied; " + cliRS + ": schema_apply_human_reports_noop",
		old: testSchema, new: testSchema, steps: nil,
		outcome: "supported, no steps"},

	{name: "cluster: add nullable property", ref: clusterRS + ": plan_embeds_migration_preview_for_schema_update, apply_schema_update_and_dependent_query_in_one_run; " + e2eRS + ": cluster_e2e_schema_change_applied_by_cluster",
		old: clusterSchema, new: "\nnode Person {\n  name: String @key\n  age: I32?\n  bio: String?\n}\n",
		steps:   []string{"add property 'Person.bio' (String?) on node 'Person'"},
		outcome: "supported: add_property Person.bio"},

	// ── renames ──
	{name: "rename type and property", ref: planRS + ": plan_supports_explicit_type_and_property_rename",
		old: "node User {\n    name: String @key\n}\n", new: "node Account @rename_from(\"User\") {\n    full_name: String @key @rename_from(\"name\")\n}\n",
		steps:   []string{"rename node type 'User' -> 'Account'", "rename property 'Account.name' -> 'Account.full_name' on node 'Account'"},
		outcome: "supported: rename_type User→Account, then rename_property name→full_name on Account"},
	{name: "rename node type, edges retargeted", ref: applyRS + ": apply_schema_pure_type_rename_preserves_identity_path_and_version, apply_schema_renames_node_type_via_rename_from_and_preserves_rows; " + cliRS + ": schema_apply_json_renames_type_and_updates_snapshot; " + routesRS + ": schema_apply_route_can_rename_type",
		old: replace(testSchema, "    age: I32?", "    age: I32?\n    avatar: Blob?"), new: replace(humanRenamed, "    age: I32?", "    age: I32?\n    avatar: Blob?"),
		steps:   []string{"rename node type 'Person' -> 'Human'"},
		outcome: "supported: rename_type Person→Human only (edge endpoints keep their ids: no endpoint change, no add_property)"},
	{name: "rename property", ref: cliRS + ": schema_apply_json_renames_property_and_updates_catalog; " + routesRS + ": schema_apply_route_can_rename_property",
		old: testSchema, new: replace(testSchema, "age: I32?", "years: I32? @rename_from(\"age\")"),
		steps:   []string{"rename property 'Person.age' -> 'Person.years' on node 'Person'"},
		outcome: "supported: rename_property age→years"},
	{name: "composite key members renamed across each other", ref: applyRS + ": composite_key_identity_survives_lexically_crossing_property_renames",
		old:     "node Pair {\n    alpha: String\n    zeta: String\n    label: String\n    @key(alpha, zeta)\n}\n",
		new:     "node Pair {\n    aaaa: String @rename_from(\"zeta\")\n    zzzz: String @rename_from(\"alpha\")\n    label: String\n    @key(aaaa, zzzz)\n}\n",
		steps:   []string{"rename property 'Pair.zeta' -> 'Pair.aaaa' on node 'Pair'", "rename property 'Pair.alpha' -> 'Pair.zzzz' on node 'Pair'"},
		outcome: "supported: two rename_property steps; the key is the same constraint (by property identity)"},
	{name: "composite unique member renamed", ref: planRS + ": plan_normalizes_composite_constraint_field_identity_order_across_rename",
		old:     "node Pair {\n    alpha: String\n    beta: String\n    @unique(alpha, beta)\n}\n",
		new:     "node Pair {\n    zeta: String @rename_from(\"alpha\")\n    beta: String\n    @unique(zeta, beta)\n}\n",
		steps:   []string{"rename property 'Pair.alpha' -> 'Pair.zeta' on node 'Pair'"},
		outcome: "supported: one rename_property; field order is not constraint identity"},
	{name: "embed binding across type and source renames", ref: planRS + ": plan_keeps_embed_binding_supported_across_type_and_source_property_rename",
		old:     "node Doc {\n    body: String\n    embedding: Vector(3) @embed(\"body\", model=\"model-a\")\n}\n",
		new:     "node Article @rename_from(\"Doc\") {\n    text: String @rename_from(\"body\")\n    embedding: Vector(3) @embed(\"text\", model=\"model-a\")\n}\n",
		steps:   []string{"rename node type 'Doc' -> 'Article'", "rename property 'Article.body' -> 'Article.text' on node 'Article'"},
		outcome: "supported: rename_type, rename_property; @embed follows the source's identity"},

	// ── enums ──
	{name: "enum widening", ref: planRS + ": plan_supports_pure_enum_widening",
		old: ticket, new: replace(ticket, "enum(todo, doing, done)", "enum(todo, doing, done, blocked, canceled)"),
		steps:   []string{"extend enum 'Ticket.status' (+blocked, +canceled) on node 'Ticket'"},
		outcome: "supported: extend_enum status added [blocked, canceled]"},
	{name: "enum widening by one", ref: applyRS + ": enum_widening_apply_is_metadata_only_and_accepts_new_variant",
		old: ticket, new: replace(ticket, "enum(todo, doing, done)", "enum(todo, doing, done, blocked)"),
		steps:   []string{"extend enum 'Ticket.status' (+blocked) on node 'Ticket'"},
		outcome: "supported: extend_enum [blocked]"},
	{name: "enum reorder", ref: planRS + ": plan_treats_pure_reorder_as_no_change",
		old: ticket, new: replace(ticket, "enum(todo, doing, done)", "enum(done, todo, doing)"), steps: nil,
		outcome: "supported, no steps"},
	{name: "enum rename then widen", ref: planRS + ": plan_orders_rename_before_widening_and_names_the_new_property",
		old: ticket, new: replace(ticket, "status: enum(todo, doing, done)", "state: enum(todo, doing, done, blocked) @rename_from(\"status\")"),
		steps:   []string{"rename property 'Ticket.status' -> 'Ticket.state' on node 'Ticket'", "extend enum 'Ticket.state' (+blocked) on node 'Ticket'"},
		outcome: "supported: rename_property first, then extend_enum naming the new property"},
	{name: "enum narrowing", ref: planRS + ": plan_rejects_enum_narrowing_and_rename (1); " + applyRS + ": enum_narrowing_apply_is_refused",
		old: ticket, new: replace(ticket, "enum(todo, doing, done)", "enum(todo, done)"),
		steps:   []string{"unsupported change on node:Ticket.status" + mf106 + "'Ticket.status' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106"},
	{name: "enum value renamed", ref: planRS + ": plan_rejects_enum_narrowing_and_rename (2)",
		old: ticket, new: replace(ticket, "enum(todo, doing, done)", "enum(todo, in_progress, done)"),
		steps:   []string{"unsupported change on node:Ticket.status" + mf106 + "'Ticket.status' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106"},
	{name: "enum widening with nullability change", ref: planRS + ": plan_rejects_widening_combined_with_nullability_change",
		old: ticket, new: replace(ticket, "enum(todo, doing, done)", "enum(todo, doing, done, blocked)?"),
		steps:   []string{"unsupported change on node:Ticket.status" + mf106 + "'Ticket.status' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106"},
	{name: "enum to free string", ref: planRS + ": plan_rejects_enum_to_free_string_and_back (1)",
		old: ticket, new: replace(ticket, "enum(todo, doing, done)", "String"),
		steps:   []string{"unsupported change on node:Ticket.status" + mf106 + "'Ticket.status' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106"},
	{name: "free string to enum", ref: planRS + ": plan_rejects_enum_to_free_string_and_back (2)",
		old: replace(ticket, "enum(todo, doing, done)", "String"), new: ticket,
		steps:   []string{"unsupported change on node:Ticket.status" + mf106 + "'Ticket.status' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106"},

	// ── refusals ──
	{name: "widen a property type", ref: applyRS + ": apply_schema_unsupported_plan_does_not_advance_manifest; " + cliRS + ": schema_plan_json_reports_unsupported_type_change, schema_apply_rejects_unsupported_plan; " + routesRS + ": schema_apply_route_rejects_unsupported_plan",
		old: testSchema, new: replace(testSchema, "age: I32?", "age: I64?"),
		steps:   []string{"unsupported change on node:Person.age" + mf106 + "'Person.age' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106 on node:Person.age"},
	{name: "cluster: widen a property type", ref: clusterRS + ": apply_unsupported_schema_change_preserves_applied_external_blob_policy",
		old: clusterSchema, new: "\nnode Person {\n  name: String @key\n  age: I64?\n}\n",
		steps:   []string{"unsupported change on node:Person.age" + mf106 + "'Person.age' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106 (the cluster's diagnostic says \"changing property type\")"},
	{name: "narrow a property type", ref: applyRS + ": plan_schema_for_property_type_narrowing_is_not_supported",
		old: replace(testSchema, "age: I32?", "age: I64?"), new: testSchema,
		steps:   []string{"unsupported change on node:Person.age" + mf106 + "'Person.age' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106"},
	{name: "add required property", ref: planRS + ": plan_rejects_required_property_addition",
		old: "node Person {\n    name: String @key\n}\n", new: "node Person {\n    name: String @key\n    age: I32\n}\n",
		steps:   []string{"unsupported change on node:Person.age" + mf103 + "'Person.age' requires a backfill and is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-103 on node:Person.age"},
	{name: "add required property to a loaded type", ref: applyRS + ": apply_schema_rejects_adding_a_required_property_without_backfill",
		old: testSchema, new: replace(testSchema, "    age: I32?\n}", "    age: I32?\n    email: String\n}"),
		steps:   []string{"unsupported change on node:Person.email" + mf103 + "'Person.email' requires a backfill and is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-103"},
	{name: "change @embed source", ref: planRS + ": plan_rejects_embed_source_or_model_changes (1)",
		old:     "node Doc {\n    slug: String @key\n    title: String\n    body: String\n    embedding: Vector(3) @embed(\"body\", model=\"model-a\")\n}\n",
		new:     "node Doc {\n    slug: String @key\n    title: String\n    body: String\n    embedding: Vector(3) @embed(\"title\", model=\"model-a\")\n}\n",
		steps:   []string{"unsupported change on node:Doc.embedding: changing @embed source or model for 'Doc.embedding' is not supported in schema migration v1; rebuild the graph so stored vectors and their declared embedding space cannot diverge"},
		outcome: "unsupported (no code): @embed source changed"},
	{name: "change @embed model", ref: planRS + ": plan_rejects_embed_source_or_model_changes (2)",
		old:     "node Doc {\n    slug: String @key\n    title: String\n    body: String\n    embedding: Vector(3) @embed(\"body\", model=\"model-a\")\n}\n",
		new:     "node Doc {\n    slug: String @key\n    title: String\n    body: String\n    embedding: Vector(3) @embed(\"body\", model=\"model-b\")\n}\n",
		steps:   []string{"unsupported change on node:Doc.embedding: changing @embed source or model for 'Doc.embedding' is not supported in schema migration v1; rebuild the graph so stored vectors and their declared embedding space cannot diverge"},
		outcome: "unsupported (no code): @embed model changed"},
	{name: "property constraint becomes a table constraint", ref: planRS + ": plan_classifies_property_constraint_provenance_and_satisfaction_changes (1)",
		old: "node N { value: String @unique }", new: "node N { value: String @unique(value) }",
		steps:   []string{"unsupported change on node:N.value: removing property constraints from 'N.value' is not supported in schema migration v1"},
		outcome: "unsupported (no code): property constraints removed"},
	{name: "interface property declared directly", ref: planRS + ": plan_classifies_property_constraint_provenance_and_satisfaction_changes (2)",
		old: "interface A { value: String } node N implements A {}", new: "interface A { value: String } node N implements A { value: String }",
		steps:   []string{"unsupported change on node:N.value: changing declaration provenance for 'N.value' is not supported in schema migration v1"},
		outcome: "unsupported (no code): declaration provenance"},
	{name: "one interface contributor removed", ref: planRS + ": plan_classifies_property_constraint_provenance_and_satisfaction_changes (3); " + irRS + ": removing_one_interface_contributor_preserves_effective_property_identity",
		old: "interface A { value: String } interface B { value: String } node N implements A, B {}", new: "interface A { value: String } interface B { value: String } node N implements A {}",
		steps: []string{"unsupported change on node:N: changing implemented interfaces on node 'N' is not supported in schema migration v1",
			"unsupported change on node:N.value: changing interface-property satisfaction links for 'N.value' is not supported in schema migration v1"},
		outcome: "unsupported (no code): implemented interfaces, then satisfaction links"},

	// ── drops ──
	{name: "drop nullable property", ref: planRS + ": plan_emits_soft_drop_for_removed_nullable_property",
		old: "node Person {\n    name: String @key\n    age: I32?\n}\n", new: "node Person {\n    name: String @key\n}\n",
		steps:   []string{"drop property 'Person.age' of node 'Person' (soft mode)"},
		outcome: "supported: drop_property Person.age, soft"},
	{name: "drop property beside a blob", ref: applyRS + ": apply_schema_drops_a_nullable_property_softly_preserves_prior_version",
		old: "node Document {\n    title: String @key\n    content: Blob?\n    note: String?\n}\n", new: "node Document {\n    title: String @key\n    content: Blob?\n}\n",
		steps:   []string{"drop property 'Document.note' of node 'Document' (soft mode)"},
		outcome: "supported: drop_property Document.note, soft"},
	{name: "drop property, soft by default", ref: applyRS + ": apply_schema_with_allow_data_loss_promotes_drops_to_hard (soft half); " + cliRS + ": schema_apply_without_allow_data_loss_keeps_soft_drops; " + routesRS + ": schema_apply_route_soft_drops_property_via_http, schema_apply_route_keeps_drops_soft_without_flag",
		old: testSchema, new: replace(testSchema, "    age: I32?\n", ""),
		steps:   []string{"drop property 'Person.age' of node 'Person' (soft mode)"},
		outcome: "supported: drop_property, mode soft"},
	{name: "drop property with --allow-data-loss", ref: applyRS + ": apply_schema_with_allow_data_loss_promotes_drops_to_hard, apply_schema_hard_drops_property_makes_prior_version_unreachable; " + cliRS + ": schema_apply_allow_data_loss_flag_promotes_drops_to_hard; " + routesRS + ": schema_apply_route_hard_drops_property_with_allow_data_loss",
		old: testSchema, new: replace(testSchema, "    age: I32?\n", ""), dataLoss: true,
		steps:   []string{"drop property 'Person.age' of node 'Person' (hard mode)"},
		outcome: "supported: drop_property, mode hard"},
	{name: "drop node and its edge", ref: planRS + ": plan_emits_soft_drop_for_removed_node_and_edge_types",
		old: "node Person {\n    name: String @key\n}\n\nnode Company {\n    name: String @key\n}\n\nedge WorksAt: Person -> Company\n", new: "node Person {\n    name: String @key\n}\n",
		steps:   []string{"drop node type 'Company' (soft mode)", "drop edge type 'WorksAt' (soft mode)"},
		outcome: "supported: drop_type node Company, drop_type edge WorksAt, soft"},
	{name: "drop node and referencing edge", ref: applyRS + ": apply_schema_drops_node_and_referencing_edge_softly; " + routesRS + ": schema_apply_route_soft_drops_node_type_via_http",
		old: testSchema, new: "node Person {\n    name: String @key\n    age: I32?\n}\n\nedge Knows: Person -> Person {\n    since: Date?\n}\n",
		steps:   []string{"drop node type 'Company' (soft mode)", "drop edge type 'WorksAt' (soft mode)"},
		outcome: "supported: two soft drop_type steps (node first, then edge)"},
	{name: "drop node and edge with --allow-data-loss", ref: applyRS + ": apply_schema_hard_drops_node_and_edge_with_flag_succeeds",
		old: testSchema, new: "node Person {\n    name: String @key\n    age: I32?\n}\n\nedge Knows: Person -> Person {\n    since: Date?\n}\n", dataLoss: true,
		steps:   []string{"drop node type 'Company' (hard mode)", "drop edge type 'WorksAt' (hard mode)"},
		outcome: "supported: two hard drop_type steps"},
	{name: "drop edge type", ref: applyRS + ": apply_schema_drops_an_edge_type_softly",
		old: testSchema, new: replace(testSchema, "\nedge WorksAt: Person -> Company", ""),
		steps:   []string{"drop edge type 'WorksAt' (soft mode)"},
		outcome: "supported: drop_type edge WorksAt, soft"},
	{name: "rename type and drop a property, hard", ref: applyRS + ": apply_schema_rename_and_hard_property_drop_cleans_source_incarnation",
		old: testSchema, new: replace(humanRenamed, "    age: I32?\n", ""), dataLoss: true,
		steps:   []string{"rename node type 'Person' -> 'Human'", "drop property 'Human.age' of node 'Human' (hard mode)"},
		outcome: "supported: rename_type, then drop_property on the new name, hard"},
	{name: "drop, then re-add under the same name", ref: applyRS + ": apply_schema_drop_then_same_name_readd_mints_new_identity_and_path",
		old: "node Person { name: String @key }\nnode Anchor { name: String @key }\n", via: "node Anchor { name: String @key }",
		new:     "node Person { name: String @key }\nnode Anchor { name: String @key }\n",
		steps:   []string{"add node type 'Person'"},
		outcome: "supported: add_type Person with fresh type and incarnation ids (after the drop's plan: drop_type Person)"},
	{name: "metadata-only annotation change", ref: planRS + ": plan_supports_metadata_only_annotation_changes",
		old: "node Person @description(\"old\") {\n    name: String @key\n}\n", new: "node Person @description(\"new\") {\n    name: String @key\n}\n",
		steps:   []string{"update metadata on node 'Person' (@description(\"new\"))"},
		outcome: "supported: update_type_metadata with the desired annotations"},

	// ── identity refusals (the desired schema cannot be resolved: no plan) ──
	{name: "rename across declaration kinds", ref: irRS + ": rejects_cross_kind_and_cross_owner_renames (1)",
		old: "node A { p: String } node B { q: String }", new: "node B { q: String } edge E: B -> B @rename_from(\"A\") {}",
		err: "cannot rename accepted 'A' across declaration kinds", outcome: "error (schema identity): a rename across kinds"},
	{name: "rename across owners", ref: irRS + ": rejects_cross_kind_and_cross_owner_renames (2)",
		old: "node A { p: String } node B { q: String }", new: "node A {} node B { moved: String @rename_from(\"p\") }",
		err: "property moves across stable owners are not supported", outcome: "error (schema identity): a property moved to another type"},
}

// acceptedIR initialises old under a fixed identity domain (and evolves it to via).
func (sc scenario) acceptedIR() (*pg.SchemaIR, error) {
	shape, err := pg.Compile(sc.old)
	if err != nil {
		return nil, err
	}
	ir, _, err := pg.Initialize(testDomain, shape)
	if err != nil || sc.via == "" {
		return ir, err
	}
	shape, err = pg.Compile(sc.via)
	if err != nil {
		return nil, err
	}
	ir, _, err = pg.Resolve(ir, shape)
	return ir, err
}

const testDomain = "01ARZ3NDEKTSV4RRFFQ69G5FAV"

// ours is the source of the further cases: the reference's rules, applied to changes its tests
// do not exercise.
const ours = "none (this project's case)"

// extraScenarios are this project's own cases for the refusals and steps the reference's
// tests leave unexercised.
var extraScenarios = []scenario{
	{name: "move the key to another property", ref: ours,
		old: "node P {\n    a: String @key\n    b: String\n}\n", new: "node P {\n    a: String\n    b: String @key\n}\n",
		steps: []string{"unsupported change on node:P.a: removing property constraints from 'P.a' is not supported in schema migration v1",
			"unsupported change on node:P.b: adding a property-level @key constraint to 'P.b' is not supported in schema migration v1",
			"unsupported change on node:P: removing constraints from 'P' is not supported in schema migration v1",
			"unsupported change on node:P: adding constraint 'key:property:1:3' to 'P' is not supported in schema migration v1"},
		outcome: "unsupported: property constraint removed and added, table key removed and added (4 refusals, no code)"},
	{name: "make a property required", ref: ours,
		old: testSchema, new: replace(testSchema, "age: I32?", "age: I32"),
		steps:   []string{"unsupported change on node:Person.age" + mf106 + "'Person.age' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106 (OG-MF-104 is reserved)"},
	{name: "make a property optional", ref: ours,
		old: replace(testSchema, "age: I32?", "age: I32"), new: testSchema,
		steps:   []string{"unsupported change on node:Person.age" + mf106 + "'Person.age' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106"},
	{name: "list to scalar", ref: ours, old: "node P { a: [String]? }", new: "node P { a: String? }",
		steps:   []string{"unsupported change on node:P.a" + mf106 + "'P.a' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106"},
	{name: "vector dimension", ref: ours, old: "node P { v: Vector(3)? }", new: "node P { v: Vector(4)? }",
		steps:   []string{"unsupported change on node:P.v" + mf106 + "'P.v' is not supported in schema migration v1"},
		outcome: "unsupported: OG-MF-106"},
	{name: "edge cardinality", ref: ours,
		old: testSchema, new: replace(testSchema, "edge Knows: Person -> Person {", "edge Knows: Person -> Person @card(0..1) {"),
		steps:   []string{"unsupported change on edge:Knows: changing cardinality on edge 'Knows' is not supported in schema migration v1"},
		outcome: "unsupported: cardinality"},
	{name: "edge endpoints", ref: ours,
		old: testSchema, new: replace(testSchema, "edge WorksAt: Person -> Company", "edge WorksAt: Company -> Person"),
		steps:   []string{"unsupported change on edge:WorksAt: changing edge endpoints on 'WorksAt' is not supported in schema migration v1"},
		outcome: "unsupported: endpoints"},
	{name: "rename an edge", ref: ours,
		old: testSchema, new: replace(testSchema, "edge Knows: Person -> Person {", "edge Friend: Person -> Person @rename_from(\"Knows\") {"),
		steps:   []string{"rename edge type 'Knows' -> 'Friend'"},
		outcome: "supported: rename_type edge"},
	{name: "add a node and an edge", ref: ours,
		old: "node A { a: String }", new: "node A { a: String }\nnode B { b: String }\nedge E: A -> B\n",
		steps:   []string{"add node type 'B'", "add edge type 'E'"},
		outcome: "supported: add_type node, then add_type edge"},
	{name: "remove an interface", ref: ours,
		old: "interface Named { name: String }\nnode P implements Named { age: I32? }\n", new: "node P { name: String\n age: I32? }\n",
		steps: []string{"unsupported change on interface:Named: removing interface 'Named' is not supported in schema migration v1",
			"unsupported change on node:P: changing implemented interfaces on node 'P' is not supported in schema migration v1",
			"unsupported change on node:P.name: changing declaration provenance for 'P.name' is not supported in schema migration v1",
			"unsupported change on node:P.name: changing interface-property satisfaction links for 'P.name' is not supported in schema migration v1"},
		outcome: "unsupported: interface removal, implements, provenance, satisfaction"},
	{name: "rename an interface", ref: ours,
		old: "interface Named { name: String }\nnode P implements Named {}\n", new: "interface Titled { name: String }\nnode P implements Titled {}\n",
		steps: []string{"add interface type 'Titled'",
			"unsupported change on interface:Named: removing interface 'Named' is not supported in schema migration v1",
			"unsupported change on node:P: changing implemented interfaces on node 'P' is not supported in schema migration v1",
			"unsupported change on node:P.name: changing interface-property satisfaction links for 'P.name' is not supported in schema migration v1"},
		outcome: "unsupported: an interface has no rename hint, so it is an addition and a removal"},
	{name: "custom annotation", ref: ours, old: "node P @foo(\"x\") { a: String }", new: "node P @foo(\"y\") { a: String }",
		steps:   []string{"unsupported change on node:P: changing annotations beyond @description/@instruction is not supported in schema migration v1"},
		outcome: "unsupported: an annotation other than @description/@instruction"},
	{name: "property description", ref: ours, old: "node P { a: String @description(\"x\") }", new: "node P { a: String @description(\"y\") }",
		steps:   []string{"update metadata on property 'P.a' of node 'P' (@description(\"y\"))"},
		outcome: "supported: update_property_metadata"},
	{name: "add a composite unique", ref: ours, old: "node P { a: String b: String }", new: "node P { a: String b: String @unique(a, b) }",
		steps:   []string{"unsupported change on node:P: adding constraint 'unique:property:1:2,property:1:3' to 'P' is not supported in schema migration v1"},
		outcome: "unsupported: a table constraint other than @index, named by its identity key"},
	{name: "change a range", ref: ours, old: "node P { a: I64 @range(a, 0..10) }", new: "node P { a: I64 @range(a, 0..20) }",
		steps: []string{"unsupported change on node:P: removing constraints from 'P' is not supported in schema migration v1",
			"unsupported change on node:P: adding constraint 'range:property:1:2:Some(Integer(0)):Some(Integer(20))' to 'P' is not supported in schema migration v1"},
		outcome: "unsupported: removal and addition of the range"},
	{name: "add a float range", ref: ours, old: "node P { a: F64 }", new: "node P { a: F64 @range(a, 0.5..2.5) }",
		steps:   []string{"unsupported change on node:P: adding constraint 'range:property:1:2:Some(Float(0.5)):Some(Float(2.5))' to 'P' is not supported in schema migration v1"},
		outcome: "unsupported: bounds spelled as the reference's key spells them"},
	{name: "remove a property @index", ref: ours + "; the reference refuses every constraint removal",
		old: replace(testSchema, "    age: I32?\n", "    age: I32? @index\n"), new: testSchema,
		steps:   []string{"drop constraint @index(age) on node 'Person'"},
		outcome: "supported (this project's drop_constraint): the index goes, the table's data stays"},
	{name: "remove a table @index", ref: ours + "; the reference refuses every constraint removal",
		old: "node P { a: String b: String @index(a, b) }", new: "node P { a: String b: String }",
		steps:   []string{"drop constraint @index(a, b) on node 'P'"},
		outcome: "supported (this project's drop_constraint)"},
	{name: "remove an @index and a @unique", ref: ours,
		old: "node P { a: String @index @unique }", new: "node P { a: String }",
		steps: []string{"unsupported change on node:P.a: removing property constraints from 'P.a' is not supported in schema migration v1",
			"unsupported change on node:P: removing constraints from 'P' is not supported in schema migration v1"},
		outcome: "unsupported: only an @index may go alone"},
}
