// The node side of write21check (see write21check/main.go): the official engines create and read
// Lance 2.1/2.2 tables beside the ones Go wrote.
//
//   node write21check.mjs seed   <dir>   each engine creates made_by_<engine> from seed.arrow;
//                                        Lance 12 and Lance 8 write node1000/node8192 as
//                                        l12_node1000 ... (for the size comparison) and append
//                                        seed.arrow to grown_by_<engine>, a Go table; per version
//   node write21check.mjs verify <dir>   each engine opens every <table>.lance that has a
//                                        <table>.arrow beside it, counts its rows at every table
//                                        version and compares its full scan with the .arrow file,
//                                        row for row; one JSON line per engine, version and table
//
// Values are compared by their bytes: every fixed-width value as the hex of its little-endian
// bytes (so float16, times, durations and fixed-size binaries need no conversion), strings and
// binaries as the hex of their bytes, lists, fixed-size lists and structs element by element.
// Apache Arrow JS has no LargeList: such columns are read through arrow_cast to List (the cast
// expressions come from <table>.json), and Go saves them as List in the .arrow file.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const arrow = require("apache-arrow");
const T = arrow.Type;

const ENGINES = { l8: "@lancedb/lancedb", l10: "lancedb10", l12: "lancedb12" };
const VERSIONS = ["2.1", "2.2"];

function emit(o) {
  process.stdout.write(JSON.stringify(o) + "\n");
}

async function engine(tag) {
  return import(ENGINES[tag]);
}

async function create(db, name, ipc, version) {
  await db.inner.createTable(name, ipc, "create", [], { new_table_data_storage_version: version });
}

async function seed(dir) {
  for (const v of VERSIONS) {
    const vdir = path.join(dir, v);
    const seedIPC = fs.readFileSync(path.join(vdir, "seed.arrow"));
    for (const tag of Object.keys(ENGINES)) {
      const db = await (await engine(tag)).connect(vdir);
      await create(db, `made_by_${tag}`, seedIPC, v);
      if (tag === "l12" || tag === "l8") {
        for (const n of ["node1000", "node8192"]) {
          await create(db, `${tag}_${n}`, fs.readFileSync(path.join(vdir, `${n}.arrow`)), v);
        }
        // the engine appends to a table Go made at this version
        const grown = await db.openTable(`grown_by_${tag}`);
        await grown.inner.add(seedIPC, "append");
      }
    }
  }
}

const hex = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString("hex");

// val returns a comparable form of row i of one Arrow Data chunk.
function val(d, i) {
  if (!d.getValid(i)) return null;
  const t = d.type;
  switch (t.typeId) {
    case T.Bool: {
      const p = d.offset + i;
      return ((d.values[p >> 3] >> (p & 7)) & 1) === 1;
    }
    case T.Utf8:
    case T.LargeUtf8:
    case T.Binary:
    case T.LargeBinary: {
      const s = Number(d.valueOffsets[i]);
      const e = Number(d.valueOffsets[i + 1]);
      return "b" + hex(d.values.subarray(s, e));
    }
    case T.List: {
      const s = Number(d.valueOffsets[i]);
      const e = Number(d.valueOffsets[i + 1]);
      const out = [];
      for (let j = s; j < e; j++) out.push(val(d.children[0], j));
      return out;
    }
    case T.FixedSizeList: {
      const n = t.listSize;
      const out = [];
      for (let j = 0; j < n; j++) out.push(val(d.children[0], i * n + j));
      return out;
    }
    case T.Struct: {
      const out = {};
      t.children.forEach((f, k) => { out[f.name] = val(d.children[k], i); });
      return out;
    }
    default: {
      // fixed width: the bytes of the value
      const w = byteWidth(t);
      if (!w) throw new Error(`unsupported Arrow type ${t}`);
      const a = d.values;
      const per = w / a.BYTES_PER_ELEMENT;
      return "x" + hex(new Uint8Array(a.buffer, a.byteOffset + i * per * a.BYTES_PER_ELEMENT, w));
    }
  }
}

function byteWidth(t) {
  switch (t.typeId) {
    case T.FixedSizeBinary: return t.byteWidth;
    case T.Float: return [2, 4, 8][t.precision];
    case T.Date: return t.unit === arrow.DateUnit.DAY ? 4 : 8;
    case T.Timestamp: case T.Duration: return 8;
    default: return t.bitWidth / 8;
  }
}

function* values(vec) {
  for (const d of vec.data) for (let i = 0; i < d.length; i++) yield val(d, i);
}

// compare returns null when actual holds expected's rows in order, else what differs first.
function compare(expected, actual) {
  if (actual.numRows !== expected.numRows) return `${actual.numRows} rows, want ${expected.numRows}`;
  for (const f of expected.schema.fields) {
    const av = actual.getChild(f.name);
    if (av == null) return `no column ${f.name}`;
    const ef = actual.schema.fields.find((x) => x.name === f.name);
    if (String(ef.type) !== String(f.type)) return `column ${f.name} has type ${ef.type}, want ${f.type}`;
    const ei = values(expected.getChild(f.name));
    const ai = values(av);
    for (let r = 0; ; r++) {
      const e = ei.next();
      const a = ai.next();
      if (e.done || a.done) {
        if (e.done !== a.done) return `column ${f.name}: lengths differ`;
        break;
      }
      const es = JSON.stringify(e.value);
      const as = JSON.stringify(a.value);
      if (es !== as) return `column ${f.name} row ${r}: got ${as.slice(0, 120)}, want ${es.slice(0, 120)}`;
    }
  }
  return null;
}

async function verifyTable(tag, v, vdir, name) {
  const expected = arrow.tableFromIPC(fs.readFileSync(path.join(vdir, `${name}.arrow`)));
  const sidecar = path.join(vdir, `${name}.json`);
  const casts = fs.existsSync(sidecar) ? JSON.parse(fs.readFileSync(sidecar, "utf8")).casts ?? {} : {};
  const db = await (await engine(tag)).connect(vdir);
  const tbl = await db.openTable(name);
  for (const ver of await tbl.listVersions()) {
    const old = await db.openTable(name);
    await old.checkout(ver.version);
    await old.countRows();
  }
  const sel = {};
  for (const f of expected.schema.fields) sel[f.name] = casts[f.name] ?? f.name;
  const actual = await tbl.query().select(sel).toArrow();
  return { diff: compare(expected, actual), rows: actual.numRows };
}

async function verify(dir) {
  for (const v of VERSIONS) {
    const vdir = path.join(dir, v);
    const tables = fs.readdirSync(vdir).filter((f) => f.endsWith(".arrow") && f !== "seed.arrow").map((f) => f.slice(0, -6)).sort();
    for (const tag of Object.keys(ENGINES)) {
      for (const name of tables) {
        try {
          const { diff, rows } = await verifyTable(tag, v, vdir, name);
          emit({ engine: tag, version: v, table: name, ok: diff == null, rows, error: diff ?? "" });
        } catch (e) {
          emit({ engine: tag, version: v, table: name, ok: false, rows: 0, error: String(e?.message ?? e).split("\n")[0].slice(0, 300) });
        }
      }
    }
  }
}

const [cmd, dir] = process.argv.slice(2);
if (cmd === "seed") await seed(dir);
else if (cmd === "verify") await verify(dir);
else {
  console.error("usage: node write21check.mjs seed|verify <dir>");
  process.exit(2);
}
