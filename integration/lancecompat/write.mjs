// `write`: the official engine creates reference tables (Lance file format 2.0) and records, per
// table and version, the content it was asked to write in <dir>/cases.json (verify format).
// Expected content comes from an in-memory model of the operations, never from reading back.
import fs from "node:fs";
import path from "node:path";
import { arrow } from "./canonical.mjs";
import { appendRows, connect, createTable, ensureFreshDir, TABLE, TABLE_STABLE } from "./engine.mjs";

const F = (name, type, nullable = true) => new arrow.Field(name, type, nullable);
const list = (t) => new arrow.List(F("item", t));
const b64 = (bytes) => Buffer.from(bytes).toString("base64");
const clone = (x) => JSON.parse(JSON.stringify(x));
const range = (a, b) => Array.from({ length: b - a }, (_, k) => a + k);
const big = (v) => (v === null ? null : BigInt(v));

// Recorder collects cases; filter predicates are JS mirrors of the SQL (NULL never matches).
class Recorder {
  constructor() { this.cases = []; }
  add(name, table, branch, version, rows, { filters = [], columns, meta } = {}) {
    const c = { name, table, version, branch, count: rows.length, rows: clone(rows) };
    if (columns) c.columns = columns;
    if (meta) Object.assign(c, { meta: clone(meta), ordered: true });
    c.filters = filters.map(({ where, pred }) => ({ where, ids: rows.filter(pred).map((r) => r.id) }));
    this.cases.push(c);
  }
}

function expectVersion(got, want, what) {
  if (got !== want) throw new Error(`${what}: engine reported version ${got}, expected ${want}`);
  return got;
}

// ---------------------------------------------------------------------------------------------
// alltypes

const allTypesSchema = new arrow.Schema([
  F("id", new arrow.Int64(), false),
  F("s", new arrow.Utf8()),
  F("s_nn", new arrow.Utf8(), false),
  F("ls", new arrow.LargeUtf8()),
  F("b", new arrow.Binary()),
  F("lb", new arrow.LargeBinary()),
  F("flag", new arrow.Bool()),
  F("i8", new arrow.Int8()),
  F("i16", new arrow.Int16()),
  F("u8", new arrow.Uint8()),
  F("u16", new arrow.Uint16()),
  F("i32", new arrow.Int32()),
  F("i32_nn", new arrow.Int32(), false),
  F("i64", new arrow.Int64()),
  F("u32", new arrow.Uint32()),
  F("u64", new arrow.Uint64()),
  F("f32", new arrow.Float32()),
  F("f64", new arrow.Float64()),
  F("f64_nn", new arrow.Float64(), false),
  F("d32", new arrow.DateDay()),
  F("d64", new arrow.DateMillisecond()),
  F("ts", new arrow.Timestamp(arrow.TimeUnit.MICROSECOND)),
  F("ts_tz", new arrow.Timestamp(arrow.TimeUnit.MICROSECOND, "UTC")),
  F("vec", new arrow.FixedSizeList(4, F("item", new arrow.Float32()))),
  F("ls_utf8", list(new arrow.Utf8())),
  F("ls_i64", list(new arrow.Int64())),
  F("ls_f64", list(new arrow.Float64())),
  F("ls_bool", list(new arrow.Bool())),
  F("ls_d32", list(new arrow.DateDay())),
]);

