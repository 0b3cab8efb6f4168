package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/graph/pg/migrate"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// SchemaApplyOptions tune one schema apply.
type SchemaApplyOptions struct {
	// AllowDataLoss promotes every drop to hard: the dropped table's or column's data is
	// removed from the table's history right after the apply (not only from its current
	// version).
	AllowDataLoss bool
	Actor         string
	// Receipt, when set, is written with the commit; a visible one makes the apply a no-op
	// (a queue request delivered again).
	Receipt *publisher.Receipt
	// Defaults backfill required properties the schema adds: "<Type>.<property>" to one JSON
	// value, written into every row stored before. The reference refuses such a property
	// (OG-MF-103); with a default the plan adds it (migrate.Plan.WithBackfill). A value is
	// checked as a batch's is.
	Defaults map[string]string
}

// SchemaApplyResult is what an apply did.
type SchemaApplyResult struct {
	Plan            *migrate.Plan // the plan applied (or refused)
	Applied         bool          // false: the schemas were the same, nothing was written
	AlreadyApplied  bool          // the receipt is visible: applied by an earlier delivery
	ManifestVersion uint64
	CommitID        string
	SchemaIRHash    string // the accepted schema's identity after the apply
}

// Failpoints of the schema apply, in the order they fire.
const (
	FailpointSchemaAfterArm         = "schema.after_arm"
	FailpointSchemaAfterTableCommit = "schema.after_table_commit"
	FailpointSchemaAfterStaging     = "schema.after_staging"
	FailpointSchemaAfterConfirm     = "schema.after_confirm"
	FailpointSchemaAfterPublish     = "schema.after_publish"
	FailpointSchemaAfterPromote     = "schema.after_promote"
)

// schemaWork is a plan turned into table effects, keyed by table identity.
type schemaWork struct {
	added     map[ids.TableIdentity]string            // new table key
	renamed   map[ids.TableIdentity][2]string         // from, to
	rewritten map[ids.TableIdentity]string            // desired table key
	props     map[ids.TableIdentity]map[string]string // rewritten table: desired column -> accepted column
	dropped   map[ids.TableIdentity]string            // accepted table key
	hard      map[ids.TableIdentity]bool              // a hard drop of the table or of a column
	fill      map[ids.TableIdentity]map[string]string // rewritten table: required column -> its default (JSON)
}

func workOf(plan *migrate.Plan, defaults map[string]string) *schemaWork {
	w := &schemaWork{added: map[ids.TableIdentity]string{}, renamed: map[ids.TableIdentity][2]string{}, rewritten: map[ids.TableIdentity]string{},
		props: map[ids.TableIdentity]map[string]string{}, dropped: map[ids.TableIdentity]string{}, hard: map[ids.TableIdentity]bool{},
		fill: map[ids.TableIdentity]map[string]string{}}
	for _, s := range plan.Steps {
		if s.TypeKind != migrate.Node && s.TypeKind != migrate.Edge {
			continue
		}
		id := ids.TableIdentity{StableTableID: s.Identity.TypeID, TableIncarnationID: s.Identity.IncarnationID}
		kind := string(s.TypeKind) + ":"
		switch s.Kind {
		case migrate.AddType:
			w.added[id] = s.TableKey()
		case migrate.RenameType:
			w.renamed[id] = [2]string{kind + s.From, kind + s.To}
		case migrate.AddProperty, migrate.DropProperty:
			w.rewritten[id] = s.TableKey()
			w.hard[id] = w.hard[id] || s.Mode == migrate.Hard
			if v, ok := defaults[s.TypeName+"."+s.PropertyName]; ok && s.Kind == migrate.AddProperty {
				if w.fill[id] == nil {
					w.fill[id] = map[string]string{}
				}
				w.fill[id][s.PropertyName] = v
			}
		case migrate.RenameProperty:
			w.rewritten[id] = s.TableKey()
			if w.props[id] == nil {
				w.props[id] = map[string]string{}
			}
			w.props[id][s.To] = s.From
		case migrate.DropType:
			w.dropped[id] = s.TableKey()
			w.hard[id] = w.hard[id] || s.Mode == migrate.Hard
		}
	}
	return w
}

