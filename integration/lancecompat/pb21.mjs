// Minimal reader of the Lance 2.1/2.2 data file container and of PageLayout messages
// (protos/file2.proto, protos/encodings_v2_1.proto), for the probe and the fixture generator:
// it names the page layouts and compressions a file uses, by field number.
import fs from "node:fs";

function varint(b, p) {
  let v = 0n, s = 0n;
  for (;;) {
    const c = b[p++];
    v |= BigInt(c & 0x7f) << s;
    if (c < 0x80) return [v, p];
    s += 7n;
  }
}

// fields returns [{num, wire, v (BigInt) | b (Uint8Array)}] of one message.
export function fields(b) {
  const out = [];
  let p = 0;
  while (p < b.length) {
    let k;
    [k, p] = varint(b, p);
    const num = Number(k >> 3n), wire = Number(k & 7n);
    if (wire === 0) { let v; [v, p] = varint(b, p); out.push({ num, wire, v }); }
    else if (wire === 2) { let n; [n, p] = varint(b, p); out.push({ num, wire, b: b.subarray(p, p + Number(n)) }); p += Number(n); }
    else if (wire === 1) { out.push({ num, wire, b: b.subarray(p, p + 8) }); p += 8; }
    else if (wire === 5) { out.push({ num, wire, b: b.subarray(p, p + 4) }); p += 4; }
    else throw new Error(`wire type ${wire}`);
  }
  return out;
}
const get = (fs_, n) => fs_.find((f) => f.num === n);
function packed(f) {
  if (!f) return [];
  if (f.wire === 0) return [f.v];
  const out = []; let p = 0;
  while (p < f.b.length) { let v; [v, p] = varint(f.b, p); out.push(v); }
  return out;
}

// Field names of the encodings_v2_1 messages: number -> [name, message type or null].
const M = {
  PageLayout: { 1: ["mini_block", "MiniBlockLayout"], 2: ["constant", "ConstantLayout"], 3: ["full_zip", "FullZipLayout"], 4: ["blob", "BlobLayout"] },
  MiniBlockLayout: { 1: ["rep", "CE"], 2: ["def", "CE"], 3: ["value", "CE"], 4: ["dictionary", "CE"], 5: ["num_dictionary_items"], 6: ["layers", "enum"], 7: ["num_buffers"], 8: ["repetition_index_depth"], 9: ["num_items"], 10: ["has_large_chunk"] },
  FullZipLayout: { 1: ["bits_rep"], 2: ["bits_def"], 3: ["bits_per_value"], 4: ["bits_per_offset"], 5: ["num_items"], 6: ["num_visible_items"], 7: ["value", "CE"], 8: ["layers", "enum"] },
  ConstantLayout: { 5: ["layers", "enum"], 6: ["inline_value", "bytes"], 7: ["rep", "CE"], 8: ["def", "CE"], 9: ["num_rep_values"], 10: ["num_def_values"] },
  BlobLayout: { 1: ["inner", "PageLayout"], 2: ["layers", "enum"] },
  CE: { 1: ["flat", "Flat"], 2: ["variable", "Variable"], 3: ["constant", "Constant"], 4: ["out_of_line_bitpacking", "OOL"], 5: ["inline_bitpacking", "Inline"], 6: ["fsst", "Fsst"], 7: ["dictionary", "Dict"], 8: ["rle", "Rle"], 9: ["byte_stream_split", "BSS"], 10: ["general", "General"], 11: ["fixed_size_list", "FSL"], 12: ["packed_struct", "PS"], 13: ["variable_packed_struct", null] },
  Flat: { 1: ["bits"], 2: ["data", "BC"] },
  Variable: { 1: ["offsets", "CE"], 2: ["values", "BC"] },
  Constant: { 1: ["value", "bytes"] },
  OOL: { 1: ["bits"], 3: ["values", "CE"] },
  Inline: { 1: ["bits"], 2: ["values", "BC"] },
  Fsst: { 1: ["symbol_table", "bytes"], 2: ["values", "CE"] },
  Dict: { 1: ["indices", "CE"], 2: ["items", "CE"], 3: ["n"] },
  Rle: { 1: ["values", "CE"], 2: ["run_lengths", "CE"] },
  BSS: { 1: ["values", "CE"] },
  General: { 1: ["compression", "BC"], 3: ["values", "CE"] },
  FSL: { 1: ["dim"], 2: ["values", "CE"], 3: ["has_validity"] },
  PS: { 1: ["bits"], 2: ["values", "CE"] },
  BC: { 1: ["scheme"], 2: ["level"] },
};
const LAYERS = ["?", "ALL_VALID_ITEM", "ALL_VALID_LIST", "NULLABLE_ITEM", "NULLABLE_LIST", "EMPTYABLE_LIST", "NULL_AND_EMPTY_LIST"];
const SCHEMES = ["none", "lz4", "zstd"];

