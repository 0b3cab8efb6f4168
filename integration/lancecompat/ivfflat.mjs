// Vector index checks of an idxverify case (indices.mjs), for the IVF_FLAT index the Go package
// builds (driver/ivfflat.go):
//
//   "ann":         nearest queries the engine must answer through the named index, without a
//                  refine step (so the distances are the ones the index's stored vectors give),
//                  with or without a filter; the result must equal, ids and distances, both an
//                  exact scan computed here and the engine's own brute force
//                  (bypassVectorIndex), and the plan must name the index;
//   "index_stats": what listIndices and indexStats report of an index: its type, distance type,
//                  and how many rows it covers and does not.

// annPlanUses says whether an explainPlan text answers a nearest query from the named vector
// index: an ANN sub-index node naming it over an IVF partition node.
export function annPlanUses(plan, index) {
  return plan.includes(`ANNSubIndex: name=${index},`) && plan.includes("ANNIvfPartition:");
}

// verifyVectorIndex runs the "ann" and "index_stats" checks of case c on tbl. truth holds the
// rows of a plain scan (canonical); h: { check, checkNearest, l2sq, rowOf, scalarPredicate,
// toCanonical, onTie }.
export async function verifyVectorIndex(tbl, c, truth, h) {
  const { check, checkNearest, l2sq, rowOf, scalarPredicate, toCanonical, onTie } = h;
  const cmpId = (a, b) => { const x = BigInt(a), y = BigInt(b); return x < y ? -1 : x > y ? 1 : 0; };
  for (const a of c.ann ?? []) {
    const label = `ann ${a.column} to row ${a.query_id} k=${a.k}${a.where ? ` where ${a.where}` : ""} via ${a.index}`;
    const pred = a.where ? scalarPredicate(a.where) : () => true;
    if (!pred) {
      await check(label, async () => `unsupported clause shape ${JSON.stringify(a.where)}`);
      continue;
    }
    const qv = rowOf(a.query_id)[a.column];
    const scored = truth.filter((r) => r[a.column] != null && pred(r)).map((r) => ({ id: r.id, d: l2sq(qv, r[a.column]) }));
    scored.sort((x, y) => x.d - y.d || cmpId(x.id, y.id));
    const distOf = new Map(scored.map((x) => [x.id, x.d]));
    const query = () => {
      let q = tbl.query().nearestTo(qv).column(a.column).distanceType("l2").limit(a.k);
      if (a.where) q = q.where(a.where);
      return q;
    };
    let viaIndex = null, brute = null;
    await check(`${label} (index)`, async () => {
      viaIndex = toCanonical(await query().select(["id", "_distance"]).toArrow());
      return checkNearest(viaIndex, scored, distOf, a.k, onTie);
    });
    await check(`${label} (bypassVectorIndex)`, async () => {
      brute = toCanonical(await query().bypassVectorIndex().select(["id", "_distance"]).toArrow());
      return checkNearest(brute, scored, distOf, a.k, onTie);
    });
    if (viaIndex && brute) {
      await check(`${label} (index = brute force)`, async () => {
        if (viaIndex.length !== brute.length) return `index returned ${viaIndex.length} rows, brute force ${brute.length}`;
        for (let i = 0; i < brute.length; i++) {
          const x = viaIndex[i], y = brute[i];
          // The same rows at the same distances; rows at one distance may come in either order.
          if (Math.abs(x._distance - y._distance) > 1e-6 * Math.max(1, Math.abs(y._distance))) {
            return `position ${i}: index id ${x.id} _distance ${x._distance}, brute force id ${y.id} _distance ${y._distance}`;
          }
        }
        // Rows tied at the k-th distance may be chosen either way; every row nearer must agree.
        const ids = (rs) => rs.map((r) => r.id).sort().join(",");
        const edge = brute.length > 0 ? brute[brute.length - 1]._distance : 0;
        const inner = (rs) => rs.filter((r) => r._distance < edge - 1e-6 * Math.max(1, edge)).map((r) => r.id).sort().join(",");
        return ids(viaIndex) === ids(brute) || inner(viaIndex) === inner(brute)
          ? null
          : `index ids ${JSON.stringify(viaIndex.map((r) => r.id))}, brute force ${JSON.stringify(brute.map((r) => r.id))}`;
      });
    }
    await check(`${label} (plan)`, async () => {
      const plan = await query().select(["id", "_distance"]).explainPlan(true);
      return annPlanUses(plan, a.index) ? null : `the plan does not search ${a.index}: ${plan.replace(/\s+/g, " ")}`;
    });
  }

  for (const s of c.index_stats ?? []) {
    await check(`listIndices type of ${s.name}`, async () => {
      const x = (await tbl.listIndices()).find((y) => y.name === s.name);
      if (!x) return "not listed";
      return x.indexType === s.list_type ? null : `indexType ${x.indexType}, expected ${s.list_type}`;
    });
    await check(`indexStats ${s.name} counts`, async () => {
      const st = await tbl.indexStats(s.name);
      if (!st) return "no stats";
      const got = { indexType: st.indexType, distanceType: st.distanceType, numIndexedRows: st.numIndexedRows, numUnindexedRows: st.numUnindexedRows };
      const want = { indexType: s.index_type, distanceType: s.distance_type, numIndexedRows: s.num_indexed_rows, numUnindexedRows: s.num_unindexed_rows };
      return JSON.stringify(got) === JSON.stringify(want) ? null : `got ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`;
    });
  }
}
