#!/usr/bin/env node
// Interop tool: an official Lance engine (LANCE_ENGINE, see engine.mjs) against
// datasets written by the Go lance package, and vice versa.
//
//   node compat.mjs verify <dir>                      read <dir>/cases.json, check every case
//                                                      (a case's "meta" rows name each id's _rowid and
//                                                      row versions; "ordered": a scan returns them in
//                                                      that order)
//   node compat.mjs mutate <dir>                      apply <dir>/mutate.json steps in order
//                                                      (append | delete | update | optimize |
//                                                      reindex: createIndex(column, btree|fts, replace))
//   node compat.mjs write  <dir>                      create reference tables + <dir>/cases.json
//   node compat.mjs refgraph <root>                  remake a freshly initialised graph's datasets
//                                                      the way the reference OmniGraph creates them
//   node compat.mjs openall <root>                   open every dataset of a graph at every version
//   node compat.mjs graphidx <root>                  the graph's tables list the indices graphidx.json
//                                                      names and answer equality filters from them
//   node compat.mjs bigwrite <dir>                   write table "big" of BIG_ROWS (1.1M) rows
//   node compat.mjs idxwrite <dir>                   create indexed tables istable (stable row ids,
//                                                      every index kind) and iplain (BTREE) +
//                                                      <dir>/indexed.json (see indices.mjs)
//   node compat.mjs idxverify <dir>                  read <dir>/idxcases.json: check listed indices,
//                                                      counts, and scalar/fts/vector queries against
//                                                      a full scan
//   node compat.mjs ftsverify <dir>                  read <dir>/ftscases.json: Go's INVERTED index on
//                                                      gfts against the engine's own on efts (fts.mjs)
//   node compat.mjs ftsmaintain <dir>                the step <dir>/ftsmaintain.json names done to gfts
//                                                      and efts alike, then the same comparison
//   node compat.mjs bench  <dir> --rows N --iters K   append/scan timings, one JSON line
//   node compat.mjs bench-index <dir> --rows N --iters K   K timed BTREE builds on id, one JSON line
//   node compat.mjs bench-build <dir> --table T --kind btree|inverted|ivf_flat --column C --iters K
//                                                      K timed builds on an existing table, one JSON line
//   node compat.mjs bench-serve <dir> --rows N [--tables T]
//                                                      stdin "K" -> K timed appends, one JSON line each
//                                                      (T > 1: each append's rows split over T tables,
//                                                      written concurrently)
//
// stdout: one JSON object per line ({"case":..,"ok":..,"error"?:..}; bench prints one summary).
// stderr: diagnostics. Exit 0 when the command ran (even with failed cases), 1 when it could not
// run, 2 on bad usage.
import fs from "node:fs";
import path from "node:path";
import { arrow, compareIdLists, compareRows, fromCanonical, toCanonical } from "./canonical.mjs";
import { appendRows, connect, ENGINE, ENGINES, ensureFreshDir, openAt, openCase, scan, typesOf, TABLE_STABLE } from "./engine.mjs";
import { bigWrite } from "./big.mjs";
import { ftsMaintain, ftsVerify } from "./fts.mjs";
import { idxVerify, idxWrite } from "./indices.mjs";
import { graphIdx, openAll, refGraph } from "./refgraph.mjs";
import { runWrite } from "./write.mjs";

const lancedb = await import(ENGINES[ENGINE]);

const ID = "id";
const META = ["_row_created_at_version", "_row_last_updated_at_version"];

export function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}
const log = (...a) => console.error("[compat]", ...a);
// errText condenses an engine error: lance repeats the message in a "Caused by" chain and appends
// Rust source locations; keep distinct segments without the locations, capped in length.
export function errText(e) {
  const raw = (e && e.message ? e.message : String(e)).replace(/\s+/g, " ").trim();
  const segs = [];
  for (let seg of raw.split(/ Caused by: /)) {
    seg = seg.replace(/,? \/\S+\.rs:\d+:\d+/g, "").trim();
    if (seg && !segs.some((s) => s.includes(seg))) segs.push(seg);
  }
  const out = segs.join(" <- ");
  return out.length > 800 ? out.slice(0, 800) + "..." : out;
}

