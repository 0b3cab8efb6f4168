package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/hugepage"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// kindExit is the catalogue's exit code of err's kind (exitInternal for an error of no kind).
func kindExit(err error) int { return errs.ExitCode(err) }

// boundSettings are the config settings of a command (config.Bind), declared on a Go flag set
// and carried onto the command's pflag set.
type boundSettings struct {
	*config.Loader
	gofs *flag.FlagSet
	fs   *pflag.FlagSet
}

// bindSettings declares the config settings of the named groups (config.NATSSettings,
// config.RootSettings) and --config on fs, with the tools' defaults: the same names, variables
// and errors as `worker run`.
func bindSettings(fs *flagSet, groups ...[]string) *boundSettings {
	var names []string
	for _, g := range groups {
		names = append(names, g...)
	}
	return bindConfig(fs, config.ToolDefaults(), names...)
}

// bindConfig binds names with defaults through config.Bind, which takes a Go flag set: the
// Go flags are added to fs, and load tells the Go set which of them the command line gave.
func bindConfig(fs *flagSet, defaults config.Config, names ...string) *boundSettings {
	gofs := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	l := config.Bind(gofs, defaults, names...).Sections(commandSections)
	fs.AddGoFlagSet(gofs)
	gofs.VisitAll(func(f *flag.Flag) { _ = fs.SetAnnotation(f.Name, settingAnnotation, []string{"true"}) })
	fs.bound = &boundSettings{Loader: l, gofs: gofs, fs: fs.FlagSet}
	return fs.bound
}

// require makes load refuse a config in which any of names is empty.
func (b *boundSettings) require(names ...string) *boundSettings {
	b.Require(names...)
	return b
}

// load merges the bound settings once the flags are parsed. pflag sets a Go flag's value but
// not the Go set's record of what was given, which config reads to rank a flag above the file
// and the environment: setting each given flag again on the Go set records it.
func (b *boundSettings) load() (*config.Config, error) {
	if err := b.sync(); err != nil {
		return nil, err
	}
	return b.Load(getenv)
}

// sync records on the Go set the settings the command line gave (see load).
func (b *boundSettings) sync() error {
	var err error
	b.fs.Visit(func(f *pflag.Flag) {
		if b.gofs.Lookup(f.Name) != nil && err == nil {
			err = b.gofs.Set(f.Name, f.Value.String())
		}
	})
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	return nil
}

// openRoot opens the graph root at uri as c says (local_fsync), with extra options.
func openRoot(ctx context.Context, uri string, c *config.Config, extra ...storage.Option) (storage.Store, error) {
	if uri == "" {
		return nil, &usageError{msg: "--root is required (or " + config.EnvName("root") + ", or root: in the --config file)"}
	}
	return storage.Open(ctx, uri, append(c.StorageOptions(), extra...)...)
}

// liveWorkerError refuses a direct write to a root that a `worker run` is serving.
type liveWorkerError struct {
	uri  string
	pids []int
}

func (e *liveWorkerError) Error() string {
	pids := make([]string, len(e.pids))
	for i, p := range e.pids {
		pids[i] = strconv.Itoa(p)
	}
	return fmt.Sprintf("%s is served by a running `worker run` (pid %s): this command writes the graph directly, "+
		"and a second writer on a served root is unsupported (recovery may restore tables under it); "+
		"stop the worker first, or pass --force if that process is not writing", e.uri, strings.Join(pids, ", "))
}

// refuseLiveWorker fails when a live `worker run` keeps spare files under st (local roots;
// other stores cannot tell, and are trusted to the operator).
func refuseLiveWorker(st storage.Store, force bool) error {
	if force {
		return nil
	}
	pids, err := storage.LiveWriters(st)
	if err != nil || len(pids) == 0 {
		return err
	}
	return &liveWorkerError{uri: st.URI(), pids: pids}
}

// forceFlag is the override of refuseLiveWorker on commands that write the graph directly.
func forceFlag(fs *flagSet) *bool {
	return fs.Bool("force", false, "write even though a running worker (worker run) seems to serve this root")
}