// allTypesRow: every nullable column has nulls within any 10 consecutive ids; empty strings,
// empty lists, null lists, null list items and type extremes are spread over the ids.
function allTypesRow(i) {
  const m = (k, r) => i % k === r;
  const I = BigInt(i);
  return {
    id: String(i),
    s: m(5, 1) ? null : m(5, 2) ? "" : i === 3 ? "héllo ✓ 日本 🎉" : `s${i}`,
    s_nn: m(4, 0) ? "" : `nn${i}`,
    ls: m(4, 1) ? null : m(4, 2) ? "" : `large-${i}-${"x".repeat(i)}`,
    b: m(6, 1) ? null : m(6, 2) ? "" : b64([i, 255 - i, 0, 7]),
    lb: m(5, 3) ? null : m(5, 4) ? "" : b64(range(0, (i % 9) + 1).map((k) => (i * 31 + k) & 255)),
    flag: m(7, 0) ? null : i % 2 === 0,
    i8: m(6, 4) ? null : i === 1 ? -128 : i === 2 ? 127 : i - 10,
    i16: m(6, 5) ? null : i === 1 ? -32768 : i * 1000 - 7000,
    u8: m(7, 3) ? null : i === 1 ? 255 : i,
    u16: m(7, 4) ? null : i === 2 ? 65535 : i * 300,
    i32: m(5, 0) ? null : i === 1 ? 2147483647 : i === 2 ? -2147483648 : i * 37 - 300,
    i32_nn: i * 3 - 10,
    i64: m(6, 0) ? null : i === 1 ? "9223372036854775807" : i === 2 ? "-9223372036854775808" : String(I * 1000000000007n - 5000000000000n),
    u32: m(4, 0) ? null : i === 1 ? 4294967295 : i * 1000,
    u64: m(5, 1) ? null : i === 2 ? "18446744073709551615" : String(2n ** 53n + I), // > 2^53: not a float64
    f32: m(6, 5) ? null : i * 0.25 - 2,
    f64: m(7, 6) ? null : i === 3 ? 1e300 : i === 4 ? -0.1 : i * 1.1,
    f64_nn: i / 4,
    d32: m(5, 4) ? null : i === 1 ? -365 : 19000 + i,
    d64: m(6, 3) ? null : i === 1 ? -86400000 : (19000 + i) * 86400000,
    ts: m(5, 2) ? null : i === 1 ? "-123456789" : String(1700000000123456n + I * 1000001n),
    ts_tz: m(4, 3) ? null : String(1600000000000000n + I * 7n),
    vec: m(10, 9) ? null : [i, i + 0.5, 100 - i, 0.25],
    ls_utf8: m(6, 0) ? null : m(6, 1) ? [] : m(6, 2) ? ["a", null, ""] : range(0, (i % 3) + 1).map((k) => `x${i}-${k}`),
    ls_i64: m(5, 0) ? null : m(5, 1) ? [] : m(5, 2) ? ["1", null, "-9223372036854775808"] : [String(i), String(-I * 1000000000000n)],
    ls_f64: m(4, 3) ? null : m(4, 0) ? [] : [i * 0.5, null, -1e-300],
    ls_bool: m(7, 1) ? null : m(7, 2) ? [] : [true, false, null].slice(0, (i % 3) + 1),
    ls_d32: m(6, 4) ? null : m(6, 5) ? [] : [19000 + i, null, -1],
  };
}

const allTypesFilters = [
  { where: "i32 > 0", pred: (r) => r.i32 !== null && r.i32 > 0 },
  { where: "s IS NULL", pred: (r) => r.s === null },
  { where: "flag = true AND u64 > 9007199254740995", pred: (r) => r.flag === true && r.u64 !== null && big(r.u64) > 9007199254740995n },
  { where: "i64 < 0", pred: (r) => r.i64 !== null && big(r.i64) < 0n },
];
const allTypesColumns = ["id", "ls", "vec", "ls_i64", "ts"];

async function writeAllTypes(db, rec) {
  const name = "alltypes";
  const opt = { filters: allTypesFilters, columns: allTypesColumns };
  let rows = range(0, 20).map(allTypesRow);
  const tbl = await createTable(db, name, allTypesSchema, rows, TABLE_STABLE);
  rec.add(`${name}-v1`, name, null, expectVersion(await tbl.version(), 1, "create"), rows, opt);

  const more = range(20, 27).map(allTypesRow);
  const v2 = expectVersion(await appendRows(tbl, more), 2, "append");
  rows = rows.concat(more);
  rec.add(`${name}-v2`, name, null, v2, rows, opt);

  // delete 3 rows by a filter on a non-id column (ids 5, 11, 21: both fragments)
  const del = { where: "i32_nn IN (5, 23, 53)", pred: (r) => [5, 23, 53].includes(r.i32_nn) };
  const v3 = expectVersion((await tbl.delete(del.where)).version, 3, "delete");
  rows = rows.filter((r) => !del.pred(r));
  if (rows.length !== 24) throw new Error(`model: delete removed ${27 - rows.length} rows, expected 3`);
  rec.add(`${name}-v3`, name, null, v3, rows, opt);

  // update one row: literal, expression, and NULL
  const res = await tbl.update({ where: "id = 4", valuesSql: { s: "'updated ✓'", i32: "i32_nn * 2", f64: "NULL" } });
  const v4 = expectVersion(res.version, 4, "update");
  if (res.rowsUpdated !== 1) throw new Error(`update touched ${res.rowsUpdated} rows, expected 1`);
  rows = rows.map((r) => (r.id === "4" ? { ...r, s: "updated ✓", i32: r.i32_nn * 2, f64: null } : r));
  rec.add(`${name}-v4`, name, null, v4, rows, opt);
}

