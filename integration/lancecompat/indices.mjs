// Index interop: `idxwrite` has the official engine build every index kind the Go side reads
// (BTREE, BITMAP, LABEL_LIST, INVERTED, IVF_FLAT, IVF_PQ, IVF_HNSW_SQ) over deterministic rows;
// `idxverify` checks that the engine lists and uses the indices of a table (written by either
// side) and that every indexed query answers exactly what a full scan evaluated in JS answers.
//
// Rows are a pure function of their id (rowOf); the Go side generates the same rows.
import fs from "node:fs";
import path from "node:path";
import { arrow, compareIdLists, toCanonical } from "./canonical.mjs";
import { verifyVectorIndex } from "./ivfflat.mjs";
import { appendRows, connect, createTable, ensureFreshDir, ENGINE, ENGINES, openCase, scan, typesOf, TABLE, TABLE_STABLE } from "./engine.mjs";

const lancedb = await import(ENGINES[ENGINE]);

const W = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];
const TAGS = ["a", "b", "c", "d"];
export const DIM = 16;
export const VECTOR_COLUMNS = ["v1", "v2", "v3"];
const COLUMNS = ["id", "s", "tag", "tags", ...VECTOR_COLUMNS];
// LIMIT is passed to every query whose result must be complete (lancedb's native limit is a u32);
// a result that reaches it is reported as possibly truncated.
const LIMIT = 1_000_000_000;
// REFINE is the refine factor of indexed vector searches: k * REFINE candidates are re-ranked by
// exact distance, which makes PQ/SQ results exact on the small tables of this suite.
const REFINE = 1000;
// GRAPH_SEARCHED are the columns whose index is searched through a graph (IVF_HNSW_SQ): the
// candidates are the nodes the HNSW walk visits, not a partition scan, so even the engine on
// an index it built itself may miss a true neighbour (Lance 8 once returned 4 of the true 5,
// the fifth the sixth-nearest). Their indexed results must still be real rows at their exact
// distances, in order, and hold all but at most one of the true k nearest.
const GRAPH_SEARCHED = new Set(["v3"]);

// indexSchema is the schema of both index tables: id, s, tag, tags, v1, v2, v3, all nullable.
export function indexSchema() {
  const F = (name, type) => new arrow.Field(name, type, true);
  const vec = () => new arrow.FixedSizeList(DIM, F("item", new arrow.Float32()));
  return new arrow.Schema([
    F("id", new arrow.Int64()),
    F("s", new arrow.Utf8()),
    F("tag", new arrow.Utf8()),
    F("tags", new arrow.List(F("item", new arrow.Utf8()))),
    F("v1", vec()),
    F("v2", vec()),
    F("v3", vec()),
  ]);
}

// vectorOf is element j of v<k>: (((i*31 + j*17 + k*7) % 97) / 97) - 0.5, plus i*1e-4 on
// element 0; computed in float64, stored as float32.
function vectorOf(i, k) {
  const out = new Array(DIM);
  for (let j = 0; j < DIM; j++) {
    let x = ((i * 31 + j * 17 + k * 7) % 97) / 97 - 0.5;
    if (j === 0) x += i * 1e-4;
    out[j] = Math.fround(x);
  }
  return out;
}

// rowOf returns row i in canonical form (see canonical.mjs: id is a decimal string).
export function rowOf(i) {
  return {
    id: String(i),
    s: `${W[i % 8]} ${W[(3 * i + 1) % 8]} ${i % 5 === 0 ? "zulu" : "yankee"}`,
    tag: TAGS[i % 4],
    tags: [`t${i % 3}`, `u${i % 7}`],
    v1: vectorOf(i, 1),
    v2: vectorOf(i, 2),
    v3: vectorOf(i, 3),
  };
}

const rowsOf = (lo, hi) => Array.from({ length: hi - lo }, (_, k) => rowOf(lo + k));

// ---------------------------------------------------------------------------------------------
// idxwrite

// The indices of istable, in creation order: column and the engine's Index config (no names:
// the engine's default names are what the Go side must read).
function stableIndexPlan() {
  const I = lancedb.Index;
  const need = (fn) => {
    if (typeof I[fn] !== "function") throw new Error(`${ENGINE}: lancedb.Index.${fn} is not available in this engine version`);
    return I[fn].bind(I);
  };
  return [
    ["id", "BTREE", () => need("btree")()],
    ["tag", "BITMAP", () => need("bitmap")()],
    ["tags", "LABEL_LIST", () => need("labelList")()],
    ["s", "INVERTED", () => need("fts")()],
    ["v1", "IVF_FLAT", () => need("ivfFlat")({ numPartitions: 1, distanceType: "l2" })],
    ["v2", "IVF_PQ", () => need("ivfPq")({ numPartitions: 2, numSubVectors: 4, distanceType: "l2" })],
    ["v3", "IVF_HNSW_SQ", () => need("hnswSq")({ numPartitions: 1, distanceType: "l2" })],
  ];
}

