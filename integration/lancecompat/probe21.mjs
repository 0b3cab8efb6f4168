// probe21: which page layouts and compressions the official engines write for Lance data files
// of format 2.1 and 2.2, for the Arrow types the graph's schema language maps to.
//
//   node probe21.mjs OUTDIR      (OUTDIR must be empty or absent; it keeps the tables)
//
// For every engine x version it writes tables of those types (nullable and not, empty strings,
// all-null and constant columns, low- and high-cardinality strings, values over 64 KiB, a
// 300k-row multi-page table), then prints, per column of each data file, the page count and
// the distinct PageLayout descriptions, and the DataFile fields/column_indices of the manifest.
import fs from "node:fs";
import path from "node:path";
import { ensureFreshDir } from "./engine.mjs";
import { arrow, fromCanonical, toIPCFile } from "./canonical.mjs";
import { readFile, fields } from "./pb21.mjs";

export const ENGINES = {
  lance8: "@lancedb/lancedb",
  lance10: "lancedb10",
  lance12: "lancedb12",
};
export const VERSIONS = ["2.1", "2.2"];

const A = arrow;
const F = (name, type, nullable = true) => new A.Field(name, type, nullable);
const listOf = (t) => new A.List(new A.Field("item", t, true));
const fsl = (n) => new A.FixedSizeList(n, new A.Field("item", new A.Float32(), true));

// A deterministic generator, so runs and fixtures are repeatable.
export function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const f32 = (x) => Math.fround(x);

// mainTable: every type, n rows; i decides nulls so that each nullable column has some.
export function mainTable(n, seed = 1) {
  const r = rng(seed);
  const ri = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
  const words = ["alpha", "beta", "gamma", "delta", ""];
  const schema = new A.Schema([
    F("utf8", new A.Utf8()),
    F("utf8_nn", new A.Utf8(), false),
    F("large_utf8", new A.LargeUtf8()),
    F("utf8_lowcard", new A.Utf8()),
    F("utf8_highcard", new A.Utf8(), false),
    F("utf8_allnull", new A.Utf8()),
    F("utf8_const", new A.Utf8(), false),
    F("utf8_empty", new A.Utf8(), false),
    F("bool", new A.Bool()),
    F("bool_nn", new A.Bool(), false),
    F("i8", new A.Int8()),
    F("i16", new A.Int16()),
    F("i32", new A.Int32()),
    F("i64", new A.Int64()),
    F("u8", new A.Uint8(), false),
    F("u16", new A.Uint16()),
    F("u32", new A.Uint32()),
    F("u64", new A.Uint64()),
    F("i64_nn_small", new A.Int64(), false),
    F("i64_seq", new A.Int64(), false),
    F("i32_const", new A.Int32(), false),
    F("i64_allnull", new A.Int64()),
    F("f32", new A.Float32()),
    F("f64", new A.Float64(), false),
    F("date32", new A.DateDay()),
    F("date64", new A.DateMillisecond()),
    F("ts_us", new A.TimestampMicrosecond()),
    F("ts_us_utc", new A.TimestampMicrosecond("UTC"), false),
    F("list_utf8", listOf(new A.Utf8())),
    F("list_i64", listOf(new A.Int64())),
    F("list_i64_nn", listOf(new A.Int64()), false),
    F("vec4", fsl(4)),
    F("vec128", fsl(128), false),
  ]);
  const rows = [];
  for (let i = 0; i < n; i++) {
    const nul = (k) => (i * 7 + k) % 11 === 0;
    const big = (lo, hi) => BigInt(ri(lo, hi));
    rows.push({
      utf8: nul(1) ? null : i % 13 === 0 ? "" : `s${i}-${"x".repeat(i % 9)}`,
      utf8_nn: `row ${i} ${words[i % 5]}`,
      large_utf8: nul(2) ? null : `large-${(i * 2654435761) % 100000}`,
      utf8_lowcard: nul(3) ? null : words[ri(0, 3)],
      utf8_highcard: `${Math.floor(r() * 1e12).toString(36)}-${i}`,
      utf8_allnull: null,
      utf8_const: "same value",
      utf8_empty: "",
      bool: nul(4) ? null : r() < 0.5,
      bool_nn: i % 3 === 0,
      i8: nul(5) ? null : ri(-128, 127),
      i16: nul(6) ? null : ri(-32768, 32767),
      i32: nul(7) ? null : ri(-2147483648, 2147483647),
      i64: nul(8) ? null : (BigInt(ri(-(2 ** 31), 2 ** 31)) * 4294967296n + big(0, 2 ** 32 - 1)).toString(),
      u8: ri(0, 255),
      u16: nul(9) ? null : ri(0, 65535),
      u32: nul(10) ? null : ri(0, 4294967295),
      u64: nul(0) ? null : (big(0, 2 ** 32 - 1) * 4294967296n + big(0, 2 ** 32 - 1)).toString(),
      i64_nn_small: String(ri(0, 1000)),
      i64_seq: String(1000000 + i),
      i32_const: 42,
      i64_allnull: null,
      f32: nul(1) ? null : f32(r() * 2000 - 1000),
      f64: r() * 1e6 - 5e5,
      date32: nul(2) ? null : ri(-20000, 30000),
      date64: nul(3) ? null : ri(-20000, 30000) * 86400000,
      ts_us: nul(4) ? null : String(1700000000000000 + i * 1000003),
      ts_us_utc: String(1600000000000000 + ri(0, 1e9)),
      list_utf8: nul(5) ? null : i % 6 === 0 ? [] : Array.from({ length: ri(1, 4) }, (_, k) => (k === 1 && i % 4 === 0 ? null : `${words[(i + k) % 5]}${k}`)),
      list_i64: nul(6) ? null : i % 5 === 0 ? [] : Array.from({ length: ri(1, 5) }, (_, k) => (k === 2 && i % 3 === 0 ? null : String(i * 10 + k))),
      list_i64_nn: Array.from({ length: i % 4 }, (_, k) => String(ri(-5, 5) + k)),
      vec4: nul(7) ? null : [0, 1, 2, 3].map((k) => f32(i + k / 4)),
      vec128: Array.from({ length: 128 }, () => f32(r() * 2 - 1)),
    });
  }
  return { schema, rows };
}