// ApplySchema moves the graph to the schema in source as one graph commit on main: the
// reference's `schema apply`, guarded by a v9 SchemaApply intent (docs/schema-evolution.md).
// A plan with a refusal returns its *migrate.UnsupportedError and writes nothing. The same
// schema again is no change (Applied false). Other branches keep their manifests: what a branch
// forked before the apply may still load and merge is schema_branches.go's.
//
// The write: the accepted contract is read fresh from storage (another writer may have applied
// one), the plan made, and the intent armed; then each added type's dataset is created at
// version one and each table whose columns change is rewritten with one Overwrite at its pin
// (existing rows read null in an added column; a renamed column keeps its values; a dropped
// one is left out), each with its pre-minted transaction. The new contract is staged, the
// intent confirmed, and one __manifest commit publishes registrations, renames, updates and
// tombstones under ExactGraphHead; only then is the staged contract promoted. A failure after
// arming is an *errs.RecoveryRequired, which recovery rolls forward or back.
func (g *Graph) ApplySchema(ctx context.Context, source string, o SchemaApplyOptions) (*SchemaApplyResult, error) {
	release, err := g.enter(ctx, "")
	if err != nil {
		return nil, err
	}
	defer release()
	accepted, err := loadContract(ctx, g.root)
	if err != nil {
		return nil, err
	}
	g.contract.Store(accepted)
	if o.Receipt != nil {
		st, err := g.publisher("").Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		rc, ok, err := st.ReceiptFor(ctx, o.Receipt)
		if err != nil {
			return nil, err
		}
		if ok {
			if err := sameBody(o.Receipt, rc); err != nil {
				return nil, err
			}
			ci, err := receiptCommit(ctx, st, rc)
			if err != nil {
				return nil, err
			}
			return &SchemaApplyResult{Plan: &migrate.Plan{Supported: true}, AlreadyApplied: true, Applied: true,
				ManifestVersion: ci.GraphManifestVersion, CommitID: ci.GraphCommitID, SchemaIRHash: accepted.State.IRHash}, nil
		}
	}
	plan, _, err := migrate.PlanSchema(accepted.IR, "schema.pg", source)
	if err != nil {
		return nil, err
	}
	if o.AllowDataLoss {
		plan = plan.WithDataLoss()
	}
	if len(o.Defaults) > 0 {
		names := make([]string, 0, len(o.Defaults))
		for n := range o.Defaults {
			names = append(names, n)
		}
		sort.Strings(names)
		var unused []string
		if plan, unused = plan.WithBackfill(names); len(unused) > 0 {
			return &SchemaApplyResult{Plan: plan, SchemaIRHash: accepted.State.IRHash}, &errs.InvalidInput{Field: "default",
				Reason: "the schema adds no required property " + strings.Join(unused, ", ") + " (a default fills a required property the schema adds)"}
		}
	}
	res := &SchemaApplyResult{Plan: plan, SchemaIRHash: accepted.State.IRHash}
	if err := plan.Err(); err != nil {
		return res, err
	}
	if len(plan.Steps) == 0 {
		return res, nil
	}
	desired, err := pg.NewContract(source, plan.Desired)
	if err != nil {
		return res, err
	}
	a, err := g.prepareSchemaApply(ctx, accepted, desired, workOf(plan, o.Defaults), o)
	if err != nil {
		return res, err
	}
	if err := a.run(ctx); err != nil {
		return res, err
	}
	res.Applied, res.ManifestVersion, res.CommitID, res.SchemaIRHash = true, a.published, a.commitID, desired.State.IRHash
	for _, s := range plan.Steps {
		if s.Kind == migrate.DropConstraint && s.TypeKind == migrate.Node && s.Constraint != nil && len(s.Constraint.Columns) == 1 {
			if n := desired.Catalog.Node(s.TypeName); n != nil {
				g.forgetIndex(n.TablePath(), s.Constraint.Columns[0])
			}
		}
	}
	return res, nil
}

// schemaApply is one prepared apply.
type schemaApply struct {
	g                 *Graph
	accepted, desired *pg.Contract
	work              *schemaWork
	st                *publisher.State
	live              map[ids.TableIdentity]publisher.TableEntry
	heads             map[ids.TableIdentity]*lance.Dataset // rewritten tables at their pins, opened once
	sc                *recovery.Sidecar
	commitID          string
	published         uint64
	hardPaths         []string
}

