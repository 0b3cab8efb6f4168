#!/usr/bin/env node
// Writes small tables with the official engines at their newer data file versions, for the Go
// tests that prove no write path mixes file versions in a table (lance/testdata/official):
//
//   node fixtures.mjs <outdir>
//
// Each table <outdir>/<engine>-v<version>.lance has stable row ids, as OmniGraph's tables do,
// and two versions (a create and an append of 4 rows each): two equal fragments to compact. The shape is a node table's:
// a string key, a nullable string, a number and a list.
import fs from "node:fs";
import path from "node:path";

const engines = [
  { name: "lance8", mod: "@lancedb/lancedb", versions: ["2.1"] },
  { name: "lance10", mod: "lancedb10", versions: ["2.1", "2.2"] },
  { name: "lance12", mod: "lancedb12", versions: ["2.1", "2.2"] },
];

const out = process.argv[2];
if (!out) {
  console.error("usage: node fixtures.mjs <outdir>");
  process.exit(2);
}
fs.mkdirSync(out, { recursive: true });
for (const e of engines) {
  const lancedb = await import(e.mod);
  for (const v of e.versions) {
    const dir = fs.mkdtempSync(path.join(out, ".tmp-"));
    const db = await lancedb.connect(dir);
    const rows = (lo, hi) =>
      Array.from({ length: hi - lo }, (_, i) => ({
        id: `n${lo + i}`,
        name: (lo + i) % 3 === 1 ? null : `name ${lo + i}`,
        score: (lo + i) * 1.5,
        tags: [`t${(lo + i) % 4}`],
      }));
    const t = await db.createTable("t", rows(0, 4), {
      storageOptions: { new_table_data_storage_version: v, new_table_enable_stable_row_ids: "true" },
    });
    await t.add(rows(4, 8));
    const dst = path.join(out, `${e.name}-v${v}.lance`);
    fs.rmSync(dst, { recursive: true, force: true });
    fs.renameSync(path.join(dir, "t.lance"), dst);
    fs.rmSync(dir, { recursive: true });
    // The version hint is a cache the readers do not need; leaving it out keeps the fixture to
    // what the tests read.
    fs.rmSync(path.join(dst, "_versions", "latest_version_hint.json"), { force: true });
    console.log(`${dst}: data storage version ${v}, ${await t.countRows()} rows`);
  }
}