// bigTable: many rows, so that columns span pages.
export function bigTable(n, seed = 2) {
  const r = rng(seed);
  const schema = new A.Schema([
    F("id", new A.Int64(), false),
    F("i32", new A.Int32()),
    F("name", new A.Utf8()),
    F("f64", new A.Float64(), false),
    F("tag", new A.Utf8(), false),
    F("vec4", fsl(4), false),
    F("list_i64", listOf(new A.Int64())),
  ]);
  const rows = [];
  for (let i = 0; i < n; i++) {
    rows.push({
      id: String(i),
      i32: i % 17 === 0 ? null : Math.floor(r() * 1e6),
      name: i % 19 === 0 ? null : `name-${Math.floor(r() * 1e9)}`,
      f64: r(),
      tag: ["red", "green", "blue"][i % 3],
      vec4: [r(), r(), r(), r()].map(f32),
      list_i64: i % 23 === 0 ? null : Array.from({ length: i % 3 }, (_, k) => String(i + k)),
    });
  }
  return { schema, rows };
}

// hugeTable: values over 64 KiB (strings and lists of strings).
export function hugeTable(n, size, seed = 3) {
  const r = rng(seed);
  const schema = new A.Schema([F("id", new A.Int32(), false), F("blob", new A.Utf8()), F("big_list", listOf(new A.Utf8()))]);
  const rows = [];
  for (let i = 0; i < n; i++) {
    const s = (len) => {
      const chars = [];
      for (let k = 0; k < len; k++) chars.push(String.fromCharCode(97 + Math.floor(r() * 26)));
      return chars.join("");
    };
    rows.push({ id: i, blob: i % 3 === 1 ? null : s(size + i * 1000), big_list: i % 4 === 3 ? null : [s(size / 2), "", s(100)] });
  }
  return { schema, rows };
}