function readJSON(file) {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    throw new Error(`cannot read ${file}: ${errText(e)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// verify

async function verifyCase(db, c) {
  const opened = await openCase(db, c, errText);
  if (opened.error) return opened.error;
  const { fails, check, tbl } = opened;
  if (c.branch != null && c.branch !== "main") {
    const b = tbl.currentBranch();
    if (b !== c.branch) fails.push(`branch: expected ${c.branch}, handle is on ${b}`);
  }
  if (c.count != null) {
    await check("countRows", async () => {
      const n = await tbl.countRows();
      return n !== c.count ? `expected ${c.count}, got ${n}` : null;
    });
  }
  let schema;
  try {
    schema = await tbl.schema();
  } catch (e) {
    fails.push(`schema: engine error: ${errText(e)}`);
    return fails.join(" | ");
  }
  const types = typesOf(schema);
  const tableCols = schema.fields.map((f) => f.name);

  if (c.rows) {
    const expCols = [...new Set(c.rows.flatMap((r) => Object.keys(r)))];
    const missing = tableCols.filter((x) => !expCols.includes(x));
    const extra = expCols.filter((x) => !tableCols.includes(x));
    if (c.rows.length > 0 && (missing.length || extra.length)) {
      fails.push(`columns: table has ${JSON.stringify(tableCols)}, expected rows have ${JSON.stringify(expCols)}`);
    }
    await check("full scan", async () => {
      const { rows } = await scan(tbl);
      return compareRows(c.rows, rows, tableCols.filter((x) => expCols.includes(x)), types, ID);
    });
  }

  if (c.columns) {
    await check(`projected scan ${JSON.stringify(c.columns)}`, async () => {
      const { rows, names } = await scan(tbl, { columns: c.columns });
      if (names && JSON.stringify(names) !== JSON.stringify(c.columns)) {
        return `result columns ${JSON.stringify(names)}`;
      }
      if (c.rows) {
        const exp = c.rows.map((r) => Object.fromEntries(c.columns.map((k) => [k, r[k] ?? null])));
        return compareRows(exp, rows, c.columns, types, ID);
      }
      return c.count != null && rows.length !== c.count ? `expected ${c.count} rows, got ${rows.length}` : null;
    });
  }

  if (c.meta) {
    await check("row ids and versions", async () => {
      const t = await tbl.query().withRowId().select([ID, ...META]).toArrow();
      const rows = toCanonical(t);
      const why = compareRows(c.meta, rows, [ID, "_rowid", ...META], types, ID);
      if (why || !c.ordered) return why;
      const exp = c.meta.map((r) => r[ID]), got = rows.map((r) => r[ID]);
      const at = exp.findIndex((x, i) => x !== got[i]);
      return at < 0 ? null : `scan order differs at position ${at}: expected id ${exp[at]}, got ${got[at]}`;
    });
  }

  for (const f of c.filters ?? []) {
    await check(`filter ${JSON.stringify(f.where)}`, async () => {
      const { rows } = await scan(tbl, { where: f.where, columns: [ID] });
      return compareIdLists(f.ids, rows.map((r) => r[ID]), types[ID]);
    });
  }
  return fails.length ? fails.join(" | ") : null;
}

async function cmdVerify(dir) {
  const spec = readJSON(path.join(dir, "cases.json"));
  if (!Array.isArray(spec.cases)) throw new Error(`${dir}/cases.json: no "cases" array`);
  const db = await connect(path.resolve(dir));
  for (const c of spec.cases) {
    let why;
    try {
      why = await verifyCase(db, c);
    } catch (e) {
      why = `unexpected error: ${errText(e)}`;
    }
    emit(why ? { case: c.name, ok: false, error: why } : { case: c.name, ok: true });
    if (why) log(`FAIL ${c.name}: ${why}`);
  }
}

// ---------------------------------------------------------------------------------------------
// mutate

async function runStep(db, s) {
  const tbl = await openAt(db, s.table, s.branch ?? null, null);
  switch (s.op) {
    case "append":
      if (!Array.isArray(s.rows)) throw new Error(`append needs "rows"`);
      return appendRows(tbl, s.rows);
    case "delete": {
      if (!s.where) throw new Error(`delete needs "where"`);
      const r = await tbl.delete(s.where);
      return r?.version ?? (await tbl.version());
    }
    case "update": {
      if (!s.values || typeof s.values !== "object") throw new Error(`update needs "values" (column -> SQL expression)`);
      const opts = { valuesSql: s.values };
      if (s.where != null) opts.where = s.where;
      const r = await tbl.update(opts);
      return r?.version ?? (await tbl.version());
    }
    case "optimize": {
      // compaction (lance compact_files, default options) and the rest of lancedb's optimize
      await tbl.optimize();
      return tbl.version();
    }
    case "reindex": {
      // the engine's own build of the index on s.column, replacing the one of its name
      const config = { btree: () => lancedb.Index.btree(), fts: () => lancedb.Index.fts() }[s.kind];
      if (!config || !s.column) throw new Error(`reindex needs "column" and "kind" (btree|fts)`);
      await tbl.createIndex(s.column, { config: config(), replace: true });
      return tbl.version();
    }
    default:
      throw new Error(`unknown op ${JSON.stringify(s.op)} (want append|delete|update|optimize|reindex)`);
  }
}

async function cmdMutate(dir) {
  const spec = readJSON(path.join(dir, "mutate.json"));
  if (!Array.isArray(spec.steps)) throw new Error(`${dir}/mutate.json: no "steps" array`);
  const db = await connect(path.resolve(dir));
  for (const s of spec.steps) {
    try {
      const version = await runStep(db, s);
      emit({ case: s.name, ok: true, version });
    } catch (e) {
      const error = `${s.op} on ${s.table}@${s.branch ?? "main"}: ${errText(e)}`;
      emit({ case: s.name, ok: false, error });
      log(`FAIL ${s.name}: ${error}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// bench

function p50(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.ceil(s.length / 2) - 1]; // nearest-rank median
}
const ms = (x) => Math.round(x * 1000) / 1000;

// benchSchema is the people table both bench commands append to.
function benchSchema() {
  return new arrow.Schema([
    new arrow.Field("id", new arrow.Utf8(), true),
    new arrow.Field("name", new arrow.Utf8(), true),
    new arrow.Field("age", new arrow.Int64(), true),
    new arrow.Field("score", new arrow.Float64(), true),
  ]);
}

async function cmdBench(dir, N, K) {
  ensureFreshDir(dir);
  const schema = benchSchema();
  const batch = (k) => fromCanonical(Array.from({ length: N }, (_, i) => ({
    id: `p${k}-${i}`, name: `name-${k}-${i}`, age: String(i % 90), score: i * 0.5,
  })), schema);
  const warm = batch(-1);
  const batches = Array.from({ length: K }, (_, k) => batch(k));

  const db = await connect(path.resolve(dir));
  const tbl = await db.createTable("people", warm, { mode: "create", storageOptions: TABLE_STABLE });
  const append = [];
  for (const b of batches) {
    const t0 = performance.now();
    await tbl.add(b);
    append.push(performance.now() - t0);
  }
  const total = await tbl.countRows();
  const scanT = [];
  for (let k = 0; k < K; k++) {
    const t0 = performance.now();
    const t = await tbl.query().select(["score"]).toArrow();
    scanT.push(performance.now() - t0);
    if (t.numRows !== total) throw new Error(`scan ${k} returned ${t.numRows} rows, want ${total}`);
  }
  emit({
    append_ms: append.map(ms), append_p50_ms: ms(p50(append)),
    scan_ms: scanT.map(ms), scan_p50_ms: ms(p50(scanT)),
    rows: N, iters: K, total_rows: total,
    peak_rss_mib: Math.round(process.resourceUsage().maxRSS / 1024),
  });
}

// cmdBenchIndex times K builds of a BTREE index on the id column of a table of N rows (the
// bench rows of cmdBench), each replacing the last: {"btree_ms": [...], "btree_p50_ms"}.
async function cmdBenchIndex(dir, N, K) {
  ensureFreshDir(dir);
  const schema = benchSchema();
  const rows = fromCanonical(Array.from({ length: N }, (_, i) => ({
    id: `p-1-${i}`, name: `name--1-${i}`, age: String(i % 90), score: i * 0.5,
  })), schema);
  const db = await connect(path.resolve(dir));
  const tbl = await db.createTable("people", rows, { mode: "create", storageOptions: TABLE_STABLE });
  const times = [];
  for (let k = 0; k < K; k++) {
    const t0 = performance.now();
    await tbl.createIndex("id", { config: lancedb.Index.btree(), replace: true });
    times.push(performance.now() - t0);
  }
  emit({ btree_ms: times.map(ms), btree_p50_ms: ms(p50(times)), rows: N, iters: K });
}

// cmdBenchBuild times K builds of an index of kind (btree | inverted | ivf_flat: one partition,
// L2, as the Go package builds) on column of an existing table (integration/bench writes it),
// each replacing the last: one JSON line {ms: [...], p50_ms}.
async function cmdBenchBuild(dir, args) {
  const o = {};
  for (let i = 0; i < args.length; i += 2) {
    const m = /^--(table|kind|column|iters)$/.exec(args[i]);
    if (!m || args[i + 1] == null) throw new Error(`bench-build: bad argument ${args[i]}`);
    o[m[1]] = args[i + 1];
  }
  const config = {
    btree: () => lancedb.Index.btree(),
    inverted: () => lancedb.Index.fts(),
    ivf_flat: () => lancedb.Index.ivfFlat({ numPartitions: 1, distanceType: "l2" }),
  }[o.kind];
  const K = Number(o.iters);
  if (!config || !o.table || !o.column || !Number.isInteger(K) || K < 1) throw new Error(`bench-build: want --table, --kind btree|inverted|ivf_flat, --column, --iters`);
  const db = await connect(path.resolve(dir));
  const tbl = await db.openTable(o.table);
  const times = [];
  for (let k = 0; k < K; k++) {
    const t0 = performance.now();
    await tbl.createIndex(o.column, { config: config(), replace: true });
    times.push(performance.now() - t0);
  }
  emit({ kind: o.kind, ms: times.map(ms), p50_ms: ms(p50(times)), iters: K });
}

// cmdBenchServe keeps its tables open and answers each stdin line "K" with K timed appends of N
// fresh rows, as one JSON line {"append_ms": [...]}: the caller interleaves its own timings with
// these at a fine grain, so drift on a shared machine lands on both sides alike; "cpu_ms" is
// the process's CPU time over the K appends (user and system, all threads). With --tables
// T > 1 each append splits its N rows evenly over T tables, written concurrently, as a graph
// batch of nodes and edges lands in one node and one edge table.
async function cmdBenchServe(dir, N, T) {
  ensureFreshDir(dir);
  if (N % T !== 0) throw new Error(`bench-serve: --rows ${N} does not split over --tables ${T}`);
  const schema = benchSchema();
  let seq = 0;
  const batch = (n) => {
    const k = seq++;
    return fromCanonical(Array.from({ length: n }, (_, i) => ({
      id: `p${k}-${i}`, name: `name-${k}-${i}`, age: String(i % 90), score: i * 0.5,
    })), schema);
  };
  const db = await connect(path.resolve(dir));
  const tables = [];
  for (let t = 0; t < T; t++) {
    tables.push(await db.createTable(T === 1 ? "people" : `people_${t}`, batch(N / T), { mode: "create", storageOptions: TABLE_STABLE }));
  }
  emit({ ready: true });
  let buf = "";
  for await (const chunk of process.stdin) {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const k = Number(line);
      if (!Number.isInteger(k) || k < 1) throw new Error(`bench-serve: bad request ${JSON.stringify(line)}`);
      const batches = Array.from({ length: k }, () => tables.map(() => batch(N / T)));
      const out = [];
      const cpu0 = process.cpuUsage();
      for (const parts of batches) {
        const t0 = performance.now();
        await Promise.all(tables.map((tbl, t) => tbl.add(parts[t])));
        out.push(performance.now() - t0);
      }
      const cpu = process.cpuUsage(cpu0); // every thread's, the engine's own included
      emit({ append_ms: out.map(ms), cpu_ms: ms((cpu.user + cpu.system) / 1000), peak_rss_mib: Math.round(process.resourceUsage().maxRSS / 1024) });
    }
  }
}

