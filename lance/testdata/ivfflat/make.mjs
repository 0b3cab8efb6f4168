// The IVF_FLAT fixture of lance/ivfflat_test.go: table t, 300 rows (id, v: 8 float32s) with stable
// row ids, 10 more appended, id 5 deleted, then the engine's IVF_FLAT (1 partition, L2) on v.
// Row 20's vector is null, row 21's has a NaN and row 22's a null element.
//
// Made with a copy of this script in integration/lancecompat (where the engines are installed):
//   node make.mjs lancedb10 <dir>/lance10-v2.0 2.0; node make.mjs lancedb12 <dir>/lance12-v2.1 2.1
// and <dir>/*/t.lance copied here as lance10-v2.0.lance and lance12-v2.1.lance.
const [,, eng, dir, dv] = process.argv;
const lancedb = await import(eng);
const arrow = await import("apache-arrow");
const db = await lancedb.connect(dir);
const DIM = 8;
const vec = (i) => { const v = []; for (let j = 0; j < DIM; j++) v.push(Math.fround(((i*31+j*17)%97)/97 - 0.5)); return v; };
const item = new arrow.Field("item", new arrow.Float32(), true);
const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int64(), true),
  new arrow.Field("v", new arrow.FixedSizeList(DIM, item), true)]);
function batch(ids) {
  const vals = [];
  const valid = [];
  for (const i of ids) {
    const v = vec(i);
    if (i === 21) v[3] = NaN;
    vals.push(v);
    valid.push(i !== 20);
  }
  const flat = arrow.makeData({ type: new arrow.Float32(), length: ids.length * DIM, data: Float32Array.from(vals.flat()),
    nullBitmap: (() => { const b = new Uint8Array(Math.ceil(ids.length * DIM / 8)).fill(255); const k = ids.indexOf(22); if (k >= 0) { const p = k * DIM + 5; b[p >> 3] &= ~(1 << (p & 7)); } return b; })() });
  const nb = new Uint8Array(Math.ceil(ids.length / 8)); valid.forEach((ok, k) => { if (ok) nb[k >> 3] |= 1 << (k & 7); });
  const v = arrow.makeData({ type: new arrow.FixedSizeList(DIM, item), length: ids.length, nullBitmap: nb, child: flat });
  const id = arrow.makeData({ type: new arrow.Int64(), length: ids.length, data: BigInt64Array.from(ids.map(BigInt)) });
  const st = arrow.makeData({ type: new arrow.Struct(schema.fields), length: ids.length, children: [id, v] });
  return new arrow.Table(schema, new arrow.RecordBatch(schema, st));
}
const ipc = (t) => Buffer.from(arrow.tableToIPC(t, "file"));
await db.inner.createTable("t", ipc(batch([...Array(300).keys()])), "create", [], { new_table_data_storage_version: dv, new_table_enable_stable_row_ids: "true" });
const tbl = await db.openTable("t");
await tbl.inner.add(ipc(batch([...Array(10).keys()].map((i) => i + 1000))), "append");
await tbl.delete("id = 5");
await tbl.createIndex("v", { config: lancedb.Index.ivfFlat({ numPartitions: 1, distanceType: "l2" }) });
console.log(JSON.stringify(await tbl.indexStats("v_idx")));
const n = await tbl.countRows("v IS NULL");
console.log("null vectors", n);
