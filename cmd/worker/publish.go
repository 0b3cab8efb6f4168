package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

// cmdPublish is a producer for scripts. Unless --no-validate, it refuses what the worker would
// dead-letter without looking at the graph (framing, the mode, branch names) before it is
// queued, with the exit code of the worker's reason, as `load` does. With --wait it then waits
// for its batch's outcome event and exits by it (awaitOutcome): 0 committed, already applied
// or empty, the code of the dead letter's kind, the operators' code for a hold, wait_timeout's
// when none came.
func cmdPublish(fs *flagSet) runFunc {
	settings := bindSettings(fs, config.NATSSettings, config.RootSettings).require("graph")
	if f := fs.Lookup("root"); f != nil {
		f.Usage = "graph root URI: also check the batch against its schema before publishing (optional; read only) (env " + config.EnvName("root") + ")"
	}
	branch := fs.String("branch", "", "Omnigraph-Branch header (default main)")
	from := fs.String("from", "", "Omnigraph-From header: fork the branch from this base if missing")
	mode := fs.String("mode", "", "Omnigraph-Mode header: merge (default), append or overwrite")
	actor := fs.String("actor", "", "Omnigraph-Actor header")
	msgID := fs.String("msg-id", "", "Nats-Msg-Id header (producer dedupe and receipt key)")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for JetStream to store the batch (a 32 MiB batch can take more than the client's default 5s)")
	noValidate := fs.Bool("no-validate", false, "publish the batch as it is, without framing it and checking its headers first (the worker dead-letters what it refuses)")
	wait := fs.Bool("wait", false, "then wait for the batch's outcome event (committed, already_applied, empty, dead_lettered, held), print it and exit by it")
	waitTimeout := fs.Duration("wait-timeout", 10*time.Minute, "with --wait: how long to wait for the outcome (then exit 13, wait_timeout)")
	asJSON := fs.Bool("json", false, "print JSON: the outcome event with --wait, the publish acknowledgement without")
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return &usageError{msg: "publish needs one FILE argument (- for standard input)"}
		}
		c, err := settings.load()
		if err != nil {
			return err
		}
		if *timeout <= 0 {
			return &usageError{msg: "publish " + fs.named("timeout") + " must be positive"}
		}
		if *waitTimeout <= 0 {
			return &usageError{msg: "publish " + fs.named("wait-timeout") + " must be positive"}
		}
		if fs.Changed("wait-timeout") && !*wait {
			return &usageError{msg: "publish " + fs.named("wait-timeout") + " needs --wait"}
		}
		if !*noValidate {
			if err := checkHeaders(fs.named, *branch, *from, *mode); err != nil {
				return err
			}
		}
		in, err := openInput(args[0])
		if err != nil {
			return err
		}
		body, err := io.ReadAll(in)
		in.Close()
		if err != nil {
			return err
		}
		if !*noValidate {
			recs, err := checkBatch(body)
			if err != nil {
				return err
			}
			if c.Root != "" {
				if err := checkSchema(ctx, c, recs, *mode); err != nil {
					return err
				}
			}
		}
		nc, js, err := connectJetStream(c, "omnigraph-worker publish")
		if err != nil {
			return err
		}
		defer nc.Close()
		cfg := c.Ingest()
		m := nats.NewMsg(cfg.IngestSubject())
		m.Data = body
		for k, v := range map[string]string{ingest.HeaderBranch: *branch, ingest.HeaderFrom: *from, ingest.HeaderMode: *mode,
			ingest.HeaderActor: *actor, ingest.HeaderMsgID: *msgID} {
			if v != "" {
				m.Header.Set(k, v)
			}
		}
		if limit := ingest.MaxBodyBytes(m.Subject, m.Header); len(body) > limit {
			return fmt.Errorf("the batch is %d bytes; JetStream stores at most %d in one message on %s with these headers (32 MiB counting subject and headers): split it (%w)",
				len(body), limit, m.Subject, &errs.ResourceLimitExceeded{Resource: "nats_message_body_bytes", Limit: uint64(limit), Actual: uint64(len(body))})
		}
		pctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		var mark uint64
		if *wait {
			mark = eventsMark(pctx, js, cfg)
		}
		ack, err := ingest.Publish(pctx, js, cfg, m)
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("JetStream did not confirm the %d-byte batch within %v (%s); it may have stored it all the same, so only a publish with the same --msg-id is a safe retry: %w", len(body), *timeout, fs.named("timeout"), err)
		}
		if err != nil {
			return err
		}
		published := fmt.Sprintf("published to %s: stream %s sequence %d duplicate %v", m.Subject, ack.Stream, ack.Sequence, ack.Duplicate)
		switch {
		case !*wait && *asJSON:
			return printJSON(map[string]any{"subject": m.Subject, "stream": ack.Stream, "sequence": ack.Sequence, "duplicate": ack.Duplicate})
		case !*wait:
			fmt.Println(published)
			return nil
		case *asJSON:
			fmt.Fprintln(os.Stderr, published) // standard output is the event alone
		default:
			fmt.Println(published)
		}
		ev, err := waitFor(ctx, js, cfg, ack, mark, *waitTimeout, fs.named("wait-timeout"))
		if ev != nil {
			// A dead letter or a hold prints its event too: the error says why it exits so.
			if *asJSON {
				var v any
				if jerr := json.Unmarshal(ev, &v); jerr != nil {
					return jerr
				}
				if perr := printJSON(v); perr != nil {
					return perr
				}
			} else {
				fmt.Println(describeEvent(ev))
			}
		}
		return err
	}
}

// checkHeaders refuses the headers the worker refuses before it reads the body; named is the
// command's flag as the user set it (flagSet.named), which the error names.
func checkHeaders(named func(flag string) string, branch, from, mode string) error {
	for flag, name := range map[string]string{"branch": branch, "from": from} {
		if err := engine.CheckBranchName(named(flag), name); err != nil {
			return err
		}
	}
	switch engine.Mode(mode) {
	case "", engine.ModeAppend, engine.ModeMerge, engine.ModeOverwrite:
		return nil
	}
	return &errs.InvalidInput{Field: named("mode"), Reason: fmt.Sprintf("unknown load mode %q (want append, merge or overwrite)", mode)}
}

// checkBatch frames body as the worker does (framing.ParseBytes, default limits): a batch that
// fails here is one the worker would dead-letter as invalid or resource_limit.
func checkBatch(body []byte) ([]framing.Record, error) {
	recs, err := framing.ParseBytes(body, framing.DefaultLimits())
	if err != nil {
		return nil, fmt.Errorf("the batch was not published (--no-validate publishes it as it is): %w", err)
	}
	return recs, nil
}

// checkSchema checks the records against the schema of the graph at c.Root, as the worker's
// first step does (types, properties, values; not the keys, which depend on what commits
// before the batch): a batch that fails here is one it would dead-letter as invalid.
func checkSchema(ctx context.Context, c *config.Config, recs []framing.Record, mode string) error {
	g, closeGraph, err := openGraph(ctx, c.Root, c, false, false)
	if err != nil {
		return fmt.Errorf("the batch was not published: its schema could not be read (unset root, or --no-validate, to publish without this check): %w", err)
	}
	defer closeGraph()
	if mode == "" {
		mode = string(engine.ModeMerge)
	}
	if _, err := g.Build(engine.LoadRequest{Records: recs, Mode: engine.Mode(mode)}); err != nil {
		return fmt.Errorf("the batch was not published: the schema of %s refuses it (--no-validate publishes it as it is): %w", c.Root, err)
	}
	return nil
}
