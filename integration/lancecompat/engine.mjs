// Thin helpers around the official engine. LANCE_ENGINE picks which one (installed side by side
// from one lock): lance8 = @lancedb/lancedb 0.31.0 (Rust lance 8), lance10 = 0.37.1 (lance 10,
// the reference OmniGraph's), lance12 = 0.39.0 (lance 12). LANCE_DATA_VERSION is the data file
// version of every table the suite creates (default 2.0).
import fs from "node:fs";
import { fromCanonical, toCanonical, toIPCFile } from "./canonical.mjs";

export const ENGINES = { lance8: "@lancedb/lancedb", lance10: "lancedb10", lance12: "lancedb12" };
export const ENGINE = process.env.LANCE_ENGINE || "lance8";
if (!ENGINES[ENGINE]) {
  throw new Error(`LANCE_ENGINE=${ENGINE}: want one of ${Object.keys(ENGINES).join(", ")}`);
}
const lancedb = await import(ENGINES[ENGINE]);
export const DATA_VERSION = process.env.LANCE_DATA_VERSION || "2.0";

// Storage options of the tables this suite creates.
export const TABLE = { new_table_data_storage_version: DATA_VERSION };
export const TABLE_STABLE = { ...TABLE, new_table_enable_stable_row_ids: "true" };

export async function connect(dir) {
  return lancedb.connect(dir);
}

// ensureFreshDir creates dir, or accepts it if it exists and is empty; never deletes anything.
export function ensureFreshDir(dir) {
  if (fs.existsSync(dir)) {
    const entries = fs.readdirSync(dir);
    if (entries.length > 0) throw new Error(`${dir} is not empty (${entries.slice(0, 5).join(", ")}); need a fresh directory`);
  } else {
    fs.mkdirSync(dir, { recursive: true });
  }
}

// createTable creates `name` from canonical rows with an explicit Arrow schema. It goes through the
// native createTable because lancedb's JS sanitizer rejects LargeUtf8/LargeBinary.
export async function createTable(db, name, schema, rows, storageOptions) {
  const buf = toIPCFile(fromCanonical(rows, schema));
  await db.inner.createTable(name, buf, "create", [], storageOptions);
  return db.openTable(name);
}

// openAt opens a table at a branch (null/"main" = main) and version (null = latest).
// With a version the handle is a detached read-only view.
export async function openAt(db, name, branch, version) {
  const opts = {};
  if (branch != null && branch !== "main") opts.branch = branch;
  if (version != null) opts.version = version;
  return db.openTable(name, [], opts);
}

// appendRows appends canonical rows converted with the table's own schema; returns the new version.
// Uses the native add (IPC file) for the same LargeUtf8 reason as createTable.
export async function appendRows(tbl, rows) {
  const schema = await tbl.schema();
  const res = await tbl.inner.add(toIPCFile(fromCanonical(rows, schema)), "append");
  return res?.version ?? (await tbl.version());
}

// typesOf maps column name -> Arrow type for a schema.
export function typesOf(schema) {
  const out = {};
  for (const f of schema.fields) out[f.name] = f.type;
  return out;
}

// scan runs a plain query; returns canonical rows and the result column names (null if no rows:
// lancedb builds an empty Arrow table without a schema when no batch comes back).
export async function scan(tbl, { columns, where } = {}) {
  let q = tbl.query();
  if (where != null) q = q.where(where);
  if (columns != null) q = q.select(columns);
  const t = await q.toArrow();
  return { rows: toCanonical(t), names: t.numRows > 0 ? t.schema.fields.map((f) => f.name) : null };
}

// openCase starts the checks of one verify case (its table, branch and version): check(label,
// fn) runs one labelled check and records in fails why it failed, or the engine error it threw.
// It returns { fails, check, tbl }, or { error } when the table does not open at all; a case
// with a version also checks that the engine opened exactly that version.
export async function openCase(db, c, errText) {
  const fails = [];
  const check = async (label, fn) => {
    try {
      const why = await fn();
      if (why) fails.push(`${label}: ${why}`);
    } catch (e) {
      fails.push(`${label}: engine error: ${errText(e)}`);
    }
  };
  let tbl;
  try {
    tbl = await openAt(db, c.table, c.branch ?? null, c.version ?? null);
  } catch (e) {
    return { error: `open ${c.table}@${c.branch ?? "main"}:v${c.version ?? "latest"}: engine error: ${errText(e)}` };
  }
  if (c.version != null) {
    await check("version", async () => {
      const v = await tbl.version();
      return v !== c.version ? `expected ${c.version}, got ${v}` : null;
    });
  }
  return { fails, check, tbl };
}
