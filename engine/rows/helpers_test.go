package rows

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
)

const testDomain = "01ARZ3NDEKTSV4RRFFQ69G5FAV"

// allTypes populates every property type, nullable and not, scalar and list.
const allTypes = `
node Thing {
    name: String @key
    s: String?
    b: Bool?
    i32: I32?
    i64: I64?
    u32: U32?
    u64: U64?
    f32: F32?
    f64: F64?
    d: Date?
    dt: DateTime?
    blob: Blob?
    vec: Vector(3)?
    e: enum(b, a)?
    ls: [String]?
    lb: [Bool]?
    li32: [I32]?
    li64: [I64]?
    lu32: [U32]?
    lu64: [U64]?
    lf32: [F32]?
    lf64: [F64]?
    ld: [Date]?
    ldt: [DateTime]?
    req: I32
    rvec: Vector(2)
    rblob: Blob
    rlist: [String]
}

node Free {
    v: String? @unique
    n: I32?
}

edge Link: Thing -> Thing {
    w: F64?
    @unique(src, dst)
}

edge Loose: Free -> Free
`

var (
	catMu    sync.Mutex
	catCache = map[string]*pg.Catalog{}
)

// catalog compiles a schema source (cached) for a fresh graph.
func catalog(t testing.TB, src string) *pg.Catalog {
	t.Helper()
	catMu.Lock()
	defer catMu.Unlock()
	if c := catCache[src]; c != nil {
		return c
	}
	c, err := pg.InitContract(src, testDomain)
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	catCache[src] = c.Catalog
	return c.Catalog
}

// parse frames batch lines with the strict parser.
func parse(t testing.TB, lines ...string) []framing.Record {
	t.Helper()
	recs, err := framing.ParseBytes([]byte(strings.Join(lines, "\n")), framing.DefaultLimits())
	if err != nil {
		t.Fatalf("framing: %v", err)
	}
	return recs
}

// counterIDs returns a deterministic NewID.
func counterIDs() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("gen-%04d", n) }
}

// run builds with a checked allocator and releases everything at the end of the test,
// asserting no Arrow memory leaked (also on error paths).
func run(t testing.TB, src string, mode Mode, opts Options, lines ...string) (map[string]*TableBatch, error) {
	t.Helper()
	return runRecs(t, catalog(t, src), mode, opts, parse(t, lines...))
}

func runRecs(t testing.TB, cat *pg.Catalog, mode Mode, opts Options, recs []framing.Record) (map[string]*TableBatch, error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	opts.Mem = mem
	if opts.NewID == nil {
		opts.NewID = counterIDs()
	}
	out, err := Build(cat, recs, mode, opts)
	if err != nil && out != nil {
		t.Fatalf("Build returned batches with an error")
	}
	t.Cleanup(func() {
		for _, b := range out {
			b.Release()
		}
		mem.AssertSize(t, 0)
	})
	return out, err
}

func mustRun(t testing.TB, src string, mode Mode, lines ...string) map[string]*TableBatch {
	t.Helper()
	out, err := run(t, src, mode, Options{}, lines...)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return out
}

// wantInvalid asserts an *errs.InvalidInput with exactly this line, field and reason.
func wantInvalid(t testing.TB, err error, line int, field, reason string) {
	t.Helper()
	var in *errs.InvalidInput
	if !errors.As(err, &in) {
		t.Fatalf("want *errs.InvalidInput %q, got %T %v", reason, err, err)
	}
	if in.Line != line || in.Field != field || in.Reason != reason {
		t.Fatalf("got line %d field %q reason %q\nwant line %d field %q reason %q", in.Line, in.Field, in.Reason, line, field, reason)
	}
}

// wantLimit asserts a *errs.ResourceLimitExceeded (on line when line > 0).
func wantLimit(t testing.TB, err error, line int, resource string, limit, actual uint64) {
	t.Helper()
	var rl *errs.ResourceLimitExceeded
	if !errors.As(err, &rl) {
		t.Fatalf("want *errs.ResourceLimitExceeded %s, got %T %v", resource, err, err)
	}
	if rl.Resource != resource || rl.Limit != limit || rl.Actual != actual {
		t.Fatalf("got %+v, want %s limit %d actual %d", *rl, resource, limit, actual)
	}
	var le *errs.LineError
	gotLine := 0
	if errors.As(err, &le) {
		gotLine = le.Line
	}
	if gotLine != line {
		t.Fatalf("limit error on line %d, want %d", gotLine, line)
	}
}

func wantKeyConflict(t testing.TB, err error, line int, typeKey, id string) {
	t.Helper()
	var kc *errs.KeyConflict
	if !errors.As(err, &kc) {
		t.Fatalf("want *errs.KeyConflict, got %T %v", err, err)
	}
	if kc.TypeKey != typeKey || kc.EntityID == nil || *kc.EntityID != id {
		t.Fatalf("got KeyConflict %s %v, want %s %s", kc.TypeKey, kc.EntityID, typeKey, id)
	}
	var le *errs.LineError
	if !errors.As(err, &le) || le.Line != line {
		t.Fatalf("KeyConflict not placed on line %d: %v", line, err)
	}
}

// col returns the values of a column of a batch via Export-style rendering, for compact
// assertions: the JSON text of each row's value.
func colJSON(t testing.TB, b *TableBatch, name string) []string {
	t.Helper()
	idx := b.Record.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %s", name)
	}
	arr := b.Record.Column(idx[0])
	out := make([]string, arr.Len())
	for i := range out {
		v, err := appendValue(nil, arr, i)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(v)
	}
	return out
}

// thing renders a Thing line of allTypes with the required members and extra data.
func thing(name string, extra string) string {
	data := fmt.Sprintf(`"name":%q,"req":1,"rvec":[1,2],"rblob":"base64:","rlist":[]`, name)
	if extra != "" {
		data += "," + extra
	}
	return `{"type":"Thing","data":{` + data + `}}`
}

// thingKV renders a Thing line whose member key has the JSON value (replacing a required
// member's default).
func thingKV(name, key, value string) string {
	members := [][2]string{{"name", fmt.Sprintf("%q", name)}, {"req", "1"}, {"rvec", "[1,2]"}, {"rblob", `"base64:"`}, {"rlist", "[]"}}
	found := false
	for i := range members {
		if members[i][0] == key {
			members[i][1], found = value, true
		}
	}
	if !found {
		members = append(members, [2]string{key, value})
	}
	parts := make([]string, len(members))
	for i, m := range members {
		parts[i] = fmt.Sprintf("%q:%s", m[0], m[1])
	}
	return `{"type":"Thing","data":{` + strings.Join(parts, ",") + `}}`
}
