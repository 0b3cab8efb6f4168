package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// Mode is a load mode.
type Mode = rows.Mode

// Load modes (the wire spelling).
const (
	ModeAppend    = rows.Mode("append")
	ModeMerge     = rows.Mode("merge")
	ModeOverwrite = rows.Mode("overwrite")
)

// MaxReprepares bounds how often an append or merge load reprepares after the branch's
// authority moved before it armed recovery.
const MaxReprepares = 32

// LoadRequest is one graph batch to apply as one graph commit.
type LoadRequest struct {
	Branch string // "" or "main" for main
	// From forks Branch from this base when Branch does not exist yet (a separate step: the
	// branch stays if the load then fails).
	From    string
	Mode    rows.Mode
	Actor   string
	Records []framing.Record
	// Receipt, when set, is written in the same publish; a batch whose receipt is already
	// visible on the branch is not applied again.
	Receipt *publisher.Receipt
	// Built, when set, is Records already validated and turned into Arrow rows by Build
	// (ahead of the load, while an earlier batch commits). The first prepare uses it if it was
	// built against the graph's current catalog and this mode; any later attempt builds anew.
	Built *Built
}

// Built is a batch's rows built ahead of its load. Building reads only the records and the
// schema catalog, never the graph's data, so it cannot go stale while earlier batches commit;
// everything that reads the graph (receipts, keys, unique, references) still runs in Load. An
// append's or a merge's data files are encoded too, for the tables' last known schemas
// (encode.go): Load stages them only if its tables still have those.
type Built struct {
	catalog *pg.Catalog
	mode    rows.Mode
	batches map[string]*rows.TableBatch
	encoded map[string]*lance.Encoded // by table key: data files encoded ahead (encode.go)
}

// Build validates req's records against the catalog and builds their Arrow rows, as the
// first step of Load would. An error here is not final: Load builds again and reports it in
// its own order (a batch already applied is recognised before its rows are looked at).
func (g *Graph) Build(req LoadRequest) (*Built, error) {
	cat := g.Catalog()
	b, err := rows.Build(cat, req.Records, req.Mode, rows.Options{NewID: ids.NewULID, Parallel: TableConcurrency})
	if err != nil {
		return nil, err
	}
	return &Built{catalog: cat, mode: req.Mode, batches: b, encoded: g.encodeAhead(req, b)}, nil
}

// Bytes is about how much memory the built rows hold: their Arrow buffers and the ids kept
// beside them. A pipeline counts it against its bound on what it holds ahead.
func (b *Built) Bytes() int64 {
	if b == nil {
		return 0
	}
	var n int64
	for _, tb := range b.batches {
		for _, col := range tb.Record.Columns() {
			n += arrayDataBytes(col.Data())
		}
		for _, ids := range [][]string{tb.IDs, tb.Src, tb.Dst} {
			for _, id := range ids {
				n += int64(len(id)) + 16 // the string header
			}
		}
		n += int64(8 * len(tb.Lines))
	}
	for _, e := range b.encoded {
		n += e.Bytes()
	}
	return n
}

// arrayDataBytes is the capacity of an array's buffers and its children's: a builder grows
// them by doubling, so what they hold is up to twice their length (for a 23 MiB batch of 8,192
// rows the lengths said 23 MiB where the heap held 33).
func arrayDataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Cap())
		}
	}
	for _, c := range d.Children() {
		n += arrayDataBytes(c)
	}
	return n
}

// TypeCount is the number of input records of one declaration.
type TypeCount struct {
	Name           string `json:"name"`
	EntitiesLoaded int    `json:"entities_loaded"`
}

// CommitInfo describes a published graph commit.
type CommitInfo struct {
	GraphCommitID        string  `json:"graph_commit_id"`
	GraphBranch          *string `json:"graph_branch"`
	GraphManifestVersion uint64  `json:"graph_manifest_version"`
	ParentCommitID       *string `json:"parent_commit_id"`
	MergedParentCommitID *string `json:"merged_parent_commit_id"`
	ActorID              *string `json:"actor_id"`
	CreatedAt            int64   `json:"created_at"`
}

// LoadResult is the load receipt.
type LoadResult struct {
	Branch         string      `json:"branch"`
	Mode           rows.Mode   `json:"mode"`
	Nodes          []TypeCount `json:"nodes"`
	Edges          []TypeCount `json:"edges"`
	TotalEntities  int         `json:"total_entities"`
	ActorID        *string     `json:"actor_id"`
	Commit         CommitInfo  `json:"commit"`
	AlreadyApplied bool        `json:"already_applied,omitempty"`
}

