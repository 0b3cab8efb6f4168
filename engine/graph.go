package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// InitClaimFile is the create-if-absent claim one initializer holds while it builds a graph.
const InitClaimFile = "__init_claim.json"

// Graph is an open graph root. A Graph is the single writer of its root within this process:
// loads on it are serialized, and it keeps folded manifest state and id indexes between them.
type Graph struct {
	root    storage.Store
	rootLoc string // the root's location, as sidecar pins name it
	// contract is the accepted schema; a schema apply replaces it under the write gate while
	// readers may hold the one before.
	contract atomic.Pointer[pg.Contract]

	writeMu sync.Mutex // the write gate: schema -> branch -> tables collapse to one per graph
	pubs    map[string]*publisher.Publisher
	tables  map[tableRef]*tableState
	folding *pendingFold // a load's fold still running (fold.go); under writeMu
	// encodePlans are the table versions a load's data files are encoded for ahead of its
	// turn (encode.go), read off the write gate.
	encodePlans sync.Map
	fence       Fence // the writer's (SetFence); read under writeMu
	// pendingIndices are the wanted indices whose last build failed (indices.go), read by
	// maintenance off the write gate.
	pendingIndices sync.Map
	// unwantedIndices are, by table path, the columns whose @index a schema apply dropped:
	// the index maintenance removes their indices (indices.go).
	unwantedIndices sync.Map
	// indexWorkFailed are the table paths whose last index work failed (staging it or writing
	// its files): their due runs go first again (indexWorkFirst), so that an index that keeps
	// failing cannot stop compaction.
	indexWorkFailed sync.Map
	// retires are the sidecars this process deletes in the background (retire.go).
	retires retires
	// ownSidecar is the operation id of the sidecar the write under way is arming, which its
	// own revalidation, beside the arm, does not count as pending (retire.go).
	ownSidecar atomic.Value // string
	// unresolved says a write of this process left a sidecar for recovery since the last full
	// Recover: a load then revalidates (and heals) before it arms, not beside.
	unresolved atomic.Bool
	// drifted says the last load or staged compaction found a table drifted (DriftError),
	// which only an operator mends: the next one revalidates before it arms, not beside, so
	// a batch held on the drift and tried again and again writes no sidecar (and an
	// operator's RestoreDrift, which refuses while one is pending, never meets one of its).
	drifted atomic.Bool
}

// tableRef names one table on one Lance branch.
type tableRef struct {
	path   string
	branch string // "" = main
}

// Catalog is the accepted schema's catalog.
func (g *Graph) Catalog() *pg.Catalog { return g.contract.Load().Catalog }

// Contract is the accepted schema contract.
func (g *Graph) Contract() *pg.Contract { return g.contract.Load() }

// Root is the graph root's store.
func (g *Graph) Root() storage.Store { return g.root }

// RootLocation is the normalised root location (an absolute path for local roots).
func (g *Graph) RootLocation() string { return g.rootLoc }

// servable says whether a graph can be made at v: a graph reads its own tables (__manifest
// first), so this build must both write and read the version.
func servable(v file.Version) bool { return file.Writable(v) && file.Readable(v) }

// InitError reports why a graph could not be initialised.
type InitError struct{ Reason string }

func (e *InitError) Error() string { return "init: " + e.Reason }

// DefaultFileVersion is the Lance data file version of a new graph's tables when InitOptions
// leave it unset. A graph keeps the version it was made with: every table it creates later
// (the recovery audit table) follows its __manifest, and existing tables keep theirs.
// 2.2, as the reference OmniGraph pins every table and Lance 12 creates them.
var DefaultFileVersion = file.V2_2

// InitOptions configure a new graph.
type InitOptions struct {
	// FileVersion is the Lance data file version of every table (zero: DefaultFileVersion).
	FileVersion file.Version
}