// openGraph opens the graph at uri: read-write (full recovery on open, refused while a worker
// serves the root unless force) or read-only. The returned close releases the store.
func openGraph(ctx context.Context, uri string, c *config.Config, readWrite, force bool) (*engine.Graph, func(), error) {
	var opts []storage.Option
	if !readWrite {
		opts = append(opts, storage.MustExist()) // a read creates nothing, even at a mistyped root
	}
	st, err := openRoot(ctx, uri, c, opts...)
	if err != nil {
		return nil, nil, err
	}
	open := engine.OpenReadOnly
	if readWrite {
		if err := refuseLiveWorker(st, force); err != nil {
			st.Close()
			return nil, nil, err
		}
		open = engine.Open
	}
	g, err := open(ctx, st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return g, func() { st.Close() }, nil
}

func cmdInit(fs *flagSet) runFunc {
	settings := bindSettings(fs, config.RootSettings, []string{"schema", "lance_file_version"}).require("schema")
	return func(ctx context.Context, args []string) error {
		if len(args) != 0 {
			return &usageError{msg: fmt.Sprintf("init takes no arguments (got %q)", args)}
		}
		c, err := settings.load()
		if err != nil {
			return err
		}
		var o engine.InitOptions
		if c.LanceFileVersion != "" {
			o.FileVersion, _ = config.FileVersion(c.LanceFileVersion) // validated with the config
		}
		src, err := readSchema(c.Schema)
		if err != nil {
			return err
		}
		made := dirsToMake(c, "")
		st, err := openRoot(ctx, c.Root, c)
		if err != nil {
			return err
		}
		defer st.Close()
		g, err := engine.Init(ctx, st, src, o)
		if err != nil {
			var ie *engine.InitError
			if !errors.As(err, &ie) { // (not a graph already there, nor another initialiser's)
				made.remove()
			}
			return schemaFileError(c.Schema, err)
		}
		fmt.Printf("initialised %s: %d node types, %d edge types\n", st.URI(), len(g.Catalog().Nodes), len(g.Catalog().Edges))
		return nil
	}
}

func cmdLoad(fs *flagSet) runFunc {
	branch := fs.String("branch", "main", "target branch")
	mode := fs.String("mode", "merge", "append (strict insert), merge (upsert) or overwrite")
	actor := fs.String("actor", "", "actor id recorded on the commit")
	msgID := fs.String("msg-id", "", "receipt key: a batch whose receipt is already visible on the branch is not applied again")
	from := fs.String("from", "", "fork --branch from this base first if it does not exist")
	force := forceFlag(fs)
	settings := bindSettings(fs, config.RootSettings)
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return &usageError{msg: "load takes one FILE argument (- for standard input)"}
		}
		c, err := settings.load()
		if err != nil {
			return err
		}
		in, err := openInput(args[0])
		if err != nil {
			return err
		}
		defer in.Close()
		recs, err := framing.Parse(in, framing.DefaultLimits())
		if err != nil {
			return err
		}
		if err := checkHeaders(fs.named, *branch, *from, *mode); err != nil {
			return err
		}
		g, closeGraph, err := openGraph(ctx, c.Root, c, true, *force)
		if err != nil {
			return err
		}
		defer closeGraph()
		if len(recs) == 0 {
			// As the worker does with an empty message: no commit (Load would make one of no
			// rows, a lineage entry that changes nothing), and say so.
			return printJSON(emptyLoad{Outcome: ingest.OutcomeEmpty, Detail: "no records: nothing committed"})
		}
		req := engine.LoadRequest{Branch: *branch, From: *from, Mode: rows.Mode(*mode), Actor: *actor, Records: recs}
		if *msgID != "" {
			req.Receipt = &publisher.Receipt{MsgID: *msgID}
		}
		res, err := g.Load(ctx, req)
		if err != nil {
			return err
		}
		return printJSON(res)
	}
}