// prepared is one attempt's plan: everything validated and staged, nothing visible.
type prepared struct {
	state      *publisher.State
	identifier lance.BranchIdentifier
	head       *string
	tables     []*plannedTable
	result     *LoadResult
	// revalidated is the snapshot revalidate checked the authority against: the publish
	// starts from it instead of probing __manifest again (publisher.Request.Known).
	revalidated *publisher.State
}

type plannedTable struct {
	key        string
	entry      publisher.TableEntry
	ts         *tableState
	batch      *rows.TableBatch
	encoded    *lance.Encoded // its data files encoded ahead, or nil (encode.go)
	staged     *lance.Staged  // nil for a first-touch table: staged on its new ref after arming
	uuid       string
	firstTouch bool
	committed  *lance.Dataset
}

func (p *plannedTable) identity() ids.TableIdentity { return p.entry.Identity }

// ref is the cache key of the table state the load committed: its path on the branch the
// commit landed on.
func (p *plannedTable) ref() tableRef {
	return tableRef{path: p.entry.Path, branch: p.committed.Branch()}
}

// Load applies one graph batch as exactly one graph commit: prepare (validate and stage),
// revalidate the branch authority beside arming the recovery sidecar, commit each table
// exactly, confirm, publish, retire the sidecar. Errors before the table commits leave nothing
// behind but unreferenced files (a sidecar armed beside a revalidation that failed is taken
// back); any error after them is *errs.RecoveryRequired and the sidecar stays.
func (g *Graph) Load(ctx context.Context, req LoadRequest) (*LoadResult, error) {
	switch req.Mode {
	case ModeAppend, ModeMerge, ModeOverwrite:
	default:
		return nil, &errs.InvalidInput{Field: "mode", Reason: fmt.Sprintf("unknown load mode %q (want append, merge or overwrite)", req.Mode)}
	}
	if err := CheckBranchName("branch", req.Branch); err != nil {
		return nil, err
	}
	if err := CheckBranchName("from", req.From); err != nil {
		return nil, err
	}
	req.Branch = normBranch(req.Branch)
	// A load that prepares on what this writer holds (speculative, below) and forks no branch
	// defers enter's catch-up (the heal, the schema) to its revalidation: before that nothing
	// is written, and a sidecar or a moved schema seen there sends the load to catch up and
	// prepare again, so the catch-up costs no storage round trip of its own.
	speculative := req.Mode != ModeOverwrite
	deferred := speculative && req.From == ""
	var release func()
	var err error
	if deferred {
		g.writeMu.Lock()
		release = g.writeMu.Unlock
	} else if release, err = g.enter(ctx, req.Branch); err != nil {
		return nil, err
	}
	defer release()
	if req.Branch != "" && req.From != "" {
		if err := g.createBranch(ctx, req.Branch, req.From); err != nil && !errors.Is(err, ErrBranchExists) {
			return nil, err
		}
	}
	// A preparation is speculative: on what this writer holds, without asking storage for
	// newer versions of __manifest or of the tables. The revalidation asks for both, in the one
	// round trip it shares with the recovery barrier; a change it finds sends the load back to
	// prepare again, on the state it read. A refusal is judged once more on what storage holds
	// before it stands. An overwrite, which may not prepare again past a moved head, is never
	// speculative.
	for attempt := 0; ; attempt++ {
		p, err := g.prepare(ctx, &req, speculative)
		req.Built = nil // rows built ahead serve the first attempt only
		if err != nil && speculative && ctx.Err() == nil {
			speculative, attempt = false, attempt-1
			continue
		}
		if err != nil && deferred && ctx.Err() == nil {
			// A refusal stands only on a graph caught up: a dead writer's confirmed intent
			// could still change what this batch finds (an overwrite that removed the key it
			// conflicts on), and so could a schema another writer applied (a new property).
			changed, cerr := g.catchUp(ctx, req.Branch)
			if cerr != nil {
				return nil, cerr
			}
			deferred = false
			if changed {
				speculative, attempt = true, attempt-1
				continue
			}
		}
		if err != nil || p.result != nil && p.result.AlreadyApplied {
			return resultOrNil(p), err
		}
		if err := failpoint.Inject("load.after_prepare"); err != nil {
			return nil, err
		}
		// The revalidation runs beside the sidecar and the staged files: nothing it guards
		// moves before the table commits, and a failure takes the intent back. A writer
		// that left an intent for recovery expects to heal, and revalidates first: nothing
		// is written before the heal then. So does one whose last load met a drift.
		revalidate := func(ctx context.Context) error { return g.revalidate(ctx, &req, p, deferred) }
		var res *LoadResult
		if !g.revalidatesFirst() {
			res, err = g.effect(ctx, &req, p, revalidate)
		} else if err = revalidate(ctx); err == nil {
			res, err = g.effect(ctx, &req, p, nil)
		}
		var drift *DriftError
		g.drifted.Store(errors.As(err, &drift))
		if errors.Is(err, errCatchUp) {
			// Caught up once: the rest of the write checks the barrier as one that entered
			// with enter does.
			if _, err := g.catchUp(ctx, req.Branch); err != nil {
				return nil, err
			}
			deferred, speculative, attempt = false, true, attempt-1
			continue
		}
		var rsc *errs.ReadSetChanged
		if errors.As(err, &rsc) && req.Mode != ModeOverwrite && attempt < MaxReprepares {
			continue
		}
		if err != nil {
			return nil, err
		}
		return res, nil
	}
}

