package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// cmdMerge merges a branch directly on a graph root (--root), or publishes a merge request to
// a graph's merge subject for the running worker to apply in stream order (--graph).
func cmdMerge(fs *flagSet) runFunc {
	to := targetFlags(fs, "merge directly", "a merge request to omnigraph.<graph>.merge")
	source := fs.String("source", "", "the branch to merge")
	target := fs.String("target", "main", "the branch to merge into")
	deleteSource := fs.Bool("delete-source", false, "delete the source branch after a successful merge")
	actor := fs.String("actor", "", "actor id recorded on the merge commit")
	msgID := fs.String("msg-id", "", "receipt key (direct) or Nats-Msg-Id (with --graph)")
	noProof := fs.Bool("no-certified-route", false, "always use the ordinary diff (for comparisons)")
	force := forceFlag(fs)
	wait := waitFlags(fs)
	return func(ctx context.Context, args []string) error {
		const usage = "merge needs --source and exactly one of --root (merge now) or --graph (publish a merge request)"
		if *source == "" || len(args) != 0 {
			return &usageError{msg: usage}
		}
		c, err := to.resolve(usage)
		if err != nil {
			return err
		}
		if c.Graph != "" {
			return publishMerge(ctx, c, ingest.MergeRequestBody{Source: *source, Target: *target, DeleteSource: *deleteSource}, *actor, *msgID, wait)
		}
		g, closeGraph, err := openGraph(ctx, c.Root, c, true, *force)
		if err != nil {
			return err
		}
		defer closeGraph()
		req := engine.MergeRequest{Source: *source, Target: *target, DeleteSource: *deleteSource, Actor: *actor, NoCertifiedRoute: *noProof}
		if *msgID != "" {
			req.Receipt = &publisher.Receipt{MsgID: *msgID}
		}
		res, err := g.Merge(ctx, req)
		if err != nil {
			return err
		}
		if res.BranchDeleteError != "" {
			fmt.Fprintln(os.Stderr, "warning: merged, but the source branch was not deleted:", res.BranchDeleteError)
		}
		return printJSON(res)
	}
}

// requestTarget is the root or graph of a command that either writes a graph directly or
// asks the graph's worker to, by a request it applies in stream order under its lease.
type requestTarget struct {
	settings *boundSettings
}

// targetFlags declares the root settings (--root, local_fsync) and the NATS settings
// (--graph, --nats-url, credentials, TLS); direct and request say in --root's help what each
// way does.
func targetFlags(fs *flagSet, direct, request string) requestTarget {
	t := requestTarget{settings: bindSettings(fs, config.NATSSettings, config.RootSettings)}
	f := fs.Lookup("root")
	f.Usage = "graph root URI: " + direct + " (or --graph: publish " + request + " instead; with both only from the environment or the config file, --graph) (env " + config.EnvName("root") + ")"
	return t
}

// resolve merges the settings and picks the way: a config left with a Graph publishes the
// request, one left with only a Root works on it directly. The command line decides first:
// --root and --graph together are refused with usage, either alone wins over the other from
// the environment or the file. With both from there (a worker's own environment), the request
// goes to the worker: it is the graph's one writer, and a direct write beside it is refused.
func (t requestTarget) resolve(usage string) (*config.Config, error) {
	c, err := t.settings.load()
	if err != nil {
		return nil, err
	}
	rootFlag, graphFlag := t.settings.Flagged("root"), t.settings.Flagged("graph")
	switch {
	case rootFlag && graphFlag:
		return nil, &usageError{msg: usage}
	case rootFlag:
		c.Graph = ""
	case graphFlag, c.Graph != "":
		c.Root = ""
	}
	if c.Graph == "" && c.Root == "" {
		return nil, &usageError{msg: usage}
	}
	return c, nil
}

func publishMerge(ctx context.Context, c *config.Config, body ingest.MergeRequestBody, actor, msgID string, w waitOptions) error {
	cfg := c.Ingest()
	return publishRequest(ctx, c, cfg.MergeSubject(), body, actor, msgID, w)
}

// publishMaintenance asks a graph's worker to optimize or clean up (its event reports what it
// did).
func publishMaintenance(ctx context.Context, c *config.Config, body ingest.MaintenanceRequestBody, actor string, w waitOptions) error {
	cfg := c.Ingest()
	return publishRequest(ctx, c, cfg.MaintenanceSubject(), body, actor, "", w)
}

// publishRequest publishes a JSON request to subject, waits for JetStream to store it, then
// (unless --no-wait) for its outcome: the event it is printed, a dead letter is the error.
func publishRequest(ctx context.Context, c *config.Config, subject string, body any, actor, msgID string, w waitOptions) error {
	if *w.timeout <= 0 {
		return &usageError{msg: w.fs.named("wait-timeout") + " must be positive"}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	nc, js, err := connectJetStream(c, "omnigraph-worker request")
	if err != nil {
		return err
	}
	defer nc.Close()
	m := nats.NewMsg(subject)
	m.Data = data
	if actor != "" {
		m.Header.Set(ingest.HeaderActor, actor)
	}
	if msgID != "" {
		m.Header.Set(ingest.HeaderMsgID, msgID)
	}
	var mark uint64
	if !*w.noWait {
		mark = eventsMark(ctx, js, c.Ingest())
	}
	ack, err := ingest.Publish(ctx, js, c.Ingest(), m)
	if err != nil {
		return err
	}
	fmt.Printf("published to %s: stream %s sequence %d duplicate %v\n", m.Subject, ack.Stream, ack.Sequence, ack.Duplicate)
	if *w.noWait {
		return nil
	}
	ev, err := waitFor(ctx, js, c.Ingest(), ack, mark, *w.timeout, w.fs.named("wait-timeout"))
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(ev, &v); err != nil {
		return err
	}
	return printJSON(v)
}
