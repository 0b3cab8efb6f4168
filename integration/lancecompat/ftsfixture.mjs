#!/usr/bin/env node
// Writes the table behind lance/inverted_test.go's comparison with Lance 10's own INVERTED index
// (lance/testdata/official/lance10-fts.lance):
//
//   node ftsfixture.mjs <outdir>
//
// Lance 10 (the reference OmniGraph's engine) creates a table with stable row ids at data file
// version 2.2 (two fragments: a create of 300 rows and an append of 200), deletes three rows and
// builds an INVERTED index on "s" with the default parameters. The text mixes case,
// punctuation, stop words, inflections, accents, numbers, nulls, empty strings and words of 39,
// 40 and 45 bytes; some words are in more than 128 documents (full posting blocks).
import fs from "node:fs";
import path from "node:path";

const lancedb = await import("lancedb10");
const arrow = await import("apache-arrow");

const out = process.argv[2];
if (!out) {
  console.error("usage: node ftsfixture.mjs <outdir>");
  process.exit(2);
}
const words = ["The", "quick", "brown", "foxes", "were", "running", "runs", "ran", "and", "jumped", "over", "lazy",
  "dogs'", "DOG", "Café", "naïve", "résumé", "Straße", "über", "co-operate", "e-mail", "it's", "don't", "organizations",
  "happily", "generously", "12345", "v2", "x".repeat(39), "y".repeat(40), "z".repeat(45), "Ångström", "ﬁnance", "hello,",
  "world!", "(parenthesis)", "a", "I", "of", "to"];
// text(i) is a deterministic sentence: its length and words follow from i alone.
function text(i) {
  if (i % 41 === 7) return null;
  if (i % 53 === 9) return "";
  if (i % 59 === 11) return "the and of to a";
  const n = 1 + ((i * 7) % 23);
  const ws = [];
  for (let k = 0; k < n; k++) ws.push(words[(i * 31 + k * k * 17 + k) % words.length]);
  return ws.join(i % 2 ? " " : "  ");
}
const rows = (lo, hi) => Array.from({ length: hi - lo }, (_, k) => ({ id: lo + k, s: text(lo + k) }));
const schema = new arrow.Schema([new arrow.Field("id", new arrow.Int64(), false), new arrow.Field("s", new arrow.Utf8(), true)]);

fs.mkdirSync(out, { recursive: true });
const dir = fs.mkdtempSync(path.join(out, ".tmp-"));
const db = await lancedb.connect(dir);
const t = await db.createTable("t", rows(0, 300), {
  schema,
  storageOptions: { new_table_data_storage_version: "2.2", new_table_enable_stable_row_ids: "true" },
});
await t.add(rows(300, 500));
await t.delete("id IN (3, 150, 400)");
await t.createIndex("s", { config: lancedb.Index.fts() });
const summary = `${await t.countRows()} rows, indices ${JSON.stringify((await t.listIndices()).map((x) => x.name))}`;
const dst = path.join(out, "lance10-fts.lance");
fs.rmSync(dst, { recursive: true, force: true });
fs.renameSync(path.join(dir, "t.lance"), dst);
fs.rmSync(dir, { recursive: true });
fs.rmSync(path.join(dst, "_versions", "latest_version_hint.json"), { force: true });
console.log(`${dst}: ${summary}`);