// ---------------------------------------------------------------------------------------------
// plain (no stable row ids), dict, branched

const plainSchema = new arrow.Schema([
  F("id", new arrow.Int64(), false),
  F("name", new arrow.Utf8()),
  F("age", new arrow.Int64()),
  F("score", new arrow.Float64()),
]);
const plainRow = (i) => ({
  id: String(i),
  name: i % 97 === 5 ? null : `name-${i}-${(i * 7919) % 10007}`,
  age: String(i % 100),
  score: i % 50 === 3 ? null : i * 0.5,
});
const plainFilters = [
  { where: "age = 7", pred: (r) => r.age === "7" },
  { where: "score >= 250 AND score < 254.5", pred: (r) => r.score !== null && r.score >= 250 && r.score < 254.5 },
  { where: "name IS NULL", pred: (r) => r.name === null },
];

async function writePlain(db, rec) {
  const name = "plain";
  const opt = { filters: plainFilters, columns: ["id", "score"] };
  let rows = range(0, 1000).map(plainRow);
  const tbl = await createTable(db, name, plainSchema, rows, TABLE);
  rec.add(`${name}-v1`, name, null, expectVersion(await tbl.version(), 1, "create"), rows, opt);
  const more = range(1000, 4000).map(plainRow);
  const v2 = expectVersion(await appendRows(tbl, more), 2, "append");
  rows = rows.concat(more);
  rec.add(`${name}-v2`, name, null, v2, rows, opt);
  const v3 = expectVersion((await tbl.delete("age > 80")).version, 3, "delete");
  rows = rows.filter((r) => !(big(r.age) > 80n));
  rec.add(`${name}-v3`, name, null, v3, rows, opt);
}

const dictSchema = new arrow.Schema([
  F("id", new arrow.Int64(), false),
  F("color", new arrow.Utf8()),
  F("n", new arrow.Int32()),
]);

async function writeDict(db, rec) {
  // 300 rows, 3 distinct strings: lance 8 dictionary-encodes this Utf8 page in format 2.0.
  const colors = ["red", "green", "blue"];
  const rows = range(0, 300).map((i) => ({ id: String(i), color: colors[i % 3], n: i }));
  const tbl = await createTable(db, "dict", dictSchema, rows, TABLE);
  rec.add("dict-v1", "dict", null, expectVersion(await tbl.version(), 1, "create"), rows, {
    filters: [{ where: "color = 'red'", pred: (r) => r.color === "red" }],
    columns: ["id", "color"],
  });
}

const branchedSchema = new arrow.Schema([
  F("id", new arrow.Int64(), false),
  F("name", new arrow.Utf8()),
  F("val", new arrow.Float64()),
]);
const branchedRow = (i) => ({ id: String(i), name: `b${i}`, val: i * 2.5 });