// Init creates a new graph at root from schema source: the schema contract files, one empty
// Lance dataset per node and edge type at version 1, and __manifest with its genesis rows.
// An existing graph (or a concurrent initializer holding the claim) is refused.
func Init(ctx context.Context, root storage.Store, source string, opts ...InitOptions) (*Graph, error) {
	var o InitOptions
	for _, x := range opts {
		o = x
	}
	if o.FileVersion.IsZero() {
		o.FileVersion = DefaultFileVersion
	}
	if !servable(o.FileVersion) {
		return nil, &InitError{Reason: fmt.Sprintf("Lance data file version %s: this build reads and writes %s", o.FileVersion, file.Versions(servable))}
	}
	contract, err := pg.InitContract(source, "")
	if err != nil {
		return nil, err
	}
	claim, _ := json.Marshal(map[string]any{"version": 1, "attempt_id": ids.NewULID()})
	if err := root.PutIfAbsent(ctx, InitClaimFile, claim); err != nil {
		if errors.Is(err, storage.ErrAlreadyExists) {
			return nil, &InitError{Reason: "another initializer holds " + InitClaimFile + " (remove it if that initializer died)"}
		}
		return nil, err
	}
	if ok, err := root.Exists(ctx, pg.SchemaStateFile); err != nil {
		return nil, err
	} else if ok {
		_ = root.Delete(ctx, InitClaimFile)
		return nil, &InitError{Reason: "a graph already exists at " + root.URI()}
	}
	var regs []publisher.Registration
	var versions []publisher.DatasetUpdate
	for _, t := range allTables(contract.Catalog) {
		id := ids.TableIdentity{StableTableID: t.table.TypeID, TableIncarnationID: t.table.IncarnationID}
		s, err := schema.FromArrow(t.table.Arrow)
		if err != nil {
			return nil, err
		}
		ds, err := lance.Create(ctx, root.Sub(t.path), s, nil, lance.CreateOptions{FileVersion: o.FileVersion})
		if err != nil {
			return nil, fmt.Errorf("init: create %s: %w", t.key, err)
		}
		regs = append(regs, publisher.Registration{Identity: id, TableKey: t.key})
		versions = append(versions, publisher.DatasetUpdate{Identity: id, TableKey: t.key, Version: ds.Version(), Meta: publisher.VersionMetadata(ds)})
	}
	genesis := publisher.Lineage{CommitID: ids.NewULID(), CreatedAt: time.Now().UnixMicro()}
	if err := publisher.Create(ctx, root, regs, versions, genesis, o.FileVersion); err != nil {
		return nil, fmt.Errorf("init: create __manifest: %w", err)
	}
	// The state file goes last: its presence is what says a graph exists here.
	files := contract.Files()
	for _, name := range []string{pg.SchemaSourceFile, pg.SchemaIRFile, pg.SchemaStateFile} {
		if err := root.Put(ctx, name, []byte(files[name])); err != nil {
			return nil, err
		}
	}
	if err := failpoint.Inject("init.before_release_claim"); err != nil {
		return nil, err
	}
	if err := root.Delete(ctx, InitClaimFile); err != nil {
		return nil, err
	}
	return newGraph(root, contract), nil
}

func newGraph(root storage.Store, c *pg.Contract) *Graph {
	g := &Graph{root: root, rootLoc: recovery.RootLocation(root), pubs: map[string]*publisher.Publisher{}, tables: map[tableRef]*tableState{}}
	g.contract.Store(c)
	return g
}

// Open opens an existing graph read-write: it validates the schema contract files and the
// __manifest stamp, then runs full recovery so no pending intent outlives the open.
func Open(ctx context.Context, root storage.Store) (*Graph, error) {
	g, err := OpenReadOnly(ctx, root)
	if err != nil {
		// A schema apply that died while promoting its staged contract leaves contract files
		// that do not hold together until recovery finishes the promotion.
		if staged, serr := recovery.SchemaStagingPresent(ctx, root); serr != nil || !staged {
			return nil, err
		}
		if _, rerr := recovery.Recover(ctx, root, recovery.Full, nil); rerr != nil {
			return nil, rerr
		}
		if g, err = OpenReadOnly(ctx, root); err != nil {
			return nil, err
		}
	}
	if _, err := g.Recover(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

// OpenReadOnly opens an existing graph without touching it (no recovery): reads see the last
// published state.
func OpenReadOnly(ctx context.Context, root storage.Store) (*Graph, error) {
	c, err := loadContract(ctx, root)
	if err != nil {
		return nil, err
	}
	g := newGraph(root, c)
	if _, err := g.publisher("").Snapshot(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

// publisher returns the branch's publisher, created on first use.
func (g *Graph) publisher(branch string) *publisher.Publisher {
	b := normBranch(branch)
	p, ok := g.pubs[b]
	if !ok {
		p = publisher.Open(g.root, b)
		g.pubs[b] = p
	}
	return p
}

func normBranch(b string) string {
	if b == "main" {
		return ""
	}
	return b
}

// Snapshot returns the latest manifest state of a branch.
func (g *Graph) Snapshot(ctx context.Context, branch string) (*publisher.State, error) {
	return g.publisher(branch).Snapshot(ctx)
}

type catalogTable struct {
	key, path string
	table     *pg.Table
	node      *pg.NodeType
	edge      *pg.EdgeType
}

func allTables(cat *pg.Catalog) []catalogTable {
	var out []catalogTable
	for _, n := range cat.Nodes {
		out = append(out, catalogTable{key: n.TableKey(), path: n.TablePath(), table: &n.Table, node: n})
	}
	for _, e := range cat.Edges {
		out = append(out, catalogTable{key: e.TableKey(), path: e.TablePath(), table: &e.Table, edge: e})
	}
	return out
}