// caughtUp is the catch-up a write prepared on the held state defers to its revalidation
// (Graph.catchUp's reads, side by side): errCatchUp when __recovery lists a sidecar other than
// the one being armed beside it, or the accepted schema is not the one this writer holds.
func (g *Graph) caughtUp(ctx context.Context) error {
	var schemaRaw []byte
	var schemaErr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		schemaRaw, schemaErr = g.root.Get(ctx, pg.SchemaStateFile)
	}()
	listed, err := g.listPending(ctx)
	<-read
	switch {
	case err != nil:
		return err
	case len(listed) > 0, schemaErr != nil, g.schemaMoved(schemaRaw):
		return errCatchUp // catchUp reads the schema again and reports what is wrong with it
	}
	return nil
}

// revalidatesFirst says a write prepared on the held state revalidates before it arms, not
// beside: this writer left an intent for recovery (it expects to heal) or its last write met a
// drift (it expects to be refused), and writes nothing first.
func (g *Graph) revalidatesFirst() bool { return g.unresolved.Load() || g.drifted.Load() }

// stillPublished is nil when st publishes table key at version, the version a write read,
// and the ReadSetChanged naming it otherwise.
func stillPublished(st *publisher.State, key string, version uint64) error {
	if cur, ok := st.Table(key); ok && cur.Version == version {
		return nil
	}
	e := fmt.Sprint(version)
	return &errs.ReadSetChanged{Member: "published_dataset_version:" + key, Expected: &e}
}

// errCatchUp: the revalidation of a load that deferred its catch-up listed a sidecar or read a
// schema other than the accepted one this writer holds; the load catches up (Graph.catchUp)
// and prepares again.
var errCatchUp = errors.New("engine: a recovery sidecar is listed or the schema moved: catch up before the write")

func resultOrNil(p *prepared) *LoadResult {
	if p == nil {
		return nil
	}
	return p.result
}