// writeTable creates a table and returns the path of its single data file and its DataFile
// entries from the manifest.
export async function writeTable(lancedb, dir, name, t, version) {
  const db = await lancedb.connect(dir);
  await db.inner.createTable(name, toIPCFile(fromCanonical(t.rows, t.schema)), "create", [], { new_table_data_storage_version: version });
  const tdir = path.join(dir, `${name}.lance`);
  const files = fs.readdirSync(path.join(tdir, "data")).filter((f) => f.endsWith(".lance")).map((f) => path.join(tdir, "data", f));
  return { files, dataFiles: manifestDataFiles(tdir) };
}

// manifestDataFiles reads the newest manifest's DataFile {path, fields, column_indices, major, minor}.
export function manifestDataFiles(tdir) {
  const vdir = path.join(tdir, "_versions");
  const names = fs.readdirSync(vdir).filter((f) => f.endsWith(".manifest")).sort();
  const b = new Uint8Array(fs.readFileSync(path.join(vdir, names[names.length - 1])));
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const pos = Number(dv.getBigUint64(b.length - 16, true));
  const len = dv.getUint32(pos, true);
  const man = fields(b.subarray(pos + 4, pos + 4 + len));
  const ints = (f) => {
    const out = [];
    for (const x of f) {
      if (x.wire === 0) out.push(Number(BigInt.asIntN(32, x.v)));
      else for (const [v] of unpack(x.b)) out.push(Number(BigInt.asIntN(32, v)));
    }
    return out;
  };
  const out = [];
  for (const frag of man.filter((f) => f.num === 2)) {
    for (const df of fields(frag.b).filter((f) => f.num === 2)) {
      const d = fields(df.b);
      out.push({
        path: Buffer.from(d.find((f) => f.num === 1).b).toString(),
        fields: ints(d.filter((f) => f.num === 2)),
        column_indices: ints(d.filter((f) => f.num === 3)),
        version: `${d.find((f) => f.num === 4)?.v ?? 0}.${d.find((f) => f.num === 5)?.v ?? 0}`,
      });
    }
  }
  return out;
}

function* unpack(b) {
  let p = 0;
  while (p < b.length) {
    let v = 0n, s = 0n, c;
    do { c = b[p++]; v |= BigInt(c & 0x7f) << s; s += 7n; } while (c >= 0x80);
    yield [v];
  }
}

// leafNames lists the leaves of a schema in pre-order (the 2.1 column order).
export function leafNames(schema) {
  const out = [];
  const walk = (f, prefix) => {
    const name = prefix ? `${prefix}.${f.name}` : f.name;
    if (f.type.children && f.type.children.length) for (const c of f.type.children) walk(c, name);
    else out.push(name);
  };
  for (const f of schema.fields) walk(f, "");
  return out;
}

export function summarize(file, schema) {
  const info = readFile(file);
  const names = leafNames(schema);
  const lines = [`  footer ${info.major}.${info.minor}, ${info.columns.length} columns`];
  info.columns.forEach((c, i) => {
    const layouts = [...new Set(c.pages.map((p) => p.layout))];
    const rows = c.pages.reduce((a, p) => a + p.rows, 0);
    lines.push(`  col ${i} ${names[i] ?? "?"}: ${c.pages.length} page(s), ${rows} rows, column encoding ${c.encoding}, ${c.colBuffers} column buffers`);
    for (const l of layouts) lines.push(`      ${l}`);
  });
  return lines.join("\n");
}

async function main() {
  const out = process.argv[2];
  if (!out) throw new Error("usage: node probe21.mjs OUTDIR");
  ensureFreshDir(out);
  const tables = {
    main: mainTable(5000),
    big: bigTable(300000),
    huge: hugeTable(6, 70 * 1024),
  };
  for (const [engine, mod] of Object.entries(ENGINES)) {
    const lancedb = await import(mod);
    for (const version of VERSIONS) {
      const dir = path.join(out, `${engine}-v${version}`);
      for (const [name, t] of Object.entries(tables)) {
        let res;
        try {
          res = await writeTable(lancedb, dir, name, t, version);
        } catch (e) {
          console.log(`== ${engine} ${version} ${name}: cannot write: ${e.message.split("\n")[0]}`);
          continue;
        }
        for (const df of res.dataFiles) console.log(`== ${engine} ${version} ${name}: ${df.path} version ${df.version} fields [${df.fields}] column_indices [${df.column_indices}]`);
        for (const f of res.files) console.log(summarize(f, t.schema));
      }
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
