// Canonical JSON <-> Arrow conversion, driven by the Arrow schema, plus row comparison.
//
// Canonical values (the contract shared with the Go side):
//   Int8/16/32, UInt8/16/32   JSON number
//   Int64, UInt64             decimal string
//   Float32, Float64          JSON number
//   Bool                      true/false
//   Utf8, LargeUtf8           string
//   Binary, LargeBinary       standard base64 string (with padding)
//   Date32                    days since epoch (number)
//   Date64                    ms since epoch (number)
//   Timestamp (any unit/tz)   decimal string of the raw stored i64 (µs for Timestamp(µs))
//   FixedSizeList<T>          array of canonical T
//   List<T>                   array of canonical T (items may be null)
//   Struct                    object of canonical children (extra, not in the contract)
//   null                      null
//
// apache-arrow is loaded through require() on purpose: @lancedb/lancedb is CommonJS and uses the
// CJS build, and mixing it with the ESM build gives two sets of classes (instanceof breaks).
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
export const arrow = require("apache-arrow");
const T = arrow.Type;

// Work around an apache-arrow 18 IPC writer bug: for an all-null Bool array it writes a 0-byte
// values buffer, which arrow-rs (inside lance) rejects ("Need at least 1 bytes for bitmap in
// buffers[0] in array of type Boolean"). Hand the original assembler a view whose nullCount is 0
// so it writes the (zeroed) value bitmap; the validity buffer was already written by visit().
{
  const { VectorAssembler } = require("apache-arrow/visitor/vectorassembler");
  const visitBool = VectorAssembler.prototype.visitBool;
  VectorAssembler.prototype.visitBool = function (data) {
    if (data.length === 0 || data.nullCount < data.length) return visitBool.call(this, data);
    const enough = data.values instanceof Uint8Array && data.values.length * 8 >= data.offset + data.length;
    const values = enough ? data.values : new Uint8Array(Math.ceil((data.offset + data.length) / 8));
    return visitBool.call(this, { nullCount: 0, length: data.length, offset: data.offset, values });
  };
}

const utf8dec = new TextDecoder("utf-8", { fatal: true });
const utf8enc = new TextEncoder();

export function typeName(type) {
  return String(type);
}

// ---------------------------------------------------------------------------------------------
// Arrow -> canonical

function isValid(data, i) {
  return data.getValid(i);
}

// readValue returns the canonical value of row i of one Arrow Data chunk.
function readValue(data, i) {
  const type = data.type;
  if (type.typeId === T.Null) return null;
  if (!isValid(data, i)) return null;
  switch (type.typeId) {
    case T.Int: {
      const v = data.values[i];
      return type.bitWidth === 64 ? v.toString() : Number(v);
    }
    case T.Float:
      if (type.precision === arrow.Precision.HALF) throw new Error("Float16 is not part of the contract");
      return data.values[i];
    case T.Bool: {
      const pos = data.offset + i;
      return (data.values[pos >> 3] & (1 << (pos & 7))) !== 0;
    }
    case T.Utf8:
    case T.LargeUtf8:
      return utf8dec.decode(varBytes(data, i));
    case T.Binary:
    case T.LargeBinary:
      return Buffer.from(varBytes(data, i)).toString("base64");
    case T.Date:
      return type.unit === arrow.DateUnit.DAY ? data.values[i] : Number(data.values[i]);
    case T.Timestamp:
      return data.values[i].toString();
    case T.FixedSizeList: {
      const child = data.children[0];
      const n = type.listSize;
      const out = new Array(n);
      for (let j = 0; j < n; j++) out[j] = readValue(child, i * n + j);
      return out;
    }
    case T.List: {
      const child = data.children[0];
      const start = Number(data.valueOffsets[i]);
      const end = Number(data.valueOffsets[i + 1]);
      const out = [];
      for (let j = start; j < end; j++) out.push(readValue(child, j));
      return out;
    }
    case T.Struct: {
      const out = {};
      type.children.forEach((f, k) => { out[f.name] = readValue(data.children[k], i); });
      return out;
    }
    case T.Dictionary: {
      // Not expected from lance (it decodes dictionary pages), but harmless to support.
      const idx = Number(data.values[i]);
      return readVectorValue(data.dictionary, idx);
    }
    default:
      throw new Error(`unsupported Arrow type ${typeName(type)}`);
  }
}

function varBytes(data, i) {
  const start = Number(data.valueOffsets[i]);
  const end = Number(data.valueOffsets[i + 1]);
  return data.values.subarray(start, end);
}