async function indexSummary(tbl) {
  const list = await tbl.listIndices();
  const indices = list
    .map((x) => ({ name: x.name, indexType: x.indexType, columns: [...x.columns] }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { version: await tbl.version(), indices };
}

async function writeStable(db) {
  const tbl = await createTable(db, "istable", indexSchema(), rowsOf(0, 200), TABLE_STABLE);
  await appendRows(tbl, rowsOf(200, 400));
  await appendRows(tbl, rowsOf(400, 600));
  const fails = [];
  for (const [column, kind, config] of stableIndexPlan()) {
    try {
      await tbl.createIndex(column, { config: config() });
    } catch (e) {
      fails.push(`${kind} on ${column}: ${e && e.message ? e.message : e}`);
    }
  }
  return { tbl, fails };
}

async function writePlain(db) {
  const tbl = await createTable(db, "iplain", indexSchema(), rowsOf(0, 200), TABLE);
  await appendRows(tbl, rowsOf(200, 400));
  const fails = [];
  try {
    await tbl.createIndex("id", { config: lancedb.Index.btree() });
  } catch (e) {
    fails.push(`BTREE on id: ${e && e.message ? e.message : e}`);
  }
  return { tbl, fails };
}

// idxWrite creates istable and iplain in the database at dir and records their indices in
// <dir>/indexed.json. One case line per table; a table whose indices could not all be built is
// still recorded with the indices it has.
export async function idxWrite(dir, { emit, errText, log }) {
  ensureFreshDir(dir);
  const db = await connect(path.resolve(dir));
  const tables = {};
  for (const [name, fn] of [["istable", writeStable], ["iplain", writePlain]]) {
    const t0 = performance.now();
    try {
      const { tbl, fails } = await fn(db);
      tables[name] = await indexSummary(tbl);
      const why = fails.map((f) => errText(new Error(f))).join("; ");
      emit(why ? { case: `idxwrite/${name}`, ok: false, error: why } : { case: `idxwrite/${name}`, ok: true });
      if (why) log(`FAIL idxwrite/${name}: ${why}`);
    } catch (e) {
      emit({ case: `idxwrite/${name}`, ok: false, error: errText(e) });
      log(`FAIL idxwrite/${name}: ${e && e.stack}`);
    }
    log(`idxwrite/${name}: ${Math.round(performance.now() - t0)} ms`);
  }
  fs.writeFileSync(path.join(dir, "indexed.json"), JSON.stringify({ tables }, null, 1) + "\n");
}

// ---------------------------------------------------------------------------------------------
// idxverify

const quoted = /'((?:[^']|'')*)'/g;
function stringList(text) {
  // text: the inside of [...]: one or more comma separated '...' literals, nothing else
  if (!/^\s*'(?:[^']|'')*'(?:\s*,\s*'(?:[^']|'')*')*\s*$/.test(text)) return null;
  return [...text.matchAll(quoted)].map((m) => m[1].replace(/''/g, "'"));
}

// scalarPredicate parses one of the supported where clauses into a JS predicate over canonical
// rows (NULL never matches); null when the clause has another shape.
export function scalarPredicate(clause) {
  const c = clause.trim();
  let m;
  if ((m = /^id\s*(=|<|>=)\s*(-?\d+)$/.exec(c))) {
    const n = BigInt(m[2]);
    const op = m[1];
    return (r) => {
      if (r.id == null) return false;
      const v = BigInt(r.id);
      return op === "=" ? v === n : op === "<" ? v < n : v >= n;
    };
  }
  if ((m = /^tag\s*=\s*'((?:[^']|'')*)'$/.exec(c))) {
    const x = m[1].replace(/''/g, "'");
    return (r) => r.tag != null && r.tag === x;
  }
  if ((m = /^array_has_(any|all)\s*\(\s*tags\s*,\s*\[(.*)\]\s*\)$/.exec(c))) {
    const xs = stringList(m[2]);
    if (!xs) return null;
    const all = m[1] === "all";
    return (r) => {
      if (r.tags == null) return false;
      const has = (x) => r.tags.some((t) => t != null && t === x);
      return all ? xs.every(has) : xs.some(has);
    };
  }
  return null;
}

// l2sq is the squared L2 distance (what lance's "l2" reports), in float64 over the stored values.
function l2sq(a, b) {
  let s = 0;
  for (let j = 0; j < a.length; j++) {
    const d = a[j] - b[j];
    s += d * d;
  }
  return s;
}

