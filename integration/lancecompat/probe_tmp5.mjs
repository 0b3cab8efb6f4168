import * as lancedb from "lancedb12";
import fs from "node:fs";
const db = await lancedb.connect("/tmp/l22/p5");
for (const v of ["2.1"]) {
  await db.inner.createTable("t" + v, fs.readFileSync("/tmp/l22/w4/2.1/dbg_wide.arrow"), "create", [], { new_table_data_storage_version: v });
  const t = await db.openTable("t" + v);
  console.log(await t.countRows(), (await t.query().toArrow()).numRows);
}
