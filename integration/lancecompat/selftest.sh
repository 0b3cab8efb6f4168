#!/usr/bin/env bash
# Self-test of compat.mjs against the official engine alone (no Go involved):
#   write -> verify (engine reads back what it recorded) -> mutate -> verify post-mutate state
#   -> verify must catch corrupted expectations -> bench.
# Usage: ./selftest.sh   (KEEP=1 keeps the temp dir)
set -euo pipefail
cd "$(dirname "$0")"
[ -d node_modules/@lancedb/lancedb ] || { echo "run 'npm ci' in $(pwd) first" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lancecompat-selftest.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi
W="$tmp/w"
fail() { echo "SELFTEST FAIL: $*" >&2; exit 1; }

# all_ok FILE N: FILE has exactly N lines and every one is ok:true
all_ok() {
  local total ok
  total=$(wc -l <"$1"); ok=$(grep -c '"ok":true' "$1" || true)
  [ "$total" -eq "$2" ] && [ "$ok" -eq "$2" ] || { cat "$1"; fail "$1: expected $2 ok lines, got $ok ok of $total"; }
}

echo "== write"
node compat.mjs write "$W" | tee "$tmp/write.out"
all_ok "$tmp/write.out" 5
ncases=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).cases.length)' "$W/cases.json")

echo "== verify ($ncases cases written by the official engine)"
node compat.mjs verify "$W" | tee "$tmp/verify.out"
all_ok "$tmp/verify.out" "$ncases"

echo "== mutate"
cat >"$W/mutate.json" <<'EOF'
{"steps":[
 {"name":"m-alltypes-append","table":"alltypes","branch":null,"op":"append","rows":[
   {"id":"200","s":"new","s_nn":"x","ls":"large-new","b":"AQID","lb":"","flag":true,"i8":-1,"i16":2,"u8":3,"u16":4,
    "i32":5,"i32_nn":6,"i64":"-7","u32":8,"u64":"18446744073709551615","f32":1.5,"f64":2.25,"f64_nn":0,"d32":1,
    "d64":86400000,"ts":"1700000000000001","ts_tz":"-1","vec":[1,2,3,4],"ls_utf8":["p",null],
    "ls_i64":["9223372036854775807"],"ls_f64":[],"ls_bool":[null],"ls_d32":null},
   {"id":"201","s_nn":"y","i32_nn":7,"f64_nn":1}]},
 {"name":"m-alltypes-delete","table":"alltypes","branch":null,"op":"delete","where":"id = 200"},
 {"name":"m-alltypes-update","table":"alltypes","op":"update","where":"id = 201","values":{"s":"'zz'","i32":"i32_nn + 1"}},
 {"name":"m-feat-append","table":"branched","branch":"feat","op":"append","rows":[{"id":"300","name":"on-feat","val":0.5}]},
 {"name":"m-main-delete","table":"branched","branch":null,"op":"delete","where":"id = 0"},
 {"name":"m-feat-update","table":"branched","branch":"feat","op":"update","where":"id = 1","values":{"name":"'feat-upd'"}},
 {"name":"m-update-nomatch","table":"branched","op":"update","where":"id = 9999","values":{"name":"'q'"}},
 {"name":"m-ocompact-optimize","table":"ocompact","op":"optimize"},
 {"name":"neg-int64-as-number","table":"branched","op":"append","rows":[{"id":5,"name":"x","val":1}]},
 {"name":"neg-unknown-column","table":"branched","op":"append","rows":[{"id":"6","zzz":1}]},
 {"name":"neg-bad-sql","table":"branched","op":"delete","where":"nosuch = 1"}
]}
EOF
node compat.mjs mutate "$W" 2>/dev/null | tee "$tmp/mutate.out"
for want in \
  '{"case":"m-alltypes-append","ok":true,"version":5}' \
  '{"case":"m-alltypes-delete","ok":true,"version":6}' \
  '{"case":"m-alltypes-update","ok":true,"version":7}' \
  '{"case":"m-feat-append","ok":true,"version":3}' \
  '{"case":"m-main-delete","ok":true,"version":2}' \
  '{"case":"m-feat-update","ok":true,"version":4}' \
  '{"case":"m-update-nomatch","ok":true,"version":3}' \
  '{"case":"m-ocompact-optimize","ok":true,"version":34}'; do
  grep -Fxq "$want" "$tmp/mutate.out" || fail "mutate: missing line $want"