const idsOf = (t) => toCanonical(t).map((r) => r.id);
const short = (xs) => JSON.stringify(xs.length > 20 ? [...xs.slice(0, 20), "..."] : xs);

// DIST_TOL is the relative tolerance between two squared L2 distances that the engine, computing
// in float32, may order either way (measured error of its _distance: about 5e-7 relative).
const DIST_TOL = 4e-6;
const distClose = (a, b) => Math.abs(a - b) <= DIST_TOL * Math.max(Math.abs(a), Math.abs(b)) + 1e-12;

// checkNearest compares an engine result (rows with id and _distance, in order) with the exact
// nearest truth rows (truthSorted: {id, d} by d, then id). Strict first: same ids in the same
// order. Exact ties are common here (rows q-97 and q+97 are equidistant from row q in real
// arithmetic, and so are many other pairs), so a result that differs only by the order or choice
// of rows whose distances are equal within float32 rounding is accepted (onTie is called).
// Every reported _distance must also be the squared L2 distance of its row.
function checkNearest(rows, truthSorted, distOf, k, onTie, onGraphMiss = null) {
  const got = rows.map((r) => r.id);
  const want = truthSorted.slice(0, k).map((x) => x.id);
  const bad = rows.find((r) => !distOf.has(r.id) || typeof r._distance !== "number" ||
    Math.abs(r._distance - distOf.get(r.id)) > 1e-5 * distOf.get(r.id) + 1e-6);
  if (bad) {
    return `row ${bad.id}: engine _distance ${bad._distance}, exact squared L2 ${distOf.has(bad.id) ? distOf.get(bad.id) : "(no such row)"}`;
  }
  if (got.length === want.length && got.every((x, i) => x === want[i])) return null;
  if (got.length === want.length && new Set(got).size === got.length &&
      got.every((x, i) => distClose(distOf.get(x), truthSorted[i].d))) {
    onTie();
    return null;
  }
  if (onGraphMiss && got.length === want.length && new Set(got).size === got.length &&
      got.every((x, i) => i === 0 || distOf.get(got[i - 1]) <= distOf.get(x)) &&
      want.filter((x) => got.includes(x)).length >= k - 1) {
    onGraphMiss();
    return null;
  }
  const at = got.findIndex((x, i) => x !== want[i]);
  const p = at < 0 ? Math.min(got.length, want.length) : at;
  const dist = (x) => (x === undefined ? "none" : `id ${x} l2sq ${distOf.has(x) ? distOf.get(x).toPrecision(8) : "?"}`);
  return `expected ${want.length} ids ${short(want)}, got ${got.length} ${short(got)} (first difference at position ${p}: expected ${dist(want[p])}, got ${dist(got[p])})`;
}

