// A graph as the reference OmniGraph makes it, and a check that an engine opens every table of
// a graph at every version.
//
// refgraph <root>: <root> holds a graph freshly initialised by the Go engine (schema files, one
// empty table per node and edge type, __manifest at version 1). Every Lance dataset of it is
// made anew by the official engine the way the reference's init makes it: node and edge tables
// empty at version 1, __manifest at version 1 with the same rows (its table_version rows then
// point at the new tables' manifests), all with stable row ids at the suite's data file version
// (the reference pins 2.2), and an empty _graph_commit_recoveries.lance, which the reference
// creates once and appends to afterwards.
//
// openall <root>: every Lance dataset under <root> (main and its branches) is opened at every
// version and counted and scanned in full; one result line per dataset.
import fs from "node:fs";
import path from "node:path";
import { arrow, fromCanonical, toIPCFile } from "./canonical.mjs";
import { connect, scan, TABLE_STABLE } from "./engine.mjs";

const RECOVERIES = "_graph_commit_recoveries.lance";

// datasets lists the Lance datasets of a graph root: __manifest, every nodes/* and edges/*
// table, and the recovery audit table when present (relative paths).
function datasets(root) {
  const out = ["__manifest"];
  for (const kind of ["nodes", "edges"]) {
    const d = path.join(root, kind);
    if (fs.existsSync(d)) for (const t of fs.readdirSync(d).sort()) out.push(`${kind}/${t}`);
  }
  if (fs.existsSync(path.join(root, RECOVERIES))) out.push(RECOVERIES);
  return out;
}

// latestManifest is the V2-named manifest file of a dataset's newest version, with its size.
function latestManifest(dir) {
  const names = fs.readdirSync(path.join(dir, "_versions")).filter((n) => n.endsWith(".manifest"));
  names.sort(); // V2 names count down from u64::MAX, zero-padded: the first is the newest
  const file = path.join(dir, "_versions", names[0]);
  return { file, size: fs.statSync(file).size };
}

// remake replaces the dataset at root/rel with one the official engine creates from the same
// schema and rows, and returns its newest manifest.
async function remake(root, rel, rowsOf = (rows) => rows) {
  const link = fs.mkdtempSync(path.join(root, ".refgraph-"));
  try {
    fs.symlinkSync(path.join(root, rel), path.join(link, "old.lance"));
    const db = await connect(link);
    const old = await db.openTable("old");
    const schema = await old.schema();
    const { rows } = await scan(old);
    const buf = toIPCFile(fromCanonical(rowsOf(rows), schema));
    await db.inner.createTable("new", buf, "create", [], TABLE_STABLE);
    fs.rmSync(path.join(root, rel), { recursive: true });
    fs.renameSync(path.join(link, "new.lance"), path.join(root, rel));
  } finally {
    fs.rmSync(link, { recursive: true, force: true });
  }
  return latestManifest(path.join(root, rel));
}

export async function refGraph(root, emit) {
  const tables = datasets(root).filter((d) => d !== "__manifest" && d !== RECOVERIES);
  const made = {};
  for (const t of tables) made[t] = await remake(root, t);
  // __manifest: the same rows, each table_version row pointing at its table's new manifest.
  await remake(root, "__manifest", (rows) =>
    rows.map((r) => {
      if (r.object_type !== "table_version") return r;
      const loc = rows.find((x) => x.object_type === "table" && x.stable_table_id === r.stable_table_id && x.table_incarnation_id === r.table_incarnation_id)?.location;
      const m = made[loc];
      if (!m) throw new Error(`table_version row ${r.object_id}: no remade table at ${loc}`);
      const meta = { manifest_path: path.resolve(m.file), manifest_size: m.size, e_tag: null, naming_scheme: "V2" };
      return { ...r, metadata: JSON.stringify(meta) };
    }),
  );
  // The recovery audit table, created empty as the reference does.
  const us = new arrow.Timestamp(arrow.TimeUnit.MICROSECOND);
  const f = (name, type, nullable = false) => new arrow.Field(name, type, nullable);
  const audit = new arrow.Schema([
    f("graph_commit_id", new arrow.Utf8()),
    f("recovery_kind", new arrow.Utf8()),
    f("recovery_for_actor", new arrow.Utf8(), true),
    f("operation_id", new arrow.Utf8()),
    f("sidecar_writer_kind", new arrow.Utf8()),
    f("per_table_outcomes_json", new arrow.Utf8()),
    f("created_at", us),
  ]);
  const db = await connect(root);
  await db.inner.createTable("_graph_commit_recoveries", toIPCFile(fromCanonical([], audit)), "create", [], TABLE_STABLE);
  emit({ case: "refgraph-built", ok: true });
}

