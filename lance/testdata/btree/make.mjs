// The engine-built BTREE seeds of FuzzBTreeFiles (lance/btree_fuzz_test.go): table t of 300 rows
// (id: Int64, tag: Utf8 with nulls, x: Float64) and the engine's BTREE on each column, whose
// two files are copied to <out>/<label>-<column>-page_{lookup,data}.lance.
//
// Made with a copy of this script in integration/lancecompat (where the engines are installed):
//   node make.mjs lancedb10 <tmpdir> lance10 <this dir>
import fs from "node:fs";
import path from "node:path";
const [,, eng, dir, label, out] = process.argv;
const lancedb = await import(eng);
const db = await lancedb.connect(dir);
const rows = [...Array(300).keys()].map((i) => ({
  id: BigInt(i), tag: i % 7 === 3 ? null : `t${i % 13}`, x: ((i * 37) % 101) - 50.5,
}));
const tbl = await db.createTable("t", rows);
const idx = path.join(dir, "t.lance", "_indices");
const seen = new Set();
for (const c of ["id", "tag", "x"]) {
  await tbl.createIndex(c, { config: lancedb.Index.btree() });
  for (const u of fs.readdirSync(idx).filter((u) => !seen.has(u))) {
    seen.add(u);
    for (const f of fs.readdirSync(path.join(idx, u))) fs.copyFileSync(path.join(idx, u, f), path.join(out, `${label}-${c}-${f}`));
  }
}