function readVectorValue(vector, idx) {
  for (const d of vector.data) {
    if (idx < d.length) return readValue(d, idx);
    idx -= d.length;
  }
  throw new Error("index out of range");
}

// toCanonical converts an Arrow table into an array of {column: canonicalValue} rows.
export function toCanonical(table) {
  const rows = Array.from({ length: table.numRows }, () => ({}));
  table.schema.fields.forEach((field, c) => {
    const vec = table.getChildAt(c);
    let r = 0;
    for (const data of vec.data) {
      for (let i = 0; i < data.length; i++, r++) {
        try {
          rows[r][field.name] = readValue(data, i);
        } catch (e) {
          throw new Error(`column ${field.name} row ${r}: ${e.message}`);
        }
      }
    }
  });
  return rows;
}

// ---------------------------------------------------------------------------------------------
// canonical -> Arrow

function bitmap(n, bitFn) {
  const bytes = new Uint8Array(((n + 63) & ~63) >> 3);
  for (let i = 0; i < n; i++) if (bitFn(i)) bytes[i >> 3] |= 1 << (i & 7);
  return bytes;
}

function checkInt(v, type) {
  if (type.bitWidth === 64) {
    if (typeof v !== "string" || !/^-?\d+$/.test(v)) throw new Error(`want decimal string for ${typeName(type)}, got ${JSON.stringify(v)}`);
    const b = BigInt(v);
    const back = type.isSigned ? BigInt.asIntN(64, b) : BigInt.asUintN(64, b);
    if (back !== b) throw new Error(`${v} out of range for ${typeName(type)}`);
    return b;
  }
  if (!Number.isInteger(v)) throw new Error(`want integer number for ${typeName(type)}, got ${JSON.stringify(v)}`);
  const bits = type.bitWidth;
  const min = type.isSigned ? -(2 ** (bits - 1)) : 0;
  const max = type.isSigned ? 2 ** (bits - 1) - 1 : 2 ** bits - 1;
  if (v < min || v > max) throw new Error(`${v} out of range for ${typeName(type)}`);
  return v;
}

function checkBase64(v) {
  if (typeof v !== "string") throw new Error(`want base64 string, got ${JSON.stringify(v)}`);
  const buf = Buffer.from(v, "base64");
  if (buf.toString("base64") !== v) throw new Error(`not canonical standard base64: ${JSON.stringify(v)}`);
  return buf;
}

function checkType(v, jsType, type) {
  if (typeof v !== jsType) throw new Error(`want ${jsType} for ${typeName(type)}, got ${JSON.stringify(v)}`);
  return v;
}

