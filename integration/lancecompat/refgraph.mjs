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
// ["id_idx", …], "kinds": {"id_idx": "btree", "name_idx": "fts", "embedding_idx": "vector"}}]})
// and check each graph table at its newest version: the engine lists those indices and counts
// every row as indexed; for a BTREE, an equality filter on a few values is answered from the
// index (its plan names it) with exactly the rows a full scan holds; for a full-text index, a
// search of a few plain words, and for a vector index a nearest query, likewise (checkFullText,
// checkNearest). One result line per table.
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
        const kind = (t.kinds || {})[name] || "btree";
        const st = await tbl.indexStats(name);
        if (!st || st.numIndexedRows !== rows.length || st.numUnindexedRows !== 0) {
          fails.push(`${name}: indexStats ${JSON.stringify(st)}, want all ${rows.length} rows indexed`);
        }
        if (kind === "fts") {
          await checkFullText(tbl, name, col, rows, fails);
          continue;
        }
        if (kind === "vector") {
          await checkNearest(tbl, name, col, rows, fails);
          continue;
        }
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

// checkFullText: for a few words of the column (plain words the analyzer keeps as they are),
// a full-text search is answered from the index (its plan has a MatchQuery on the column)
// with exactly the rows whose text holds the word.
async function checkFullText(tbl, name, col, rows, fails) {
  const words = [...new Set(rows.flatMap((r) => (r[col] == null ? [] : String(r[col]).toLowerCase().match(/[a-z]+/g) || [])))]
    .filter((w) => /^(alpha|bravo|charlie|delta|echo|foxtrot|alice|bob|carol|erin|frank|gina|docs|https|acme|globex|rocket)$/.test(w))
    .slice(0, 4);
  if (words.length === 0) fails.push(`${name}: no plain word in ${col} to search`);
  for (const w of words) {
    const plan = await tbl.query().fullTextSearch(w, { columns: col }).explainPlan(false);
    if (!new RegExp(`MatchQuery: column=${col}`).test(plan)) fails.push(`${name}: the plan of ${w} names no MatchQuery on ${col}`);
    const got = (await tbl.query().fullTextSearch(w, { columns: col }).select(["id"]).limit(10000).toArray()).map((r) => r.id).sort();
    const want = rows.filter((r) => r[col] != null && String(r[col]).toLowerCase().split(/[^a-z0-9]+/).includes(w)).map((r) => r.id).sort();
    if (JSON.stringify(got) !== JSON.stringify(want)) fails.push(`${name}: "${w}" found ${JSON.stringify(got)}, the text holds it in ${JSON.stringify(want)}`);
  }
}

// checkNearest: a nearest query (L2) is answered from the index (ANNSubIndex names it) with
// exactly the rows and order of a brute-force L2 ranking of the non-null vectors.
async function checkNearest(tbl, name, col, rows, fails) {
  const withVec = rows.filter((r) => r[col] != null);
  if (withVec.length === 0) {
    fails.push(`${name}: no vector in ${col}`);
    return;
  }
  const q = Array.from(withVec[0][col]).map((x, i) => x + (i % 2 ? 0.25 : -0.5));
  const k = Math.min(5, withVec.length);
  const query = () => tbl.query().nearestTo(q).column(col).distanceType("l2").limit(k);
  const plan = await query().explainPlan(true);
  if (!plan.includes(`ANNSubIndex: name=${name},`)) fails.push(`${name}: the nearest plan does not use the index: ${plan.replace(/\s+/g, " ")}`);
  const byDistance = (a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1);
  const got = (await query().select(["id", "_distance"]).toArray()).map((r) => [r.id, Math.fround(r._distance)]).sort(byDistance);
  const dist = (v) => Array.from(v).reduce((s, x, i) => s + Math.fround(Math.fround(x) - Math.fround(q[i])) ** 2, 0);
  const want = withVec.map((r) => [r.id, Math.fround(dist(r[col]))]).sort(byDistance).slice(0, k);
  const ids = (xs) => JSON.stringify(xs.map((x) => x[0]));
  const close = got.length === want.length && got.every((g, i) => Math.abs(g[1] - want[i][1]) <= 1e-4 * Math.max(1, want[i][1]));
  if (ids(got) !== ids(want) || !close) fails.push(`${name}: nearest ${JSON.stringify(got)}, brute force ${JSON.stringify(want)}`);
}