// prepare captures the authority token and a snapshot, builds and validates the batch, and
// stages one Lance transaction per touched table. Nothing becomes visible. cached prepares on
// the state this writer holds, when it holds one, and leaves the drift checks to the
// revalidation: no storage round trip of its own on a warm graph.
func (g *Graph) prepare(ctx context.Context, req *LoadRequest, cached bool) (*prepared, error) {
	pub := g.publisher(req.Branch)
	var err error
	st := pub.Cached()
	if !cached || st == nil {
		if st, err = pub.Snapshot(ctx); err != nil {
			return nil, err
		}
		cached = false
	}
	p := &prepared{state: st}
	if req.Receipt != nil {
		// By key, and under a rule by the key older builds wrote (publisher.State.ReceiptFor).
		rc, ok, err := st.ReceiptFor(ctx, req.Receipt)
		if err != nil {
			return nil, err
		}
		if ok {
			if err := sameBody(req.Receipt, rc); err != nil {
				return nil, err
			}
			p.result, err = g.appliedResult(ctx, req, st, rc)
			return p, err
		}
	}
	if p.identifier, err = pub.BranchIdentifier(ctx); err != nil {
		return nil, err
	}
	if h, ok := st.Head(req.Branch); ok {
		p.head = &h
	}
	var batches map[string]*rows.TableBatch
	var encoded map[string]*lance.Encoded
	if b := req.Built; b != nil && b.catalog == g.Catalog() && b.mode == req.Mode {
		batches, encoded = b.batches, b.encoded
	} else if batches, err = rows.Build(g.Catalog(), req.Records, req.Mode, rows.Options{NewID: ids.NewULID, Parallel: TableConcurrency}); err != nil {
		return nil, err
	}
	p.result = summarize(req, batches)
	keys := make([]string, 0, len(batches))
	for k := range batches {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		entry, ok := st.Table(k)
		if !ok {
			if req.Branch != "" {
				return nil, staleBranchTable(st, req.Branch, batches[k])
			}
			return nil, fmt.Errorf("load: table %s is not in the manifest of branch %s", k, ids.BranchKey(req.Branch))
		}
		p.tables = append(p.tables, &plannedTable{key: k, entry: entry, batch: batches[k], encoded: encoded[k], uuid: lance.NewUUID(),
			firstTouch: req.Branch != "" && (entry.Branch == nil || *entry.Branch != req.Branch)})
	}
	// The tables are opened (and, on a fresh snapshot, probed for drift) side by side:
	// independent reads, one round trip to storage for all of them rather than one per table.
	if err := g.openPlanned(ctx, p.tables, !cached); err != nil {
		return nil, err
	}
	if req.Branch != "" {
		// A branch forked before a schema apply keeps the columns it was forked with.
		for _, t := range p.tables {
			if d, err := columnsAgainst(t.ts.ds, t.batch.Record.Schema()); err != nil {
				return nil, err
			} else if !d.same() {
				return nil, &StaleBranchError{Branch: req.Branch, TableKey: t.key, Reason: d.String()}
			}
		}
	}
	// The checks against the snapshot run while the tables' files are encoded: encoding only
	// fills memory, so a refused batch still leaves no trace in storage. The files are
	// written in effect, beside the recovery sidecar.
	if req.Mode != ModeAppend {
		// A merge stages its rewrites by the id index, an overwrite replaces it.
		if err := g.settleFolds(); err != nil {
			return nil, err
		}
	}
	validated := make(chan error, 1)
	go func() {
		// The previous load's fold (fold.go) ends while this one encodes its files.
		if err := g.settleFolds(); err != nil {
			validated <- err
			return
		}
		validated <- g.validateAgainstSnapshot(ctx, req, st, p.tables)
	}()
	err = eachTable(p.tables, func(t *plannedTable) error {
		if t.firstTouch {
			return nil // Lance branch-local files can only be staged once the table's ref exists
		}
		var err error
		t.staged, err = stage(ctx, t.ts.ds, req.Mode, t)
		return err
	})
	if verr := <-validated; verr != nil {
		return nil, verr
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// openPlanned opens every planned table at its pin (reusing the cached states) and, with drift,
// checks that none drifted, the tables side by side; the cache takes the opened states once
// all are done.
func (g *Graph) openPlanned(ctx context.Context, tables []*plannedTable, drift bool) error {
	opened := make([]bool, len(tables))
	at := parallel.Indices(len(tables))
	err := parallel.Each(at, TableConcurrency, func(i int) error {
		t := tables[i]
		var err error
		if t.ts, opened[i], err = g.tableState(ctx, t.entry, t.batch.Edge != nil); err != nil || !drift {
			return err
		}
		return checkNoDrift(ctx, t.ts.ds, t.entry)
	})
	for i, t := range tables {
		if opened[i] {
			g.tables[refOf(t.entry)] = t.ts
		}
	}
	return err
}

// TableConcurrency bounds how many tables one load encodes or commits at once.
const TableConcurrency = 8

// eachTable runs fn for every table, TableConcurrency at a time, and returns the first error
// in table order. Tables are independent datasets, so their files and commits do not conflict.
func eachTable(tables []*plannedTable, fn func(*plannedTable) error) error {
	return parallel.Each(tables, TableConcurrency, fn)
}

// stage builds a table's transaction: append is the certified insert-only Update, merge
// rewrites the rows whose ids exist (an all-new merge is certified too), overwrite replaces
// the table (no rows: a zero-fragment overwrite).
func stage(ctx context.Context, ds *lance.Dataset, mode rows.Mode, t *plannedTable) (*lance.Staged, error) {
	recs := []arrow.Record{t.batch.Record}
	opts := lance.StageOptions{UUID: t.uuid, InlineTransactionOnly: true}
	certified := map[string]string{lance.InsertAbsenceProperty: "v1"}
	switch mode {
	case ModeAppend:
		opts.Properties = certified
		return stageInsertOnly(ctx, ds, t, opts)
	case ModeMerge:
		var remove []lance.RowAddress
		for _, id := range t.batch.IDs {
			if a, ok := t.ts.ids.Get(id); ok {
				remove = append(remove, a)
			}
		}
		if len(remove) == 0 {
			opts.Properties = certified
			return stageInsertOnly(ctx, ds, t, opts)
		}
		if encodedUsable(t.encoded) {
			if st, ok, err := ds.StageRewriteRowsEncoded(ctx, remove, t.encoded, opts); ok || err != nil {
				return st, err
			}
		}
		return ds.StageRewriteRows(ctx, remove, recs, opts)
	default:
		if t.batch.Record.NumRows() == 0 {
			recs = nil
		}
		return ds.StageOverwrite(ctx, nil, recs, opts)
	}
}

// stageInsertOnly stages t's rows as new fragments, from the files encoded (and written) ahead
// when they suit ds, else encoded now.
func stageInsertOnly(ctx context.Context, ds *lance.Dataset, t *plannedTable, opts lance.StageOptions) (*lance.Staged, error) {
	if encodedUsable(t.encoded) {
		if st, ok := ds.StageInsertOnlyUpdateEncoded(t.encoded, opts); ok {
			return st, nil
		}
	}
	return ds.StageInsertOnlyUpdate(ctx, []arrow.Record{t.batch.Record}, opts)
}

// encodedUsable reports whether files encoded ahead may still be staged: files written ahead
// only while younger than writtenAheadMaxAge.
func encodedUsable(e *lance.Encoded) bool {
	w := e.WrittenAt()
	return w.IsZero() || time.Since(w) < writtenAheadMaxAge
}

func summarize(req *LoadRequest, batches map[string]*rows.TableBatch) *LoadResult {
	r := &LoadResult{Branch: ids.BranchKey(req.Branch), Mode: req.Mode, Nodes: []TypeCount{}, Edges: []TypeCount{}}
	if req.Actor != "" {
		a := req.Actor
		r.ActorID = &a
	}
	for k, b := range batches {
		c := TypeCount{Name: k[strings.IndexByte(k, ':')+1:], EntitiesLoaded: b.InputCount}
		if b.Edge != nil {
			r.Edges = append(r.Edges, c)
		} else {
			r.Nodes = append(r.Nodes, c)
		}
		r.TotalEntities += b.InputCount
	}
	sort.Slice(r.Nodes, func(i, j int) bool { return r.Nodes[i].Name < r.Nodes[j].Name })
	sort.Slice(r.Edges, func(i, j int) bool { return r.Edges[i].Name < r.Edges[j].Name })
	return r
}

// appliedResult describes a batch whose receipt is already visible: nothing is written again.
// sameBody refuses a message whose id names a receipt of another body (*errs.MsgIDReused).
// Either hash may be absent (a receipt written without one, a direct load): then the id alone
// decides, as it did before hashes were kept.
func sameBody(msg *publisher.Receipt, rc publisher.Receipt) error {
	if msg.PayloadSHA256 == "" || rc.PayloadSHA256 == "" || msg.PayloadSHA256 == rc.PayloadSHA256 {
		return nil
	}
	return &errs.MsgIDReused{MsgID: msg.ReceiptKey(), PayloadSHA256: msg.PayloadSHA256, AppliedPayloadSHA256: rc.PayloadSHA256, GraphCommitID: rc.GraphCommitID}
}

func (g *Graph) appliedResult(ctx context.Context, req *LoadRequest, st *publisher.State, rc publisher.Receipt) (*LoadResult, error) {
	r := &LoadResult{Branch: ids.BranchKey(req.Branch), Mode: req.Mode, Nodes: []TypeCount{}, Edges: []TypeCount{}, AlreadyApplied: true}
	ci, err := receiptCommit(ctx, st, rc)
	r.Commit = ci
	r.ActorID = r.Commit.ActorID
	return r, err
}

// receiptCommit describes the commit a receipt names (read back when it is no longer cached).
func receiptCommit(ctx context.Context, st *publisher.State, rc publisher.Receipt) (CommitInfo, error) {
	c, ok, err := st.Commit(ctx, rc.GraphCommitID, rc.ManifestVersion)
	if err != nil {
		return CommitInfo{}, err
	}
	if !ok {
		return CommitInfo{GraphCommitID: rc.GraphCommitID, GraphManifestVersion: rc.ManifestVersion}, nil
	}
	return commitInfo(c), nil
}

func commitInfo(c publisher.Commit) CommitInfo {
	return CommitInfo{GraphCommitID: c.ID, GraphBranch: c.Branch, GraphManifestVersion: c.ManifestVersion, CreatedAt: c.Meta.CreatedAt,
		ParentCommitID: optString(c.Meta.ParentCommitID), MergedParentCommitID: optString(c.Meta.MergedParentCommitID), ActorID: optString(c.Meta.ActorID)}
}

// revalidate re-reads the branch authority under the write gate: a pending sidecar, a moved
// branch identifier or head, or a table whose HEAD left its pin fails the attempt before its
// table commits (the sidecar armed beside it is taken back). Its reads are independent of
// each other (each table's drift check probes the version after the pin the attempt planned
// on, whatever the snapshot says), so they are issued together: one round trip to storage
// instead of one per read. The failure reported is the
// one the reads made one after another would have reported first.
//
// deferredHeal: the load has not caught up (Load); the listing of __recovery stands for the
// heal's as well, and the accepted schema is read beside it. Any sidecar listed, or a schema
// other than the one this writer holds, returns errCatchUp.
func (g *Graph) revalidate(ctx context.Context, req *LoadRequest, p *prepared, deferredHeal bool) error {
	pub := g.publisher(req.Branch)
	var (
		barrier, authority error
		st                 *publisher.State
		drift              = make([]error, len(p.tables))
		wg                 sync.WaitGroup
	)
	if deferredHeal {
		wg.Go(func() { barrier = g.caughtUp(ctx) })
	} else {
		wg.Go(func() { barrier = g.recoveryBarrier(ctx, req.Branch) })
	}
	wg.Go(func() {
		if st, authority = pub.Snapshot(ctx); authority == nil {
			authority = pub.CheckExactHead(ctx, st, &publisher.ExactHead{Identifier: p.identifier, Head: p.head})
		}
	})
	for i, t := range p.tables {
		wg.Go(func() { drift[i] = checkNoDrift(ctx, t.ts.ds, t.entry) })
	}
	wg.Wait()
	if barrier != nil {
		return barrier
	}
	if authority != nil {
		return authority
	}
	for i, t := range p.tables {
		if err := cmp.Or(stillPublished(st, t.key, t.entry.Version), drift[i]); err != nil {
			return err
		}
	}
	p.revalidated = st
	return nil
}

// loadPoints are a load's failpoints in the intent skeleton.
var loadPoints = intentPoints{armed: "load.after_sidecar", confirmed: "load.after_confirm",
	beforePublish: "load.before_publish", published: "load.after_publish"}

// effect runs the load's intent (intent.go): the sidecar beside the staged transaction files
// and the revalidation (check), the exact table commits, the confirmation overlapped with the
// publish, the retirement.
func (g *Graph) effect(ctx context.Context, req *LoadRequest, p *prepared, check func(context.Context) error) (*LoadResult, error) {
	commitID := ids.NewULID()
	createdAt := time.Now().UnixMicro()
	var res *LoadResult
	in := &intent{g: g, points: loadPoints, check: check}
	if len(p.tables) == 0 { // an empty batch: a lineage-only commit, nothing to arm
		in.publish = func(ctx context.Context, _ func() error) (err error) {
			res, err = g.publish(ctx, req, p, commitID, createdAt, nil)
			return err
		}
		if err := in.run(ctx); err != nil {
			return nil, err
		}
		return res, nil
	}
	var sc *armedSidecar
	in.arm = func(ctx context.Context) (string, error) {
		var err error
		if sc, err = g.arm(ctx, req, p, commitID, createdAt); err != nil {
			return "", err
		}
		return sc.operationID(), nil
	}
	// Until a table commits, neither the sidecar nor the staged files are referenced by
	// anything a reader follows, so they are written side by side.
	in.stage = func(ctx context.Context) error {
		return eachTable(p.tables, func(t *plannedTable) error {
			if t.staged == nil {
				return nil // a first touch stages on its fork, in commitTable
			}
			return t.staged.WriteTransaction(ctx)
		})
	}
	in.commit = func(ctx context.Context) error {
		return eachTable(p.tables, func(t *plannedTable) error {
			if err := g.commitTable(ctx, req, t); err != nil {
				return err
			}
			return failpoint.Inject("load.after_table_commit")
		})
	}
	// The confirmation is written while the publish stages its files; the publish commits
	// only once it is durable (and the fence still holds). Staged files are invisible until
	// that commit, so the order of visible effects is unchanged.
	in.confirm = func(ctx context.Context) error { return sc.confirm(ctx, p) }
	in.overlapConfirm = true
	in.publish = func(ctx context.Context, gate func() error) error {
		// The id indexes fold the committed rows while the publish runs (the write gate is
		// held, so nothing else reads them); they are kept only if the publish lands, and
		// may still be folding when the load returns (fold.go).
		pf := g.startFold(req, p)
		r, err := g.publish(ctx, req, p, commitID, createdAt, gate)
		if gerr := gate(); err == nil || gerr != nil {
			err = gerr
		}
		if err != nil {
			<-pf.done
			g.dropFolded(pf.fts)
			return err
		}
		g.installFolded(pf, req, p)
		res = r
		return nil
	}
	if err := in.run(ctx); err != nil {
		return nil, err
	}
	return res, nil
}

// commitTable commits one planned transaction exactly and checks the committed identity.
func (g *Graph) commitTable(ctx context.Context, req *LoadRequest, t *plannedTable) error {
	ds := t.ts.ds
	if t.firstTouch {
		forked, err := g.forkOnto(ctx, ds, req.Branch, t.key)
		if err != nil {
			return fmt.Errorf("fork %s onto branch %s: %w", t.key, req.Branch, err)
		}
		if err := failpoint.Inject("load.after_fork"); err != nil {
			return err
		}
		if t.staged, err = stage(ctx, forked, req.Mode, t); err != nil {
			return err
		}
		ds = forked
	}
	committed, err := ds.Commit(ctx, t.staged)
	if err != nil {
		return fmt.Errorf("commit %s: %w", t.key, err)
	}
	// The commit is exact (the version name is created only if absent), so the version it
	// made carries exactly the staged transaction; check the identity it records anyway.
	txn := t.staged.Txn
	if committed.Manifest().TransactionFile != t.staged.TransactionFileName() || txn.UUID != t.uuid || txn.ReadVersion != t.entry.Version || committed.Version() != t.entry.Version+1 {
		return fmt.Errorf("commit %s: version %d records transaction file %q, planned (%d, %s)", t.key, committed.Version(), committed.Manifest().TransactionFile, t.entry.Version, t.uuid)
	}
	t.committed = committed
	return nil
}

// publish is Phase C: one __manifest commit with ExactGraphHead, the expected table versions,
// the lineage and the receipt; beforeCommit is the intent's gate (nil: nothing armed).
func (g *Graph) publish(ctx context.Context, req *LoadRequest, p *prepared, commitID string, createdAt int64, beforeCommit func() error) (*LoadResult, error) {
	preq := publisher.Request{
		Expected:     map[ids.TableIdentity]publisher.Expectation{},
		Lineage:      &publisher.Lineage{CommitID: commitID, ActorID: req.Actor, CreatedAt: createdAt},
		Precondition: &publisher.ExactHead{Identifier: p.identifier, Head: p.head},
		Receipt:      req.Receipt,
		BeforeCommit: beforeCommit,
		Known:        p.revalidated,
	}
	for _, t := range p.tables {
		preq.Updates = append(preq.Updates, tableUpdate(t))
		preq.Expected[t.identity()] = publisher.Expectation{TableKey: t.key, Version: t.entry.Version}
	}
	out, err := g.publisher(req.Branch).Publish(ctx, preq)
	if err != nil {
		return nil, err
	}
	res := p.result
	res.Commit = commitInfo(out.Commit)
	return res, nil
}

func tableUpdate(t *plannedTable) publisher.DatasetUpdate {
	return publisher.DatasetUpdate{Identity: t.identity(), TableKey: t.key, Version: t.committed.Version(),
		Branch: ids.BranchPtr(t.committed.Branch()), RowCount: t.committed.CountRows(), Meta: publisher.VersionMetadata(t.committed)}
}
