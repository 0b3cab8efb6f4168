// INVERTED interop (driver/inverted.go): `ftsverify` checks a full-text index the Go package
// built (on gfts) against one the engine builds itself (on efts, a table with the same rows,
// fragments and deletions), after both got the same appended fragment that no index covers:
//
//   - the engine lists Go's index as an FTS index on s and counts the rows Go indexed;
//   - without an index the engine refuses a full-text search of the table; with Go's it
//     answers it, and its plan names the index (MatchQuery on s);
//   - every query returns exactly the rows, and the scores, the engine returns from its own
//     index on efts (the rows no index covers included).
import fs from "node:fs";
import path from "node:path";
import { toCanonical } from "./canonical.mjs";
import { appendRows, connect, ENGINE, ENGINES, openAt } from "./engine.mjs";

const lancedb = await import(ENGINES[ENGINE]);
const LIMIT = 1_000_000_000;
// SCORE_TOL: the relative difference allowed between two BM25 scores of the same row (they are
// computed from the same statistics, so they are expected to be equal).
const SCORE_TOL = 1e-5;

async function search(tbl, term, columns = "s") {
  const q = columns == null ? tbl.query().fullTextSearch(term) : tbl.query().fullTextSearch(term, { columns });
  const rows = toCanonical(await q.select(["id", "_score"]).limit(LIMIT).toArrow());
  return new Map(rows.map((r) => [r.id, r._score]));
}

// Lance 8's own index counts the rows without tokens (empty, stop words only) as documents of
// length 0, so its BM25 statistics (document count, average length), and so its scores, differ
// from those of an index Lance 10 or 12 (or Go) writes; it finds the same rows.
const SCORES_COMPARABLE = ENGINE !== "lance8";

function compareResults(got, want) {
  const missing = [...want.keys()].filter((id) => !got.has(id));
  const extra = [...got.keys()].filter((id) => !want.has(id));
  if (missing.length || extra.length) {
    return `Go's index returns ${got.size} rows, the engine's ${want.size} (missing ${JSON.stringify(missing.slice(0, 10))}, extra ${JSON.stringify(extra.slice(0, 10))})`;
  }
  if (!SCORES_COMPARABLE) return null;
  for (const [id, s] of want) {
    const g = got.get(id);
    if (Math.abs(g - s) > SCORE_TOL * Math.max(Math.abs(g), Math.abs(s))) return `row ${id}: score ${g} from Go's index, ${s} from the engine's`;
  }
  return null;
}

export async function ftsVerify(dir, { emit, errText, log }) {
  const spec = JSON.parse(fs.readFileSync(path.join(dir, "ftscases.json"), "utf8"));
  const db = await connect(path.resolve(dir));
  const gt = await db.openTable(spec.go_table);
  const et = await db.openTable(spec.engine_table);
  const run = async (name, fn) => {
    let why;
    try {
      why = await fn();
    } catch (e) {
      why = `engine error: ${errText(e)}`;
    }
    emit(why ? { case: name, ok: false, error: why } : { case: name, ok: true });
    if (why) log(`FAIL ${name}: ${why}`);
  };
  // The engine's own index on the same rows, then the same unindexed fragment.
  await run("engine-builds-its-own", async () => {
    await et.createIndex("s", { config: lancedb.Index.fts() });
    await appendRows(et, spec.append);
    return null;
  });
  await run("lists-go-index", async () => {
    const x = (await gt.listIndices()).find((i) => i.name === spec.index);
    if (!x) return `no index ${spec.index} in ${JSON.stringify((await gt.listIndices()).map((i) => i.name))}`;
    return x.indexType === "FTS" && JSON.stringify([...x.columns]) === '["s"]' ? null : `listed as ${x.indexType} on ${JSON.stringify(x.columns)}`;
  });
  await run("index-stats", async () => {
    const g = await gt.indexStats(spec.index);
    const e = await et.indexStats(spec.index);
    if (g == null) return "no statistics";
    if (g.numIndexedRows !== spec.indexed_rows) return `numIndexedRows ${g.numIndexedRows}, Go indexed ${spec.indexed_rows}`;
    if (g.numUnindexedRows !== spec.append.length) return `numUnindexedRows ${g.numUnindexedRows}, want ${spec.append.length}`;
    if (g.numIndexedRows !== e.numIndexedRows || g.numUnindexedRows !== e.numUnindexedRows || g.indexType !== e.indexType) {
      return `Go's index ${JSON.stringify(g)}, the engine's ${JSON.stringify(e)}`;
    }
    return null;
  });
  await run("answers-from-the-index", async () => {
    // Without an index on any column the engine refuses a search that names no column.
    const before = await openAt(db, spec.go_table, null, spec.pre_index_version);
    try {
      await before.query().fullTextSearch("fox").limit(10).toArray();
      return `version ${spec.pre_index_version} (no index) answered a full-text search`;
    } catch (e) {
      if (!/INVERTED index/.test(errText(e))) return `version ${spec.pre_index_version}: unexpected error ${errText(e)}`;
    }
    const fails = [];
    for (const term of spec.queries) {
      const plan = await gt.query().fullTextSearch(term, { columns: "s" }).select(["id", "_score"]).explainPlan(false);
      if (!/MatchQuery: column=s/.test(plan)) fails.push(`plan of ${JSON.stringify(term)} names no MatchQuery on s: ${plan.replace(/\s+/g, " ")}`);
    }
    const any = await search(gt, "fox", null); // no column named: the engine picks the indexed one
    if (any.size === 0) fails.push("a search naming no column found nothing");
    return fails.length ? fails.join("; ") : null;
  });
  await compareQueries(spec, gt, et, run, log, "");
}