// emptyLoad is what `worker load` prints for a file of no records.
type emptyLoad struct {
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

// cmdOptimize compacts a graph directly (--root, for a graph no worker serves: `worker run`
// compacts its own graph as it goes) or asks the graph's worker to (--graph: a maintenance
// request it applies in stream order under its lease).
func cmdOptimize(fs *flagSet) runFunc {
	to := targetFlags(fs, "compact directly", "a maintenance request to omnigraph.<graph>.maintenance")
	all := fs.Bool("all", false, "rewrite every fragment Lance's planner would (small ones and ones with many deletions), not only full size-tier runs")
	fanout := fs.Int("fanout", engine.DefaultCompactionFanout, "size-tier fanout: merge the newest fragments once one size tier among them holds this many")
	indices := fs.Bool("indices", false, "also build the indices the reference OmniGraph keeps on every table with rows that lacks one (BTREE on id, and src, dst on edges; INVERTED on @index/@key Strings; IVF_FLAT on @index Vectors; BTREE on other @index scalars)")
	actor := fs.String("actor", "", "actor id recorded on the commit")
	force := forceFlag(fs)
	wait := waitFlags(fs)
	return func(ctx context.Context, args []string) error {
		if *fanout < 2 {
			return &usageError{msg: fs.named("fanout") + " must be at least 2"}
		}
		const usage = "optimize needs exactly one of --root (compact now) or --graph (ask the graph's worker)"
		if len(args) != 0 {
			return &usageError{msg: usage}
		}
		c, err := to.resolve(usage)
		if err != nil {
			return err
		}
		if c.Graph != "" {
			return publishMaintenance(ctx, c, ingest.MaintenanceRequestBody{Op: "optimize", All: *all, Fanout: *fanout, Indices: *indices}, *actor, wait)
		}
		g, closeGraph, err := openGraph(ctx, c.Root, c, true, *force)
		if err != nil {
			return err
		}
		defer closeGraph()
		res, err := g.Optimize(ctx, engine.OptimizeOptions{Fanout: *fanout, All: *all, Indices: *indices, Actor: *actor})
		if err != nil {
			return err
		}
		return printJSON(res)
	}
}

// cmdCleanup removes old versions directly (--root, a graph no worker serves) or asks the
// graph's worker to (--graph); a preview unless --confirm.
func cmdCleanup(fs *flagSet) runFunc {
	to := targetFlags(fs, "clean up directly", "a maintenance request to omnigraph.<graph>.maintenance")
	keep := fs.Int("keep", 0, "newest versions to keep on each branch of every dataset (10 is a good start; below 3 loses recent history)")
	olderThan := fs.String("older-than", "", "also keep every version younger than this (units s m h d w, e.g. 7d)")
	confirm := fs.Bool("confirm", false, "remove; without it the command only reports what it would remove")
	force := forceFlag(fs)
	wait := waitFlags(fs)
	return func(ctx context.Context, args []string) error {
		if *keep < 1 {
			return &usageError{msg: "cleanup needs " + fs.named("keep") + " N (N >= 1)"}
		}
		age, err := ingest.ParseAge(*olderThan)
		if err != nil {
			return &usageError{msg: fs.named("older-than") + ": " + err.Error()}
		}
		const usage = "cleanup needs exactly one of --root (clean up now) or --graph (ask the graph's worker)"
		if len(args) != 0 {
			return &usageError{msg: usage}
		}
		c, err := to.resolve(usage)
		if err != nil {
			return err
		}
		if c.Graph != "" {
			return publishMaintenance(ctx, c, ingest.MaintenanceRequestBody{Op: "cleanup", Keep: *keep, OlderThan: *olderThan, DryRun: !*confirm}, "", wait)
		}
		g, closeGraph, err := openGraph(ctx, c.Root, c, true, *force)
		if err != nil {
			return err
		}
		defer closeGraph()
		res, err := g.Cleanup(ctx, engine.CleanupOptions{Keep: *keep, OlderThan: age, DryRun: !*confirm})
		if err != nil {
			return err
		}
		return printJSON(res)
	}
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orDash(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// cmdRun binds every setting, as config.Load does, root and graph (or graphs) required.
func cmdRun(fs *flagSet) runFunc {
	settings := bindConfig(fs, config.Defaults(), config.AllSettings()...).require(config.RunRequired...)
	return func(ctx context.Context, args []string) error {
		if len(args) != 0 {
			return &usageError{msg: fmt.Sprintf("run takes no arguments (got %q)", args)}
		}
		return serve(ctx, settings)
	}
}

// serve is `worker run` once its command line is parsed: one graph, or with graphs this
// process's share of a fleet's (serveFleet).
func serve(ctx context.Context, settings *boundSettings) error {
	c, err := settings.load()
	if err != nil {
		return err
	}
	// A port in use fails the run now, before anything is made that it would leave behind.
	if err := checkPorts(c); err != nil {
		return err
	}
	log, restoreLog, err := c.Logger(os.Stderr)
	if err != nil {
		return err
	}
	defer restoreLog()
	defer log.Sync()
	// Before the heap has memory of its own to reuse: the span advised must be fresh.
	if r, err := hugepage.AdviseHeap(c.HugePageHeap); err != nil {
		log.Warn("huge pages", zap.Error(err))
	} else {
		log.Info("huge pages", zap.String("kernel", r.Mode), zap.Int("heap_bytes_advised", r.Advised))
	}
	if gogc := getenv("GOGC"); gogc == "" {
		debug.SetGCPercent(c.GCPercent)
		log.Info("collector", zap.Int("gc_percent", c.GCPercent))
	} else {
		log.Info("collector", zap.String("GOGC", gogc))
	}
	lance.SetBTreeCacheBytes(int64(c.IndexCacheBytes))
	// Under a memory limit, the collector runs earlier as the heap nears it (gc_percent lets
	// the heap grow to several times the live data otherwise).
	fp := &ingest.Footprint{}
	defer limitMemory(ctx, c, fp, log)()
	if c.Graphs != "" {
		return serveFleet(ctx, c, fp, log)
	}
	m := ingest.NewMetricsFor(c.Graph) // every series labelled graph="<graph>", as in a fleet
	// What this run makes and fails before it serves (a schema that does not compile, NATS
	// that does not start) it removes: the graph root and the embedded server's store, each
	// only if it was not there before.
	loc := c.Root // as st.Location("") will name it
	if p, ok := storage.LocalPath(c.Root); ok {
		loc = p
	}
	made := dirsToMake(c, embeddedStore(c, loc))
	st, g, err := openServedHeld(ctx, c, log, m)
	if err != nil || g == nil {
		if err != nil {
			made.remove()
		}
		return err
	}
	defer st.Close()
	nc, stop, err := connectServed(ctx, c, st.Location(""), log)
	if err != nil || nc == nil {
		if err != nil {
			st.Close()
			made.remove()
		}
		return err
	}
	defer stop()
	svc, err := ingest.NewService(nc, g, c.Ingest(), ingest.WithLogger(log), ingest.WithHTTP(c.HTTP), ingest.WithProfiles(c.Profiles), ingest.WithLeaseTTL(c.LeaseTTL),
		ingest.WithFootprint(fp), ingest.WithMetrics(m))
	if err != nil {
		stop()
		st.Close()
		made.remove()
		return err
	}
	return svc.Run(ctx)
}

// openServed opens the graph at uri for `worker run`: read-only, since full recovery restores
// tables, which is only safe with no other writer alive (the service runs it once the lease
// is its own), or initialised from the schema setting when uri holds no graph.
func openServed(ctx context.Context, c *config.Config, uri string, log *zap.Logger) (storage.Store, *engine.Graph, error) {
	// The object store's client library logs through this logger, not in plain text beside it.
	st, err := openRoot(ctx, uri, c, storage.WithLog(func(level, msg string) {
		if level == "WARN" {
			log.Warn(msg, zap.String("from", "object store client"))
			return
		}
		log.Debug(msg, zap.String("from", "object store client"), zap.String("level", level))
	}))
	if err != nil {
		return nil, nil, err
	}
	storage.KeepSpares(st) // a long-lived writer: its files are created ahead of its commits
	g, err := engine.OpenReadOnly(ctx, st)
	if err != nil && c.Schema != "" {
		if ok, _ := st.Exists(ctx, "__schema_state.json"); !ok {
			src, rerr := readSchema(c.Schema)
			if rerr != nil {
				st.Close()
				return nil, nil, rerr
			}
			var o engine.InitOptions
			if c.LanceFileVersion != "" {
				o.FileVersion, _ = config.FileVersion(c.LanceFileVersion) // validated with the config
			}
			g, err = engine.Init(ctx, st, src, o)
			err = schemaFileError(c.Schema, err)
			if err == nil {
				log.Info("initialised graph", zap.String("root", st.URI()), zap.String("schema", c.Schema))
			}
		}
	}
	if err != nil && c.Schema == "" {
		if ok, _ := st.Exists(ctx, "__schema_state.json"); !ok {
			err = &storage.NoGraphError{Root: st.URI(), Hint: "pass --schema FILE.pg (or OMNIGRAPH_SCHEMA) to initialise one"}
		}
	}
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, g, nil
}

// embeddedStore is the embedded NATS server's store directory: nats_dir, or <root>.nats beside
// a local root at loc (an OS path), or .data/nats; "" when nats_url names a server.
func embeddedStore(c *config.Config, loc string) string {
	if c.NATSURL != "" {
		return ""
	}
	if c.NATSDir != "" {
		return c.NATSDir
	}
	loc = strings.TrimSuffix(loc, "/")
	if strings.Contains(loc, "://") {
		return ".data/nats"
	}
	return loc + ".nats"
}

// connectServed connects `worker run` to nats_url, or to an embedded server it starts when
// nats_url is empty (its store in nats_dir, by default <root>.nats beside a local root loc);
// stop drains the connection and ends that server. A nil connection and error: ctx ended while
// NATS was being waited for, and nothing was taken from a stream.
func connectServed(ctx context.Context, c *config.Config, loc string, log *zap.Logger) (nc *nats.Conn, stop func(), err error) {
	url := c.NATSURL
	var shutdown func()
	if url == "" {
		dir := embeddedStore(c, loc)
		sync, _ := config.SyncInterval(c.NATSSyncInterval) // validated with the config
		ns, err := ingest.StartEmbedded(dir, c.NATSPort, ingest.EmbeddedSync(sync))
		if err != nil {
			// (the port was free a moment ago: checkPorts)
			return nil, nil, fmt.Errorf("embedded NATS on %s:%d (nats_port): %w", embeddedHost, c.NATSPort, err)
		}
		shutdown = ns.Shutdown
		url = ns.ClientURL()
		log.Info("embedded NATS JetStream", zap.String("url", url), zap.String("store", dir), zap.String("sync_interval", c.NATSSyncInterval))
	}
	// On a cluster the connection moves between the servers nats_url lists; the log says where.
	opts := append(c.NATSOptions("omnigraph-worker"), nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("NATS disconnected", zap.Error(err)) }),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", zap.String("server", nc.ConnectedServerName()), zap.String("url", nc.ConnectedUrlRedacted()))
		}))
	nc, err = connectNATS(ctx, url, opts, log)
	if err != nil {
		if shutdown != nil {
			shutdown()
		}
		if ctx.Err() != nil {
			return nil, nil, nil // stopped while waiting for NATS: nothing was taken from the stream
		}
		return nil, nil, err
	}
	log.Info("NATS connected", zap.String("server", nc.ConnectedServerName()), zap.String("url", nc.ConnectedUrlRedacted()))
	return nc, func() {
		_ = nc.Drain()
		if shutdown != nil {
			shutdown()
		}
	}, nil
}