async function verifyIdxCase(db, c, errText, log) {
  const opened = await openCase(db, c, errText);
  if (opened.error) return opened.error;
  const { fails, check, tbl } = opened;

  // 1. index names
  let listed = [];
  await check("listIndices", async () => {
    listed = (await tbl.listIndices()).map((x) => x.name);
    if (!Array.isArray(c.indices)) return null;
    const e = [...c.indices].sort(), a = [...listed].sort();
    return JSON.stringify(e) === JSON.stringify(a) ? null : `expected ${JSON.stringify(e)}, got ${JSON.stringify(a)}`;
  });

  // 2. live rows
  if (c.count != null) {
    await check("countRows", async () => {
      const n = await tbl.countRows();
      return n !== c.count ? `expected ${c.count}, got ${n}` : null;
    });
  }

  // 3. truth: a plain scan (no filter, so no index is involved)
  let truth, types;
  try {
    types = typesOf(await tbl.schema());
    truth = (await scan(tbl, { columns: COLUMNS })).rows;
  } catch (e) {
    fails.push(`full scan: engine error: ${errText(e)}`);
    return fails.join("; ");
  }
  if (c.count != null && truth.length !== c.count) fails.push(`full scan: expected ${c.count} rows, got ${truth.length}`);
  const complete = (n, what) => (n >= LIMIT ? `${what}: ${n} rows reached the limit ${LIMIT}` : null);

  // 4. scalar filters
  for (const clause of c.scalar ?? []) {
    const pred = scalarPredicate(clause);
    if (!pred) {
      fails.push(`scalar ${JSON.stringify(clause)}: unsupported clause shape`);
      continue;
    }
    await check(`scalar ${JSON.stringify(clause)}`, async () => {
      const got = idsOf(await tbl.query().where(clause).select(["id"]).limit(LIMIT).toArrow());
      return complete(got.length, "result") ?? compareIdLists(truth.filter(pred).map((r) => r.id), got, types.id);
    });
  }

  // 4b. filters the engine must answer from a named index (its plan names it)
  for (const u of c.uses_index ?? []) {
    await check(`plan of ${JSON.stringify(u.where)}`, async () => {
      const plan = await tbl.query().where(u.where).select(["id"]).explainPlan(false);
      return plan.includes(`@${u.index}(`) ? null : `the plan does not use ${u.index}: ${plan.replace(/\s+/g, " ")}`;
    });
  }

  // 5. full text
  for (const term of c.fts ?? []) {
    await check(`fts ${JSON.stringify(term)}`, async () => {
      const want = truth.filter((r) => r.s != null && r.s.toLowerCase().split(" ").includes(String(term).toLowerCase())).map((r) => r.id);
      const got = idsOf(await tbl.query().fullTextSearch(term, { columns: "s" }).select(["id", "_score"]).limit(LIMIT).toArrow());
      return complete(got.length, "result") ?? compareIdLists(want, got, types.id);
    });
  }

  // 6. nearest neighbours, through the index and brute force
  let ties = 0, misses = 0;
  const onTie = () => { ties++; };
  const onGraphMiss = () => { misses++; };
  for (const nq of c.nearest ?? []) {
    const label = `nearest ${nq.column} to row ${nq.query_id} k=${nq.k}`;
    if (!VECTOR_COLUMNS.includes(nq.column) || !Number.isInteger(nq.query_id) || nq.query_id < 0 || !Number.isInteger(nq.k) || nq.k < 1) {
      fails.push(`${label}: bad nearest spec ${JSON.stringify(nq)}`);
      continue;
    }
    const qv = rowOf(nq.query_id)[nq.column];
    const scored = truth.filter((r) => r[nq.column] != null).map((r) => ({ id: r.id, d: l2sq(qv, r[nq.column]) }));
    const cmpId = (a, b) => { const x = BigInt(a), y = BigInt(b); return x < y ? -1 : x > y ? 1 : 0; };
    scored.sort((a, b) => a.d - b.d || cmpId(a.id, b.id));
    const distOf = new Map(scored.map((x) => [x.id, x.d]));
    // HNSW searches for k * refineFactor candidates, and lance wants ef >= that.
    const search = (bypass) => {
      let q = tbl.query().nearestTo(qv).column(nq.column).distanceType("l2").limit(nq.k);
      q = bypass ? q.bypassVectorIndex() : q.nprobes(2).refineFactor(REFINE).ef(Math.max(1000, nq.k * REFINE));
      return q.select(["id", "_distance"]).toArrow();
    };
    await check(`${label} (index)`, async () => checkNearest(toCanonical(await search(false)), scored, distOf, nq.k, onTie,
      GRAPH_SEARCHED.has(nq.column) ? onGraphMiss : null));
    await check(`${label} (bypassVectorIndex)`, async () => checkNearest(toCanonical(await search(true)), scored, distOf, nq.k, onTie));
  }

  // 6b. nearest queries through a named vector index, and its statistics (ivfflat.mjs)
  await verifyVectorIndex(tbl, c, truth, { check, checkNearest, l2sq, rowOf, scalarPredicate, toCanonical, onTie });

  if (ties > 0) log(`${c.name}: ${ties} nearest result(s) accepted with equidistant rows in another order`);
  if (misses > 0) log(`${c.name}: ${misses} graph-searched nearest result(s) accepted missing one true neighbour`);

  // 7. index statistics load for every listed index
  if (typeof tbl.indexStats === "function") {
    for (const name of listed) {
      await check(`indexStats ${name}`, async () => {
        await tbl.indexStats(name);
        return null;
      });
    }
  }
  return fails.length ? fails.join("; ") : null;
}

// idxVerify checks every case of <dir>/idxcases.json; one line per case.
export async function idxVerify(dir, { emit, errText, log }) {
  const file = path.join(dir, "idxcases.json");
  let spec;
  try {
    spec = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    throw new Error(`cannot read ${file}: ${errText(e)}`);
  }
  if (!Array.isArray(spec.cases)) throw new Error(`${file}: no "cases" array`);
  const db = await connect(path.resolve(dir));
  for (const c of spec.cases) {
    let why;
    try {
      why = await verifyIdxCase(db, c, errText, log);
    } catch (e) {
      why = `unexpected error: ${errText(e)}`;
    }
    emit(why ? { case: c.name, ok: false, error: why } : { case: c.name, ok: true });
    if (why) log(`FAIL ${c.name}: ${why}`);
  }
}