// compareQueries runs every query of spec on gt (Go's index, or what the engine made of it) and
// et (the engine's own), which must return the same rows and scores.
async function compareQueries(spec, gt, et, run, log, label) {
  for (const term of spec.queries) {
    await run(`${label}query ${JSON.stringify(term)}`, async () => {
      const got = await search(gt, term);
      if ((spec.stem_differs?.[ENGINE] ?? []).includes(term)) {
        // This engine stems the query unlike Lance 10, whose stems the index holds (as an index
        // Lance 10 built would): only require that the search runs.
        log(`${ENGINE}: query ${JSON.stringify(term)} stems unlike Lance 10; Go's index finds ${got.size} rows`);
        return null;
      }
      const want = await search(et, term);
      const none = (spec.no_match ?? []).includes(term);
      if (none !== (want.size === 0)) return `the engine's own index finds ${want.size} rows, expected ${none ? "none" : "some"}`;
      return compareResults(got, want);
    });
  }
}

// ftsMaintain (driver/maintain.go): <dir>/ftsmaintain.json {label, op, indexed?, unindexed?}
// names one step done to both gfts and efts, the tables ftsverify compared: "optimize" (the
// engine's optimize(): compaction, new rows folded into the index), "reindex" (the engine's
// createIndex on s replacing the index) or "none" (Go wrote on both). Then the engine must list
// the index on gfts, count indexed and unindexed rows as Go expects and as on efts, and answer
// every query on gfts exactly as on efts.
export async function ftsMaintain(dir, { emit, errText, log }) {
  const spec = JSON.parse(fs.readFileSync(path.join(dir, "ftscases.json"), "utf8"));
  const step = JSON.parse(fs.readFileSync(path.join(dir, "ftsmaintain.json"), "utf8"));
  const db = await connect(path.resolve(dir));
  const gt = await db.openTable(spec.go_table);
  const et = await db.openTable(spec.engine_table);
  const label = `${step.label}/`;
  const run = async (name, fn) => {
    let why;
    try {
      why = await fn();
    } catch (e) {
      why = `engine error: ${errText(e)}`;
    }
    emit(why ? { case: label + name, ok: false, error: why } : { case: label + name, ok: true });
    if (why) log(`FAIL ${label}${name}: ${why}`);
  };
  let done = true;
  await run(step.op, async () => {
    for (const t of [gt, et]) {
      switch (step.op) {
        case "optimize": await t.optimize(); break;
        case "reindex": await t.createIndex("s", { config: lancedb.Index.fts(), replace: true }); break;
        case "none": break;
        default: done = false; return `unknown op ${JSON.stringify(step.op)}`;
      }
    }
    return null;
  });
  if (!done) return;
  await run("lists-index", async () => {
    const x = (await gt.listIndices()).find((i) => i.name === spec.index);
    if (!x) return `no index ${spec.index} in ${JSON.stringify((await gt.listIndices()).map((i) => i.name))}`;
    return x.indexType === "FTS" && JSON.stringify([...x.columns]) === '["s"]' ? null : `listed as ${x.indexType} on ${JSON.stringify(x.columns)}`;
  });
  await run("index-stats", async () => {
    const g = await gt.indexStats(spec.index);
    const e = await et.indexStats(spec.index);
    if (g == null) return "no statistics";
    // After an engine step (no counts given) every row is indexed.
    const want = step.indexed == null ? [await gt.countRows(), 0] : [step.indexed, step.unindexed];
    if (g.numIndexedRows !== want[0] || g.numUnindexedRows !== want[1]) {
      return `indexed ${g.numIndexedRows}, unindexed ${g.numUnindexedRows}; want ${want[0]} and ${want[1]}`;
    }
    if (g.numIndexedRows !== e.numIndexedRows || g.numUnindexedRows !== e.numUnindexedRows || g.indexType !== e.indexType) {
      return `gfts ${JSON.stringify(g)}, efts ${JSON.stringify(e)}`;
    }
    return null;
  });
  await run("count", async () => {
    const g = await gt.countRows(), e = await et.countRows();
    return g === e ? null : `gfts ${g} rows, efts ${e}`;
  });
  await compareQueries(spec, gt, et, run, log, "");
}