func (g *Graph) prepareSchemaApply(ctx context.Context, accepted, desired *pg.Contract, w *schemaWork, o SchemaApplyOptions) (*schemaApply, error) {
	st, err := g.publisher("").Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	a := &schemaApply{g: g, accepted: accepted, desired: desired, work: w, st: st, live: byIdentity(st), heads: map[ids.TableIdentity]*lance.Dataset{},
		commitID: ids.NewULID()}
	var head *string
	if h, ok := st.Head(""); ok {
		head = &h
	}
	state := accepted.State
	spec := recovery.SchemaApplySpec{
		Root:    g.rootLoc,
		ActorID: optString(o.Actor),
		Authority: recovery.Authority{GraphHead: head, SchemaIdentityDomain: state.Domain, SchemaIRHash: state.IRHash,
			SchemaIdentityVersion: state.IdentityVersion},
		Lineage:            recovery.Lineage{GraphCommitID: a.commitID, ActorID: optString(o.Actor), CreatedAt: time.Now().UnixMicro()},
		TargetSchemaIRHash: desired.State.IRHash,
	}
	for _, id := range sortedIDs(w.added) {
		key := w.added[id]
		path := ids.TablePath(key, id)
		if names, err := g.root.Sub(path).List(ctx, ""); err != nil {
			return nil, err
		} else if len(names) > 0 {
			return nil, &OrphanDatasetError{TableKey: key, Path: path}
		}
		spec.Tables = append(spec.Tables, recovery.SchemaApplyTable{Identity: id, TableKey: key, FirstTouch: true})
		spec.Registrations = append(spec.Registrations, recovery.Registration{Identity: id, TableKey: key, TablePath: path})
	}
	for _, id := range sortedIDs(w.rewritten) {
		e, ok := a.live[id]
		if !ok {
			return nil, fmt.Errorf("schema apply: table %s (%s) is not live on main", w.rewritten[id], id)
		}
		if e.Branch != nil {
			return nil, fmt.Errorf("schema apply: table %s is owned by Lance branch %s, not main", e.TableKey, *e.Branch)
		}
		ds, err := lance.Open(ctx, g.root.Sub(e.Path))
		if err != nil {
			return nil, err
		}
		if err := checkNoDrift(ctx, ds, e); err != nil {
			return nil, err
		}
		a.heads[id] = ds // HEAD is the pin: the rewrite reads from it
		spec.Tables = append(spec.Tables, recovery.SchemaApplyTable{Identity: id, TableKey: w.rewritten[id], ExpectedVersion: e.Version})
		if w.hard[id] {
			a.hardPaths = append(a.hardPaths, e.Path)
		}
	}
	// A default that does not fit its property is refused here, before anything is armed.
	for id := range w.fill {
		fill := a.backfill(id)
		for name := range w.fill[id] {
			if _, _, err := fill(name, 0); err != nil {
				return nil, err
			}
		}
	}
	for _, id := range sortedIDs(w.renamed) {
		e, ok := a.live[id]
		if !ok || e.TableKey != w.renamed[id][0] {
			return nil, fmt.Errorf("schema apply: renamed table %s (%s) is not live on main", w.renamed[id][0], id)
		}
		spec.Renames = append(spec.Renames, recovery.Rename{Identity: id, ExpectedTableKey: e.TableKey, ExpectedVersion: e.Version,
			TableKey: w.renamed[id][1], TablePath: e.Path})
	}
	for _, id := range sortedIDs(w.dropped) {
		e, ok := a.live[id]
		if !ok {
			return nil, fmt.Errorf("schema apply: dropped table %s (%s) is not live on main", w.dropped[id], id)
		}
		spec.Tombstones = append(spec.Tombstones, recovery.Tombstone{Identity: id, TableKey: e.TableKey, TombstoneVersion: e.Version + 1})
		if w.hard[id] {
			a.hardPaths = append(a.hardPaths, e.Path)
		}
	}
	sc, err := recovery.NewSchemaApplySidecar(spec)
	if err != nil {
		return nil, err
	}
	sc.IngestReceipt = o.Receipt
	a.sc = sc
	return a, nil
}

