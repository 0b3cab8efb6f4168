package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// cmdMerge merges a branch directly on a graph root (--root), or publishes a merge request to
// a graph's merge subject for the running worker to apply in stream order (--graph).
func cmdMerge(ctx context.Context, args []string) error {
	fs := newFlags("merge")
	to := targetFlags(fs, "merge directly", "a merge request to omnigraph.<graph>.merge")
	source := fs.String("source", "", "the branch to merge")
	target := fs.String("target", "main", "the branch to merge into")
	deleteSource := fs.Bool("delete-source", false, "delete the source branch after a successful merge")
	actor := fs.String("actor", "", "actor id recorded on the merge commit")
	msgID := fs.String("msg-id", "", "receipt key (direct) or Nats-Msg-Id (with --graph)")
	noProof := fs.Bool("no-certified-route", false, "always use the ordinary diff (for comparisons)")
	force := forceFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *source == "" || !to.one() || fs.NArg() != 0 {
		return &usageError{msg: "merge needs --source and exactly one of --root (merge now) or --graph (publish a merge request)"}
	}
	if *to.graph != "" {
		return publishMerge(ctx, *to.natsURL, *to.graph, ingest.MergeRequestBody{Source: *source, Target: *target, DeleteSource: *deleteSource}, *actor, *msgID)
	}
	g, closeGraph, err := openGraph(ctx, *to.root, true, *force)
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

// requestTarget is the --root or --graph of a command that either writes a graph directly or
// asks the graph's worker to, by a request it applies in stream order under its lease.
type requestTarget struct{ root, graph, natsURL *string }

// targetFlags declares --root (help: what it does directly), --graph (help: the request it
// publishes) and --nats-url.
func targetFlags(fs *flag.FlagSet, direct, request string) requestTarget {
	return requestTarget{
		root:    fs.String("root", "", "graph root URI: "+direct),
		graph:   fs.String("graph", "", "graph name: publish "+request+" instead"),
		natsURL: fs.String("nats-url", "nats://127.0.0.1:4222", "NATS server URL (with --graph)"),
	}
}

// one reports whether exactly one of --root and --graph was given.
func (t requestTarget) one() bool { return (*t.root == "") != (*t.graph == "") }

func publishMerge(ctx context.Context, url, graph string, body ingest.MergeRequestBody, actor, msgID string) error {
	cfg := ingest.Config{Graph: graph}
	return publishRequest(ctx, url, cfg.MergeSubject(), body, actor, msgID)
}

// publishMaintenance asks a graph's worker to optimize or clean up (its event reports what it
// did).
func publishMaintenance(ctx context.Context, url, graph string, body ingest.MaintenanceRequestBody, actor string) error {
	cfg := ingest.Config{Graph: graph}
	return publishRequest(ctx, url, cfg.MaintenanceSubject(), body, actor, "")
}

// publishRequest publishes a JSON request to subject and waits for JetStream to store it.
func publishRequest(ctx context.Context, url, subject string, body any, actor, msgID string) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	nc, js, err := connectJetStream(url)
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
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		return err
	}
	fmt.Printf("published to %s: stream %s sequence %d duplicate %v\n", m.Subject, ack.Stream, ack.Sequence, ack.Duplicate)
	return nil
}