// buildData builds one Arrow Data of `type` from canonical values (null allowed iff nullable).
function buildData(type, values, nullable, where) {
  const n = values.length;
  let nullCount = 0;
  values.forEach((v, i) => {
    if (v === null || v === undefined) {
      if (!nullable) throw new Error(`${where}: null at index ${i} in a non-nullable field`);
      nullCount++;
    }
  });
  const nullBitmap = nullCount > 0 ? bitmap(n, (i) => values[i] != null) : undefined;
  const base = { type, length: n, nullCount, nullBitmap };
  const each = (fn, fill) => values.map((v, i) => {
    if (v == null) return fill;
    try { return fn(v); } catch (e) { throw new Error(`${where}[${i}]: ${e.message}`); }
  });

  switch (type.typeId) {
    case T.Int: {
      const fill = type.bitWidth === 64 ? 0n : 0;
      return arrow.makeData({ ...base, data: type.ArrayType.from(each((v) => checkInt(v, type), fill)) });
    }
    case T.Float:
      return arrow.makeData({ ...base, data: type.ArrayType.from(each((v) => checkType(v, "number", type), 0)) });
    case T.Bool: {
      const bools = each((v) => checkType(v, "boolean", type), false);
      return arrow.makeData({ ...base, data: bitmap(n, (i) => bools[i]) });
    }
    case T.Utf8:
    case T.LargeUtf8:
    case T.Binary:
    case T.LargeBinary: {
      const isText = type.typeId === T.Utf8 || type.typeId === T.LargeUtf8;
      const parts = each((v) => (isText ? utf8enc.encode(checkType(v, "string", type)) : checkBase64(v)), new Uint8Array(0));
      const large = type.typeId === T.LargeUtf8 || type.typeId === T.LargeBinary;
      const offsets = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
      let total = 0;
      parts.forEach((p, i) => { total += p.length; offsets[i + 1] = large ? BigInt(total) : total; });
      const bytes = new Uint8Array(total);
      let pos = 0;
      for (const p of parts) { bytes.set(p, pos); pos += p.length; }
      return arrow.makeData({ ...base, valueOffsets: offsets, data: bytes });
    }
    case T.Date: {
      const ints = each((v) => {
        if (!Number.isSafeInteger(v)) throw new Error(`want integer number for ${typeName(type)}, got ${JSON.stringify(v)}`);
        return v;
      }, 0);
      const data = type.unit === arrow.DateUnit.DAY ? Int32Array.from(ints) : BigInt64Array.from(ints.map(BigInt));
      return arrow.makeData({ ...base, data });
    }
    case T.Timestamp:
      return arrow.makeData({ ...base, data: BigInt64Array.from(each((v) => checkInt(v, new arrow.Int64()), 0n)) });
    case T.FixedSizeList: {
      const size = type.listSize;
      const childField = type.children[0];
      const filler = childField.nullable ? null : zeroOf(childField.type);
      const items = [];
      values.forEach((v, i) => {
        if (v == null) { for (let j = 0; j < size; j++) items.push(filler); return; }
        if (!Array.isArray(v) || v.length !== size) throw new Error(`${where}[${i}]: want array of ${size} items, got ${JSON.stringify(v)}`);
        items.push(...v);
      });
      const child = buildData(childField.type, items, childField.nullable, `${where}.${childField.name}`);
      return arrow.makeData({ ...base, child });
    }
    case T.List: {
      const childField = type.children[0];
      const offsets = new Int32Array(n + 1);
      const items = [];
      values.forEach((v, i) => {
        if (v != null) {
          if (!Array.isArray(v)) throw new Error(`${where}[${i}]: want array, got ${JSON.stringify(v)}`);
          items.push(...v);
        }
        offsets[i + 1] = items.length;
      });
      const child = buildData(childField.type, items, childField.nullable, `${where}.${childField.name}`);
      return arrow.makeData({ ...base, valueOffsets: offsets, child });
    }
    case T.Struct: {
      const children = type.children.map((f) =>
        buildData(f.type, values.map((v) => (v == null ? (f.nullable ? null : zeroOf(f.type)) : v[f.name] ?? null)), f.nullable, `${where}.${f.name}`));
      return arrow.makeData({ ...base, children });
    }
    default:
      throw new Error(`${where}: unsupported Arrow type ${typeName(type)}`);
  }
}

function zeroOf(type) {
  switch (type.typeId) {
    case T.Int: return type.bitWidth === 64 ? "0" : 0;
    case T.Float: case T.Date: return 0;
    case T.Timestamp: return "0";
    case T.Bool: return false;
    case T.Utf8: case T.LargeUtf8: case T.Binary: case T.LargeBinary: return "";
    default: throw new Error(`no zero value for ${typeName(type)}`);
  }
}

// fromCanonical builds an Arrow table (one record batch) with exactly `schema` from canonical rows.
// Missing keys are treated as null; keys not in the schema are an error.
export function fromCanonical(rows, schema) {
  const names = new Set(schema.fields.map((f) => f.name));
  rows.forEach((r, i) => {
    for (const k of Object.keys(r)) if (!names.has(k)) throw new Error(`row ${i}: column ${k} is not in the table schema`);
  });
  const children = schema.fields.map((f) =>
    buildData(f.type, rows.map((r) => (r[f.name] === undefined ? null : r[f.name])), f.nullable, f.name));
  const struct = arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows.length, nullCount: 0, children });
  return new arrow.Table([new arrow.RecordBatch(schema, struct)]);
}

// toIPCFile serializes an Arrow table in the IPC *file* format (what lancedb's native add/create take).
export function toIPCFile(table) {
  return Buffer.from(arrow.tableToIPC(table, "file"));
}

// ---------------------------------------------------------------------------------------------
// comparison

function isInt64Type(type) {
  return type && type.typeId === T.Int && type.bitWidth === 64;
}

// idComparator orders canonical ids: BigInt for Int64/UInt64 (or integer-looking strings), else
// numbers before strings, natural order within each; nulls first.
export function idComparator(idType) {
  const key = (v) => {
    if (v === null || v === undefined) return null;
    if (typeof v === "string" && (isInt64Type(idType) || (!idType && /^-?\d+$/.test(v)))) return BigInt(v);
    return v;
  };
  return (a, b) => {
    const x = key(a), y = key(b);
    if (x === y) return 0;
    if (x === null) return -1;
    if (y === null) return 1;
    if (typeof x !== typeof y) return typeof x < typeof y ? -1 : 1;
    return x < y ? -1 : x > y ? 1 : 0;
  };
}