// connectNATS connects to url, waiting with backoff while no server answers (a worker started
// beside its NATS server, as in docker-compose, must not die for being first) until ctx ends.
// Any other failure (credentials, TLS) is returned at once.
func connectNATS(ctx context.Context, url string, opts []nats.Option, log *zap.Logger) (*nats.Conn, error) {
	retry := backoff.NewExponentialBackOff()
	retry.InitialInterval, retry.MaxInterval, retry.MaxElapsedTime = 200*time.Millisecond, 5*time.Second, 0
	for {
		nc, err := nats.Connect(url, opts...)
		if err == nil {
			return nc, nil
		}
		if !errors.Is(err, nats.ErrNoServers) {
			return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
		}
		wait := retry.NextBackOff()
		log.Warn("NATS not reachable; retrying", zap.String("url", url), zap.Duration("in", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func cmdRecover(fs *flagSet) runFunc {
	list := fs.Bool("list", false, "only list pending recovery sidecars; change nothing")
	restoreDrift := fs.Bool("restore-drift", false, "then restore every table a writer outside a graph commit moved (table_drift) to its published version, and publish it")
	force := forceFlag(fs)
	settings := bindSettings(fs, config.RootSettings)
	return func(ctx context.Context, args []string) error {
		c, err := settings.load()
		if err != nil {
			return err
		}
		st, err := openRoot(ctx, c.Root, c, storage.MustExist())
		if err != nil {
			return err
		}
		defer st.Close()
		if *list {
			listed, err := recovery.List(ctx, st)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "OPERATION\tKIND\tBRANCH\tPHASE\tTABLES\tSTARTED")
			for _, l := range listed {
				sc, ok, err := recovery.Read(ctx, st, l.Name)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				phase, tables := "-", []string{}
				if sc.ProtocolV3 != nil {
					phase = string(sc.ProtocolV3.EffectPhase)
				}
				if sc.ProtocolV7 != nil {
					phase = string(sc.ProtocolV7.EffectPhase)
				}
				for _, t := range sc.Tables {
					tables = append(tables, t.TableKey)
				}
				started := "-"
				if us, err := strconv.ParseInt(sc.StartedAt, 10, 64); err == nil {
					started = time.UnixMicro(us).UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", sc.OperationID, sc.WriterKind, orDash(sc.Branch), phase, strings.Join(tables, ","), started)
			}
			return tw.Flush()
		}
		if err := refuseLiveWorker(st, *force); err != nil {
			return err
		}
		g, err := engine.OpenReadOnly(ctx, st)
		if err != nil {
			return err
		}
		out, err := g.Recover(ctx)
		for _, o := range out {
			fmt.Printf("%s %s on %s", o.Action, o.OperationID, o.Branch)
			if o.GraphCommitID != "" {
				fmt.Printf(" (commit %s)", o.GraphCommitID)
			}
			for _, t := range o.Tables {
				fmt.Printf(" %s:%d->%d", t.TableKey, t.FromVersion, t.ToVersion)
			}
			if o.Reason != "" {
				fmt.Printf(": %s", o.Reason)
			}
			fmt.Println()
		}
		if err == nil && len(out) == 0 {
			fmt.Println("no pending recovery sidecars")
		}
		if err != nil || !*restoreDrift {
			return err
		}
		restored, err := g.RestoreDrift(ctx)
		for _, r := range restored {
			fmt.Printf("restored %s on %s: Lance HEAD %d back to published version %d (as version %d, commit %s)\n",
				r.TableKey, r.Branch, r.Head, r.Published, r.Restored, r.GraphCommitID)
		}
		if err == nil && len(restored) == 0 {
			fmt.Println("no drifted tables")
		}
		return err
	}
}

// cmdBranch is `branch create|list|delete`: each subcommand declares only the flags it takes.
func cmdBranch(sub string) func(fs *flagSet) runFunc {
	return func(fs *flagSet) runFunc {
		from, asJSON, force := new(string), new(bool), new(bool)
		switch sub {
		case "create":
			from = fs.String("from", "main", "the branch to fork from")
			force = forceFlag(fs)
		case "delete":
			force = forceFlag(fs)
		case "list":
			asJSON = fs.Bool("json", false, "print JSON")
		}
		settings := bindSettings(fs, config.RootSettings)
		return func(ctx context.Context, args []string) error {
			if sub != "list" && len(args) != 1 {
				return &usageError{msg: "branch " + sub + " takes one NAME"}
			}
			if sub == "list" && len(args) != 0 {
				return &usageError{msg: "branch list takes no arguments"}
			}
			c, err := settings.load()
			if err != nil {
				return err
			}
			g, closeGraph, err := openGraph(ctx, c.Root, c, false, false)
			if err != nil {
				return err
			}
			defer closeGraph()
			if sub == "list" {
				bs, err := g.Branches(ctx)
				if err != nil {
					return err
				}
				if *asJSON {
					return printJSON(bs)
				}
				fmt.Println("main")
				for _, b := range bs {
					fmt.Printf("%s (from %s at manifest version %d)\n", b.Name, b.ParentBranch, b.ParentVersion)
				}
				return nil
			}
			if err := refuseLiveWorker(g.Root(), *force); err != nil {
				return err
			}
			if sub == "create" {
				err = g.CreateBranch(ctx, args[0], *from)
			} else {
				err = g.DeleteBranch(ctx, args[0])
			}
			if err == nil {
				fmt.Printf("%s branch %s\n", map[string]string{"create": "created", "delete": "deleted"}[sub], args[0])
			}
			return err
		}
	}
}

// openInput opens a batch file, or standard input for "-".
func openInput(path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(path)
}

// connectJetStream connects a producer or operator tool to NATS with c's settings (URL,
// credentials, TLS), as the connection named client.
func connectJetStream(c *config.Config, client string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(c.NATSURL, c.NATSOptions(client)...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w", c.NATSURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}
