// Package pg reads OmniGraph `.pg` schemas and derives everything the
// worker needs to write a graph the OmniGraph engine will accept:
//
//   - Parse / ParseFile: lexer + recursive-descent parser producing a File
//     (syntax errors are *ParseError with line:column, expected and found).
//   - Analyze / Compile: the schema rules (types, names, endpoints, keys,
//     interfaces, constraints, annotations) producing the canonical Shape;
//     violations are *SemanticError with a Code and line:column.
//   - Initialize / Resolve: stable identities (SchemaIR): type, property and
//     table-incarnation ids from one never-reused counter, under a per-graph
//     ULID identity domain; Resolve evolves an accepted IR (exact names and
//     @rename_from keep ids).
//   - SchemaIR.PrettyJSON / Hash, SchemaState: the `_schema.ir.json` and
//     `__schema_state.json` contract files; hashes are "sha256:<hex>" over the
//     compact serde-compatible JSON, byte-identical to the reference engine.
//   - NewCatalog: per node/edge table the columns, keys, constraints and the
//     physical Arrow schema (id as Lance's unenforced primary key, user columns
//     tagged with their stable property ids).
//   - InitContract / OpenContract: the above end to end for a new graph or an
//     existing graph root.
//
// Deliberate differences from the reference grammar, all refusals of
// inputs the reference would accept: keywords must be separated from names
// (`nodeA {}` is an error, the reference reads `node A`); a property may not
// be named `id` (nor `src`/`dst` on an edge) — the reference accepts it and
// then fails when creating the table; `@range(p, ..max)` is refused as
// unsupported because the reference records its single bound as the minimum;
// a base type name must be a whole token (`x: Strings` is an unknown type).
package pg