export function sortRows(rows, idCol, idType) {
  const cmp = idComparator(idType);
  return [...rows].sort((a, b) => cmp(a[idCol], b[idCol]));
}

// valueEqual compares canonical values; Float32 compares after rounding both to float32.
export function valueEqual(type, e, a) {
  if (e === null || a === null || e === undefined || a === undefined) return (e ?? null) === (a ?? null);
  if (!type) return JSON.stringify(e) === JSON.stringify(a);
  switch (type.typeId) {
    case T.Float:
      if (typeof e !== "number" || typeof a !== "number") return false;
      if (Number.isNaN(e) && Number.isNaN(a)) return true;
      return type.precision === arrow.Precision.SINGLE ? Math.fround(e) === Math.fround(a) : e === a;
    case T.List:
    case T.FixedSizeList: {
      if (!Array.isArray(e) || !Array.isArray(a) || e.length !== a.length) return false;
      const ct = type.children[0].type;
      return e.every((x, i) => valueEqual(ct, x, a[i]));
    }
    case T.Struct:
      return type.children.every((f) => valueEqual(f.type, e[f.name] ?? null, a[f.name] ?? null));
    default:
      return e === a;
  }
}

const show = (v) => {
  const s = JSON.stringify(v === undefined ? null : v);
  return s.length > 200 ? s.slice(0, 200) + "..." : s;
};

function idDiff(expIds, actIds, cmp) {
  const e = new Set(expIds.map(String)), a = new Set(actIds.map(String));
  const missing = expIds.filter((x) => !a.has(String(x))).sort(cmp);
  const extra = actIds.filter((x) => !e.has(String(x))).sort(cmp);
  const parts = [];
  if (missing.length) parts.push(`missing ids ${show(missing.slice(0, 10))}${missing.length > 10 ? ` (+${missing.length - 10} more)` : ""}`);
  if (extra.length) parts.push(`unexpected ids ${show(extra.slice(0, 10))}${extra.length > 10 ? ` (+${extra.length - 10} more)` : ""}`);
  return parts.join("; ");
}

// compareIdLists compares two id lists as multisets (order-insensitive); returns null or a reason.
export function compareIdLists(expected, actual, idType) {
  const cmp = idComparator(idType);
  const e = [...expected].sort(cmp), a = [...actual].sort(cmp);
  if (e.length === a.length && e.every((x, i) => cmp(x, a[i]) === 0)) return null;
  return `expected ${e.length} ids, got ${a.length}: ${idDiff(e, a, cmp) || `order/duplicates differ: expected ${show(e.slice(0, 20))} got ${show(a.slice(0, 20))}`}`;
}

// compareRows compares expected vs actual canonical rows over `columns` (names), using `types`
// (name -> Arrow type) for value semantics. Rows are matched after sorting by idCol.
// Returns null when equal, otherwise a reason naming the first differing row and column.
export function compareRows(expected, actual, columns, types, idCol = "id") {
  const idType = types[idCol];
  const cmp = idComparator(idType);
  if (expected.length !== actual.length) {
    const detail = columns.includes(idCol) ? `; ${idDiff(expected.map((r) => r[idCol]), actual.map((r) => r[idCol]), cmp)}` : "";
    return `row count: expected ${expected.length}, got ${actual.length}${detail}`;
  }
  // Without the id column, fall back to ordering rows by their JSON text.
  const byJSON = (rows) => rows.map((r) => [JSON.stringify(columns.map((c) => r[c] ?? null)), r])
    .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)).map((x) => x[1]);
  const e = columns.includes(idCol) ? sortRows(expected, idCol, idType) : byJSON(expected);
  const a = columns.includes(idCol) ? sortRows(actual, idCol, idType) : byJSON(actual);
  for (let i = 0; i < e.length; i++) {
    for (const c of columns) {
      if (!valueEqual(types[c], e[i][c] ?? null, a[i][c] ?? null)) {
        const ident = columns.includes(idCol) ? `id=${show(e[i][idCol])}` : `#${i}`;
        return `row ${ident} (sorted position ${i}) column ${c} (${types[c] ? typeName(types[c]) : "?"}): expected ${show(e[i][c])}, got ${show(a[i][c])}`;
      }
    }
  }
  return null;
}