export async function openAll(root, emit) {
  const link = fs.mkdtempSync(path.join(root, ".openall-"));
  try {
    const db = await connect(link);
    for (const rel of datasets(root)) {
      const name = rel.replace(/[/.]/g, "_");
      fs.symlinkSync(path.join(root, rel), path.join(link, `${name}.lance`));
      const branches = ["main"];
      const refs = path.join(root, rel, "_refs", "branches");
      if (fs.existsSync(refs)) for (const b of fs.readdirSync(refs)) branches.push(decodeURIComponent(b.replace(/\.json$/, "")));
      const fails = [];
      let opened = 0;
      for (const branch of branches) {
        try {
          const opts = branch === "main" ? {} : { branch };
          const tbl = await db.openTable(name, [], opts);
          for (const v of await tbl.listVersions()) {
            try {
              const at = await db.openTable(name, [], { ...opts, version: v.version });
              const n = await at.countRows();
              const { rows } = await scan(at);
              if (rows.length !== n) fails.push(`${branch}@v${v.version}: countRows ${n}, scan ${rows.length}`);
              opened++;
            } catch (e) {
              fails.push(`${branch}@v${v.version}: ${e.message.replace(/\s+/g, " ").slice(0, 300)}`);
            }
          }
        } catch (e) {
          fails.push(`${branch}: ${e.message.replace(/\s+/g, " ").slice(0, 300)}`);
        }
      }
      emit({ case: `openall/${rel}`, ok: fails.length === 0 && opened > 0, error: fails.length ? fails.join(" | ") : opened ? undefined : "no version opened" });
    }
  } finally {
    fs.rmSync(link, { recursive: true, force: true });
  }
}

// graphidx <root>: read <root>/graphidx.json ({"tables": [{"path": "nodes/…", "indices":
// ["id_idx", …]}]}) and check each graph table at its newest version: the engine lists those
// indices, and for a few values of each indexed column an equality filter is answered from
// the index (its plan names it) with exactly the rows a full scan holds. One result line per
// table.
export async function graphIdx(root, emit, errText) {
  const spec = JSON.parse(fs.readFileSync(path.join(root, "graphidx.json"), "utf8"));
  for (const t of spec.tables) {
    const fails = [];
    const link = fs.mkdtempSync(path.join(root, ".graphidx-"));
    try {
      fs.symlinkSync(path.join(root, t.path), path.join(link, "t.lance"));
      const db = await connect(link);
      const tbl = await db.openTable("t");
      const listed = (await tbl.listIndices()).map((x) => x.name);
      for (const name of t.indices) {
        if (!listed.includes(name)) fails.push(`index ${name} not listed (engine lists ${JSON.stringify(listed)})`);
      }
      const { rows } = await scan(tbl);
      for (const name of t.indices) {
        const col = name.replace(/_idx$/, "");
        const values = [...new Set(rows.map((r) => r[col]).filter((v) => v != null))].slice(0, 3);
        for (const v of values) {
          const where = `${col} = '${String(v).replace(/'/g, "''")}'`;
          const plan = await tbl.query().where(where).explainPlan(false);
          if (!plan.includes(`@${name}(`)) fails.push(`${where}: the plan does not use ${name}`);
          const got = (await scan(tbl, { where })).rows.map((r) => JSON.stringify(r)).sort();
          const want = rows.filter((r) => r[col] === v).map((r) => JSON.stringify(r)).sort();
          if (JSON.stringify(got) !== JSON.stringify(want)) fails.push(`${where}: ${got.length} rows from the index, ${want.length} in a scan`);
        }
      }
    } catch (e) {
      fails.push(`engine error: ${errText(e)}`);
    } finally {
      fs.rmSync(link, { recursive: true, force: true });
    }
    emit({ case: t.path, ok: fails.length === 0, ...(fails.length ? { error: fails.join("; ") } : {}) });
  }
}
