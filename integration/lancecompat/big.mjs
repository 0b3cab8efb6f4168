// bigwrite <dir>: the official engine writes table "big" of BIG_ROWS rows (default 1,100,000)
// in one create, at the suite's data file version, so that the Go side reads a table of over a
// million rows as the engine lays it out (multi-page columns, dictionary and plain strings,
// nulls, lists). Row i: id "r<i>", n = 3i (Int64), s = null when i % 7 == 0 else "v<i % 1000>",
// tags = i % 3 strings "t0".."t<k-1>" (List<Utf8>, null when i % 11 == 0).
import { arrow, fromCanonical, toIPCFile } from "./canonical.mjs";
import { connect, TABLE_STABLE } from "./engine.mjs";

export async function bigWrite(dir, emit) {
  const rows = Number(process.env.BIG_ROWS || 1_100_000);
  const f = (name, type, nullable) => new arrow.Field(name, type, nullable);
  const schema = new arrow.Schema([
    f("id", new arrow.Utf8(), false),
    f("n", new arrow.Int64(), false),
    f("s", new arrow.Utf8(), true),
    f("tags", new arrow.List(f("item", new arrow.Utf8(), true)), true),
  ]);
  const db = await connect(dir);
  // Built in slices of canonical rows, then written as one table (one create, one fragment).
  const batches = [];
  const step = 100_000;
  for (let lo = 0; lo < rows; lo += step) {
    const part = [];
    for (let i = lo; i < Math.min(rows, lo + step); i++) {
      const k = i % 3;
      part.push({
        id: `r${i}`,
        n: String(3 * i),
        s: i % 7 === 0 ? null : `v${i % 1000}`,
        tags: i % 11 === 0 ? null : Array.from({ length: k }, (_, j) => `t${j}`),
      });
    }
    batches.push(...fromCanonical(part, schema).batches);
  }
  const table = new arrow.Table(schema, batches);
  await db.inner.createTable("big", toIPCFile(table), "create", [], TABLE_STABLE);
  emit({ case: "bigwrite", ok: true });
}