// ---------------------------------------------------------------------------------------------

const USAGE = `usage:
  node compat.mjs verify <dir>
  node compat.mjs mutate <dir>
  node compat.mjs write  <dir>
  node compat.mjs refgraph <root>
  node compat.mjs openall <root>
  node compat.mjs graphidx <root>
  node compat.mjs bigwrite <dir>
  node compat.mjs idxwrite <dir>
  node compat.mjs idxverify <dir>
  node compat.mjs bench  <dir> --rows N --iters K
  node compat.mjs bench-serve <dir> --rows N [--tables T]
  node compat.mjs bench-index <dir> --rows N --iters K
  node compat.mjs bench-build <dir> --table T --kind btree|inverted|ivf_flat --column C --iters K`;

function parseBenchArgs(args, serve) {
  const o = { rows: null, iters: null, tables: 1 };
  for (let i = 0; i < args.length; i++) {
    const m = (serve ? /^--(rows|tables)(?:=(.*))?$/ : /^--(rows|iters)(?:=(.*))?$/).exec(args[i]);
    if (!m) throw new Error(`unknown bench argument ${args[i]}`);
    o[m[1]] = Number(m[2] ?? args[++i]);
  }
  for (const k of serve ? ["rows", "tables"] : ["rows", "iters"]) {
    if (!Number.isInteger(o[k]) || o[k] < 1) throw new Error(`--${k} must be a positive integer`);
  }
  return o;
}

