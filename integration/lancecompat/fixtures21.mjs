// fixtures21: writes small Lance 2.1 / 2.2 data files with each official engine, plus the rows
// they hold as canonical JSON (canonical.mjs), for lance/file's Go tests.
//
//   node fixtures21.mjs OUTDIR    (OUTDIR/<table>.json, OUTDIR/<engine>-v<version>/<table>.lance)
//
// Tables: main (every type of the graph's schema language, nulls, empty strings, all-null and
// constant columns, low/high cardinality strings, 1100 rows so that mini-blocks hold several
// chunks), vec (FixedSizeList<Float32,128>, full-zip), huge (values over 64 KiB, full-zip with
// zstd), tiny (12 rows of every type, the seed of the fuzz tests). The temporary tables are written under OUTDIR/.work and may be deleted afterwards.
import fs from "node:fs";
import path from "node:path";
import { ENGINES, VERSIONS, mainTable, hugeTable, writeTable } from "./probe21.mjs";
import { arrow } from "./canonical.mjs";

const A = arrow;

function vecTable(n) {
  const schema = new A.Schema([
    new A.Field("id", new A.Int32(), false),
    new A.Field("vec128", new A.FixedSizeList(128, new A.Field("item", new A.Float32(), true)), true),
  ]);
  const rows = [];
  for (let i = 0; i < n; i++) {
    rows.push({ id: i, vec128: i % 7 === 3 ? null : Array.from({ length: 128 }, (_, k) => Math.fround((i * 128 + k) / 64)) });
  }
  return { schema, rows };
}

async function main() {
  const out = process.argv[2];
  if (!out) throw new Error("usage: node fixtures21.mjs OUTDIR");
  const main_ = mainTable(1100);
  main_.schema = new A.Schema(main_.schema.fields.filter((f) => f.name !== "vec128"));
  for (const r of main_.rows) delete r.vec128;
  const tiny = mainTable(12, 7);
  const tables = { main: main_, vec: vecTable(40), huge: hugeTable(2, 66 * 1024), tiny };
  fs.mkdirSync(out, { recursive: true });
  for (const [name, t] of Object.entries(tables)) fs.writeFileSync(path.join(out, `${name}.json`), JSON.stringify(t.rows));
  for (const [engine, mod] of Object.entries(ENGINES)) {
    const lancedb = await import(mod);
    for (const version of VERSIONS) {
      const dir = path.join(out, `${engine}-v${version}`);
      const work = path.join(out, ".work", `${engine}-v${version}`);
      fs.mkdirSync(dir, { recursive: true });
      for (const [name, t] of Object.entries(tables)) {
        const res = await writeTable(lancedb, work, name, t, version);
        if (res.files.length !== 1) throw new Error(`${engine} ${version} ${name}: ${res.files.length} data files`);
        fs.copyFileSync(res.files[0], path.join(dir, `${name}.lance`));
        console.log(`${dir}/${name}.lance: ${fs.statSync(res.files[0]).size} bytes, DataFile fields [${res.dataFiles[0].fields}] columns [${res.dataFiles[0].column_indices}]`);
      }
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