func sortedIDs[V any](m map[ids.TableIdentity]V) []ids.TableIdentity {
	out := make([]ids.TableIdentity, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].StableTableID != out[j].StableTableID {
			return out[i].StableTableID < out[j].StableTableID
		}
		return out[i].TableIncarnationID < out[j].TableIncarnationID
	})
	return out
}

// OrphanDatasetError refuses an added type whose dataset path already holds files no manifest
// registers: the apply will not claim physical state it did not make.
type OrphanDatasetError struct{ TableKey, Path string }

func (e *OrphanDatasetError) Error() string {
	return fmt.Sprintf("schema apply target table %s has an existing dataset at %s but no live manifest entry; refusing to claim unowned physical state (inspect and remove it before retrying)", e.TableKey, e.Path)
}

// ErrorKind is errs.KindTableDrift: storage holds what no commit made.
func (e *OrphanDatasetError) ErrorKind() string { return errs.KindTableDrift }

// run is the forward path, through the same skeleton as every write (intent.go).
func (a *schemaApply) run(ctx context.Context) error {
	g := a.g
	done := map[ids.TableIdentity]recovery.SchemaApplyDone{}
	in := &intent{g: g,
		points: intentPoints{armed: FailpointSchemaAfterArm, confirmed: FailpointSchemaAfterConfirm,
			beforePublish: "schema.before_publish", published: FailpointSchemaAfterPublish},
		arm: func(ctx context.Context) (string, error) {
			if err := recovery.Write(ctx, g.root, a.sc, g.fence); err != nil {
				return "", err
			}
			return a.sc.OperationID, nil
		},
		commit: func(ctx context.Context) error { return a.commitTables(ctx, done) },
		confirm: func(ctx context.Context) error {
			if err := recovery.WriteSchemaStaging(ctx, g.root, a.desired); err != nil {
				return err
			}
			if err := failpoint.Inject(FailpointSchemaAfterStaging); err != nil {
				return err
			}
			next, err := a.sc.ConfirmSchemaApply(done)
			if err != nil {
				return err
			}
			if err := recovery.Rewrite(ctx, g.root, next, g.fence); err != nil {
				return err
			}
			a.sc = next
			return nil
		},
		publish: func(ctx context.Context, gate func() error) error {
			if err := gate(); err != nil {
				return err
			}
			req := recovery.SchemaApplyRequest(a.sc)
			req.Known = a.st
			res, err := g.publisher("").Publish(ctx, req)
			if err != nil {
				return err
			}
			a.published = res.ManifestVersion
			if err := recovery.PromoteSchemaStaging(ctx, g.root, a.desired.State.IRHash); err != nil {
				return err
			}
			g.contract.Store(a.desired)
			return failpoint.Inject(FailpointSchemaAfterPromote)
		},
		failed: func() { g.tables = map[tableRef]*tableState{} },
	}
	if err := in.run(ctx); err != nil {
		return err
	}
	g.tables = map[tableRef]*tableState{} // rewritten tables are re-read on next use
	a.cleanHard(ctx)
	return nil
}

// commitTables is Phase B: each added type's empty dataset at version one, then each rewrite.
func (a *schemaApply) commitTables(ctx context.Context, done map[ids.TableIdentity]recovery.SchemaApplyDone) error {
	g := a.g
	fv, err := publisher.FileVersion(ctx, g.root)
	if err != nil {
		return err
	}
	for _, e := range a.sc.ProtocolV7.Effects {
		t := a.desiredTable(e.Identity)
		if t == nil {
			return fmt.Errorf("schema apply: %s (%s) is not in the desired schema", e.TableKey, e.Identity)
		}
		s, err := schema.FromArrow(t.Arrow)
		if err != nil {
			return err
		}
		opts := lance.StageOptions{UUID: e.PlannedTransaction.UUID}
		var ds *lance.Dataset
		if e.Kind == recovery.FirstTouchDataset {
			ds, err = lance.Create(ctx, g.root.Sub(ids.TablePath(e.TableKey, e.Identity)), s, nil, lance.CreateOptions{FileVersion: fv, Stage: opts})
		} else {
			ds, err = a.rewrite(ctx, e, s, t.Arrow, opts)
		}
		if err != nil {
			return fmt.Errorf("schema apply: %s: %w", e.TableKey, err)
		}
		if ds.Version() != e.PlannedTransaction.ReadVersion+1 {
			return fmt.Errorf("schema apply: %s committed version %d, planned %d", e.TableKey, ds.Version(), e.PlannedTransaction.ReadVersion+1)
		}
		done[e.Identity] = recovery.SchemaApplyDone{Transaction: e.PlannedTransaction,
			Update: publisher.DatasetUpdate{Identity: e.Identity, TableKey: e.TableKey, Version: ds.Version(), RowCount: ds.CountRows(),
				Meta: publisher.VersionMetadata(ds)}}
		if err := failpoint.Inject(FailpointSchemaAfterTableCommit); err != nil {
			return err
		}
	}
	return nil
}