// describe renders a message compactly, e.g. mini_block{value=inline_bitpacking{bits=32} ...}.
export function describe(b, type) {
  const names = M[type];
  const parts = [];
  for (const f of fields(b)) {
    const [name, sub] = names?.[f.num] ?? [`#${f.num}`, null];
    if (sub === "enum") { parts.push(`${name}=[${packed(f).map((v) => LAYERS[Number(v)] ?? v).join(",")}]`); continue; }
    if (sub === "bytes") { parts.push(`${name}=<${f.b.length}B>`); continue; }
    if (sub === "BC") { const bc = fields(f.b); parts.push(`${name}=${SCHEMES[Number(get(bc, 1)?.v ?? 0n)]}`); continue; }
    if (sub && f.wire === 2) {
      // A CompressiveEncoding or PageLayout is a oneof: show its one member directly.
      const inner = describe(f.b, sub);
      parts.push(sub === "CE" || sub === "PageLayout" ? `${name}=${inner}` : `${name}{${inner}}`);
      continue;
    }
    parts.push(`${name}=${f.wire === 0 ? f.v : `<${f.b?.length}B>`}`);
  }
  return parts.join(" ");
}

// Returns the Any {type_url, value} inside Encoding{direct{encoding}}.
function anyOf(enc) {
  const direct = get(fields(enc), 2);
  if (!direct) return { url: "(not direct)", value: new Uint8Array() };
  const any = fields(get(fields(direct.b), 1).b);
  return { url: Buffer.from(get(any, 1).b).toString(), value: get(any, 2)?.b ?? new Uint8Array() };
}

// readFile returns {major, minor, columns: [{encoding, pages: [{rows, sizes, layout}]}]}.
export function readFile(path) {
  const b = new Uint8Array(fs.readFileSync(path));
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const f = b.length - 40;
  const cmoStart = Number(dv.getBigUint64(f + 8, true));
  const ncols = dv.getUint32(f + 28, true);
  const major = dv.getUint16(f + 32, true), minor = dv.getUint16(f + 34, true);
  const columns = [];
  for (let i = 0; i < ncols; i++) {
    const pos = Number(dv.getBigUint64(cmoStart + 16 * i, true));
    const size = Number(dv.getBigUint64(cmoStart + 16 * i + 8, true));
    const cm = fields(b.subarray(pos, pos + size));
    const col = { encoding: "", pages: [], colBuffers: packed(get(cm, 3)).length };
    for (const fl of cm) {
      if (fl.num === 1) col.encoding = anyOf(fl.b).url.split(".").pop();
      if (fl.num !== 2) continue;
      const pg = fields(fl.b);
      const a = anyOf(get(pg, 4).b);
      col.pages.push({
        rows: Number(get(pg, 3)?.v ?? 0n),
        sizes: packed(get(pg, 2)).map(Number),
        url: a.url,
        layout: a.url.endsWith("PageLayout") ? describe(a.value, "PageLayout") : a.url,
      });
    }
    columns.push(col);
  }
  return { major, minor, columns };
}