async function writeBranched(db, rec) {
  const name = "branched";
  const filters = [{ where: "val > 5", pred: (r) => r.val > 5 }];
  const main = range(0, 5).map(branchedRow);
  const tbl = await createTable(db, name, branchedSchema, main, TABLE_STABLE);
  const v1 = expectVersion(await tbl.version(), 1, "create");
  rec.add(`${name}-main-v1`, name, null, v1, main, { filters });

  const feat = await (await tbl.branches()).create("feat"); // forks main@latest, handle on "feat"
  if (feat.currentBranch() !== "feat") throw new Error(`branch handle is on ${feat.currentBranch()}, expected feat`);
  const fork = await feat.version();
  rec.add(`${name}-feat-v${fork}`, name, "feat", fork, main, { filters });
  const extra = [branchedRow(100), { id: "101", name: null, val: null }];
  const fv = await appendRows(feat, extra);
  if (fv !== fork + 1) throw new Error(`append on feat: engine reported version ${fv}, expected ${fork + 1}`);
  const featRows = main.concat(extra);
  rec.add(`${name}-feat-v${fv}`, name, "feat", fv, featRows, { filters });
  rec.add(`${name}-feat-latest`, name, "feat", null, featRows, { filters });
  rec.add(`${name}-main-latest`, name, null, null, main, { filters }); // main untouched by the branch
}

// ---------------------------------------------------------------------------------------------
// ocompact: a stable-row-id table grown by many small appends, with deletes and updates, for
// the Go side to compact. The model tracks each row's stable row id and versions as lance
// assigns them (next_row_id in write order; an update keeps the id and created-at version,
// sets last-updated-at, and moves the row to a new fragment at the end).

const ocompactSchema = branchedSchema;

async function writeOCompact(db, rec) {
  const name = "ocompact";
  let nextRowId = 0;
  let live = []; // {row, meta} in scan order
  const add = (ids, v) => {
    const out = ids.map((i) => ({
      row: { id: String(i), name: i % 11 === 0 ? null : `oc${i}`, val: i * 0.5 },
      meta: { id: String(i), _rowid: String(nextRowId++), _row_created_at_version: String(v), _row_last_updated_at_version: String(v) },
    }));
    live = live.concat(out);
    return out.map((x) => x.row);
  };
  const snap = (v) => rec.add(`${name}-v${v}`, name, null, v, live.map((x) => x.row), { meta: live.map((x) => x.meta) });
  const tbl = await createTable(db, name, ocompactSchema, add(range(0, 40), 1), TABLE_STABLE);
  let v = expectVersion(await tbl.version(), 1, "create");
  let next = 40;
  for (let k = 0; k < 24; k++) {
    const n = 1 + (k % 3);
    v = expectVersion(await appendRows(tbl, add(range(next, next + n), v + 1)), v + 1, "append");
    next += n;
    if (k % 6 === 5) {
      // every third row of the first fragment, and one small fragment's rows
      const where = `(id < 40 AND id % 3 = ${k % 3}) OR id = ${next - 2}`;
      const pred = (r) => { const i = Number(r.id); return (i < 40 && i % 3 === k % 3) || i === next - 2; };
      v = expectVersion((await tbl.delete(where)).version, v + 1, "delete");
      live = live.filter((x) => !pred(x.row));
    }
    if (k % 8 === 7) {
      const target = live[Math.floor(live.length / 2)];
      const res = await tbl.update({ where: `id = ${target.row.id}`, valuesSql: { val: "val + 1000" } });
      v = expectVersion(res.version, v + 1, "update");
      live = live.filter((x) => x !== target).concat([{
        row: { ...target.row, val: target.row.val + 1000 },
        meta: { ...target.meta, _row_last_updated_at_version: String(v) },
      }]);
    }
  }
  snap(v);
}

// ---------------------------------------------------------------------------------------------

export async function runWrite(dir, emit, log) {
  ensureFreshDir(dir);
  const db = await connect(dir);
  const rec = new Recorder();
  const tables = { alltypes: writeAllTypes, plain: writePlain, dict: writeDict, branched: writeBranched, ocompact: writeOCompact };
  for (const [name, fn] of Object.entries(tables)) {
    try {
      await fn(db, rec);
      emit({ case: `write-${name}`, ok: true });
    } catch (e) {
      const error = (e && e.message ? e.message : String(e)).replace(/\s+/g, " ");
      emit({ case: `write-${name}`, ok: false, error });
      log(`FAIL write-${name}: ${e && e.stack}`);
    }
  }
  fs.writeFileSync(path.join(dir, "cases.json"), JSON.stringify({ cases: rec.cases }, null, 1) + "\n");
  log(`wrote ${rec.cases.length} cases to ${path.join(dir, "cases.json")}`);
}