func (a *schemaApply) desiredTable(id ids.TableIdentity) *pg.Table {
	for _, t := range allTables(a.desired.Catalog) {
		if t.table.TypeID == id.StableTableID && t.table.IncarnationID == id.TableIncarnationID {
			return t.table
		}
	}
	return nil
}

// rewrite overwrites an existing table at its pin with every row projected onto the desired
// columns: a column under its accepted name (or the name a rename came from), or all null for
// an added one.
func (a *schemaApply) rewrite(ctx context.Context, e recovery.SchemaEffect, s *schema.Schema, target *arrow.Schema, opts lance.StageOptions) (*lance.Dataset, error) {
	ds := a.heads[e.Identity]
	from := a.work.props[e.Identity]
	fill := a.backfill(e.Identity)
	var recs []arrow.Record
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	err := ds.Each(ctx, lance.ScanOptions{}, func(rec arrow.Record) error {
		r, err := projectRecord(rec, target, from, fill)
		if err != nil {
			return err
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	staged, err := ds.StageOverwrite(ctx, s, recs, opts)
	if err != nil {
		return nil, err
	}
	return ds.Commit(ctx, staged)
}

// backfill makes the column of a required property the apply adds to table id, from its
// default; nil when the table has none.
func (a *schemaApply) backfill(id ids.TableIdentity) func(string, int) (arrow.Array, bool, error) {
	defaults := a.work.fill[id]
	if len(defaults) == 0 {
		return nil
	}
	t := a.desiredTable(id)
	node := a.desired.Catalog.Node(t.Name)
	if node != nil && node.TypeID != id.StableTableID {
		node = nil
	}
	return func(name string, n int) (arrow.Array, bool, error) {
		v, ok := defaults[name]
		if !ok {
			return nil, false, nil
		}
		col, err := rows.Backfill(memory.DefaultAllocator, t, node, name, []byte(v), n)
		return col, err == nil, err
	}
}

// cleanHard removes, after a hard drop, every version of the touched tables but the current
// one, so the dropped data cannot be read back by time travel. A failure leaves it to the
// next cleanup.
func (a *schemaApply) cleanHard(ctx context.Context) {
	for _, p := range a.hardPaths {
		ds, err := lance.Open(ctx, a.g.root.Sub(p))
		if err != nil {
			continue
		}
		plan, err := lance.PlanCleanup(ctx, a.g.root.Sub(p), map[string]uint64{"": ds.Version()}, time.Time{})
		if err != nil || a.g.checkFence(ctx, "hard-drop cleanup of "+p) != nil {
			continue
		}
		_ = plan.Apply(ctx)
	}
}

// loadContract reads and validates the accepted schema contract at root.
func loadContract(ctx context.Context, root storage.Store) (*pg.Contract, error) {
	get := func(name string) ([]byte, error) {
		b, err := root.Get(ctx, name)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, fmt.Errorf("open %s: no graph here (%s is missing)", root.URI(), name)
		}
		return b, err
	}
	src, err := get(pg.SchemaSourceFile)
	if err != nil {
		return nil, err
	}
	ir, err := get(pg.SchemaIRFile)
	if err != nil {
		return nil, err
	}
	state, err := get(pg.SchemaStateFile)
	if err != nil {
		return nil, err
	}
	return pg.OpenContract(string(src), ir, state)
}