async function main(argv) {
  const [cmd, dir, ...rest] = argv;
  if (!cmd || !dir || (cmd !== "bench" && cmd !== "bench-serve" && cmd !== "bench-index" && cmd !== "bench-build" && rest.length)) {
    console.error(USAGE);
    return 2;
  }
  let bench;
  if (cmd === "bench" || cmd === "bench-serve" || cmd === "bench-index") {
    try { bench = parseBenchArgs(rest, cmd === "bench-serve"); } catch (e) { console.error(errText(e) + "\n" + USAGE); return 2; }
  }
  try {
    switch (cmd) {
      case "verify": await cmdVerify(dir); break;
      case "mutate": await cmdMutate(dir); break;
      case "write": await runWrite(dir, emit, log); break;
      case "refgraph": await refGraph(dir, emit); break;
      case "openall": await openAll(dir, emit); break;
      case "graphidx": await graphIdx(dir, emit, errText); break;
      case "bigwrite": await bigWrite(dir, emit); break;
      case "idxwrite": await idxWrite(dir, { emit, errText, log }); break;
      case "idxverify": await idxVerify(dir, { emit, errText, log }); break;
      case "ftsverify": await ftsVerify(dir, { emit, errText, log }); break;
      case "ftsmaintain": await ftsMaintain(dir, { emit, errText, log }); break;
      case "bench": await cmdBench(dir, bench.rows, bench.iters); break;
      case "bench-serve": await cmdBenchServe(dir, bench.rows, bench.tables); break;
      case "bench-index": await cmdBenchIndex(dir, bench.rows, bench.iters); break;
      case "bench-build": await cmdBenchBuild(dir, rest); break;
      default: console.error(`unknown command ${cmd}\n${USAGE}`); return 2;
    }
  } catch (e) {
    console.error(`[compat] fatal: ${e && e.stack ? e.stack : e}`);
    return 1;
  }
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