done
for neg in neg-int64-as-number neg-unknown-column neg-bad-sql; do
  grep -q "^{\"case\":\"$neg\",\"ok\":false,\"error\":\"..*\"}$" "$tmp/mutate.out" || fail "mutate: $neg should fail with an error"
done
[ "$(wc -l <"$tmp/mutate.out")" -eq 11 ] || fail "mutate: expected 11 lines"

echo "== verify after mutate"
mv "$W/cases.json" "$tmp/cases.write.json"
node - "$tmp/cases.write.json" "$W/mutate.json" "$W/cases.json" <<'EOF'
const fs = require("fs");
const [written, mutate, out] = process.argv.slice(2);
const cases = JSON.parse(fs.readFileSync(written)).cases;
const steps = JSON.parse(fs.readFileSync(mutate)).steps;
const byName = (n) => cases.find((c) => c.name === n);
const cols = Object.keys(byName("alltypes-v4").rows[0]);
const full = (r) => Object.fromEntries(cols.map((k) => [k, r[k] ?? null]));
const [r200, r201] = steps[0].rows.map(full);
const v4 = byName("alltypes-v4").rows;
const feat = byName("branched-feat-v2").rows;
const oc = cases.find((c) => c.table === "ocompact");
const main = byName("branched-main-v1").rows;
const res = [
  { name: "post-alltypes-v5", table: "alltypes", branch: null, version: 5, count: 26, rows: [...v4, r200, r201],
    columns: ["id", "ls_bool", "ls_d32", "vec"], filters: [{ where: "id >= 200", ids: ["200", "201"] }] },
  { name: "post-alltypes-v7", table: "alltypes", branch: null, version: 7, count: 25,
    rows: [...v4, { ...r201, s: "zz", i32: 8 }], filters: [{ where: "s = 'zz'", ids: ["201"] }] },
  { name: "post-branched-main", table: "branched", branch: null, version: null, count: 4,
    rows: main.filter((r) => r.id !== "0") },
  { name: "post-branched-feat-v4", table: "branched", branch: "feat", version: 4, count: 8,
    rows: [...feat, { id: "300", name: "on-feat", val: 0.5 }].map((r) => (r.id === "1" ? { ...r, name: "feat-upd" } : r)),
    filters: [{ where: "name = 'feat-upd'", ids: ["1"] }] },
  // compaction (optimize) keeps every row, its stable row id, its versions and the order
  { ...oc, name: "post-ocompact-optimized", version: 34 },
];
// negative controls: verify must notice these (a vacuous verifier would pass them)
const bad1 = JSON.parse(JSON.stringify(res[1])); bad1.name = "neg-value"; bad1.rows[0].ls_i64 = ["0"];
const bad2 = JSON.parse(JSON.stringify(res[3])); bad2.name = "neg-filter"; bad2.filters[0].ids = ["1", "2"];
const bad3 = { ...res[2], name: "neg-count", count: 5, rows: undefined };
const bad4 = JSON.parse(JSON.stringify(res[4])); bad4.name = "neg-rowid"; bad4.meta[2]._rowid = "999";
const bad5 = JSON.parse(JSON.stringify(res[4])); bad5.name = "neg-order"; bad5.meta.push(bad5.meta.shift());
fs.writeFileSync(out, JSON.stringify({ cases: [...res, bad1, bad2, bad3, bad4, bad5] }));
EOF
node compat.mjs verify "$W" 2>/dev/null | tee "$tmp/verify2.out"
grep '"case":"post-' "$tmp/verify2.out" >"$tmp/verify2.pos"
all_ok "$tmp/verify2.pos" 5
[ "$(grep -c '"case":"neg-[a-z]*","ok":false,"error":"..*"' "$tmp/verify2.out")" -eq 5 ] || fail "verify did not flag all 5 negative controls"

echo "== bench"
node compat.mjs bench "$tmp/bench" --rows 1000 --iters 3 | tee "$tmp/bench.out"
node -e '
const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const ok = o.rows === 1000 && o.iters === 3 && o.total_rows === 4000 && o.append_ms.length === 3 && o.scan_ms.length === 3
  && typeof o.append_p50_ms === "number" && typeof o.scan_p50_ms === "number";
if (!ok) { console.error("bad bench output"); process.exit(1); }' "$tmp/bench.out" || fail "bench output"

echo "SELFTEST PASS"
