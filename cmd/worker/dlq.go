package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

// cmdDLQ is the operators' dead-letter tool: list, show, replay, delete.
func cmdDLQ(sub string) func(fs *flagSet) runFunc {
	return func(fs *flagSet) runFunc {
		settings := bindSettings(fs, config.NATSSettings).require("graph")
		reason, asJSON, seqRange, mode, branch, from, split, dryRun := new(string), new(bool), new(string), new(string), new(string), new(string), new(bool), new(bool)
		confirm, all := new(bool), new(bool)
		wait, waitTimeout := new(bool), new(time.Duration)
		var listOut *output
		if sub != "show" {
			reason = fs.String("reason", "", "only dead letters of this reason ("+strings.Join(errs.DeadLetterReasons(), ", ")+")")
		}
		switch sub {
		case "list":
			listOut = outputFlag(fs, true, formatTable, formatJSON) // -o, and --json its alias
			asJSON = listOut.json
		case "replay":
			seqRange = fs.String("seq", "", "replay only dead-letter sequences A-B (or one sequence)")
			mode = fs.String("mode", "", "replay with this Omnigraph-Mode (e.g. merge)")
			branch = fs.String("branch", "", "replay into this branch (e.g. a quarantine branch)")
			from = fs.String("from", "", "with --branch: fork it from this base if missing")
			split = fs.Bool("split", false, "replay split into batches under the limits, nodes before edges")
			dryRun = fs.Bool("dry-run", false, "show what a replay would do, changing nothing")
			wait = fs.Bool("wait", false, "then wait for the outcome event of each message replayed, print it and exit by the first that failed (as publish --wait)")
			waitTimeout = fs.Duration("wait-timeout", 10*time.Minute, "with --wait: how long to wait for all the outcomes (then exit 13, wait_timeout)")
		case "delete":
			seqRange = fs.String("seq", "", "delete these dead-letter sequences: SEQ or A-B, separated by commas (as the arguments)")
			all = fs.Bool("all", false, "delete every dead letter (of --reason, if given)")
			confirm = fs.Bool("confirm", false, "delete; without it the command only shows what it would delete")
			asJSON = fs.Bool("json", false, "print JSON")
		}
		return func(ctx context.Context, args []string) error {
			if sub != "show" && sub != "delete" && len(args) != 0 {
				return &usageError{msg: "dlq " + sub + " takes no arguments"}
			}
			if err := checkReason(fs, *reason); err != nil {
				return err
			}
			if listOut != nil {
				f, err := listOut.format()
				if err != nil {
					return err
				}
				*asJSON = f == formatJSON
			}
			switch sub {
			case "replay":
				o := ingest.ReplayOptions{Reason: *reason, Mode: *mode, Branch: *branch, From: *from, Split: *split, DryRun: *dryRun}
				if err := checkReplay(fs, &o, *seqRange); err != nil {
					return err
				}
				switch {
				case *wait && *dryRun:
					return &usageError{msg: "dlq replay --wait has nothing to wait for with " + fs.named("dry-run")}
				case *wait && *waitTimeout <= 0:
					return &usageError{msg: "dlq replay " + fs.named("wait-timeout") + " must be positive"}
				}
				var w *replayWait
				if *wait {
					w = &replayWait{timeout: *waitTimeout, flag: fs.named("wait-timeout")}
				}
				return dlqReplay(ctx, settings, o, *seqRange != "", w)
			case "delete":
				o, err := deleteSelection(fs, args, *seqRange, *reason, *all)
				if err != nil {
					return err
				}
				o.DryRun = !*confirm
				return dlqDelete(ctx, settings, o, *asJSON)
			}
			return dlq(ctx, sub, args, settings, *reason, *asJSON)
		}
	}
}

// dlq runs a dlq subcommand once its command line is parsed and checked.
func dlq(ctx context.Context, sub string, args []string, settings *boundSettings, reason string, asJSON bool) error {
	c, err := settings.load()
	if err != nil {
		return err
	}
	nc, js, err := connectJetStream(c, "omnigraph-worker dlq")
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg := c.Ingest()
	switch sub {
	case "list":
		dls, err := ingest.DeadLetters(ctx, js, cfg, reason)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(dls)
		}
		return printDeadLetters(dls)
	case "show":
		if len(args) != 1 {
			return &usageError{msg: "dlq show takes one SEQ"}
		}
		seq, err := strconv.ParseUint(args[0], 10, 64)
		if err != nil {
			return &usageError{msg: "SEQ must be a number"}
		}
		dls, err := ingest.DeadLetters(ctx, js, cfg, "")
		if err != nil {
			return err
		}
		for _, d := range dls {
			if d.Seq == seq {
				keys := make([]string, 0, len(d.Header))
				for k := range d.Header {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				fmt.Printf("seq %d on %s at %s\n", d.Seq, d.Subject, d.Time.UTC().Format(time.RFC3339Nano))
				for _, k := range keys {
					fmt.Printf("%s: %s\n", k, strings.Join(d.Header[k], ", "))
				}
				if d.BodyOmitted > 0 {
					fmt.Printf("\n(the %d-byte body was too large to go with the error; it is message %d of stream %s, and replay fetches it from there)\n",
						d.BodyOmitted, d.OrigSeq, d.Header.Get(ingest.HeaderOrigStream))
					return nil
				}
				fmt.Printf("\n%s\n", d.Data)
				return nil
			}
		}
		return fmt.Errorf("no dead letter with sequence %d", seq)
	}
	return &usageError{msg: "dlq subcommands: list, show, replay, delete"}
}

// dlqReplay replays the dead letters o selects; hasSeq: o names a range, which must hold one.
func dlqReplay(ctx context.Context, settings *boundSettings, o ingest.ReplayOptions, hasSeq bool, w *replayWait) error {
	c, err := settings.load()
	if err != nil {
		return err
	}
	nc, js, err := connectJetStream(c, "omnigraph-worker dlq")
	if err != nil {
		return err
	}
	defer nc.Close()
	if w != nil {
		w.mark = eventsMark(ctx, js, c.Ingest())
		o.Published = func(dlqSeq uint64, ack *jetstream.PubAck) { w.sent = append(w.sent, replayed{dlqSeq, ack}) }
	}
	res, err := ingest.Replay(ctx, js, c.Ingest(), o, func(line string) { fmt.Println(line) })
	if w != nil {
		// What was published is waited for even when the replay stopped part way; the
		// replay's own error comes first.
		if werr := w.outcomes(ctx, js, c.Ingest()); err == nil {
			err = werr
		}
	}
	if err != nil && res == (ingest.ReplayResult{}) {
		return err // nothing done: no count to give
	}
	if err == nil && hasSeq && res.Replayed == 0 && res.Skipped == 0 {
		return fmt.Errorf("no dead letter%s with a sequence in %d-%d: nothing was replayed (dlq list shows them)", reasonSuffix(o.Reason), o.First, o.Last)
	}
	verb := "replayed"
	if o.DryRun {
		verb = "would replay"
	}
	fmt.Printf("%s %d dead letter(s) as %d message(s); %d left in place by the loop guard\n", verb, res.Replayed, res.Published, res.Skipped)
	if err == nil && res.Skipped > 0 {
		err = &loopGuardError{left: res.Skipped}
	}
	return err
}

// replayWait is dlq replay --wait: the messages a replay published, waited for in turn.
type replayWait struct {
	timeout time.Duration
	flag    string // --wait-timeout as the user set it
	mark    uint64 // the events stream's last sequence before the replay (eventsMark)
	sent    []replayed
}

// replayed is one message a replay published for dead letter dlqSeq.
type replayed struct {
	dlqSeq uint64
	ack    *jetstream.PubAck
}

// outcomes waits for the outcome event of each message replayed, within one timeout for all,
// prints each as publish --wait does, and returns the first failure (a dead letter again, a
// hold, the timeout).
func (w *replayWait) outcomes(ctx context.Context, js jetstream.JetStream, cfg ingest.Config) error {
	deadline := time.Now().Add(w.timeout)
	var first error
	for _, r := range w.sent {
		ev, err := waitFor(ctx, js, cfg, r.ack, w.mark, time.Until(deadline), w.flag)
		if ev != nil {
			fmt.Printf("dlq seq %d: %s\n", r.dlqSeq, describeEvent(ev))
		}
		if err != nil {
			var te *waitTimeoutError
			if errors.As(err, &te) {
				te.Timeout = w.timeout
			}
			if first == nil {
				first = err
			}
			if ev == nil {
				return first // a timeout, or the wait failed: the rest would fail alike
			}
		}
	}
	return first
}

// printDeadLetters prints dead letters as `dlq list` does.
func printDeadLetters(dls []ingest.DeadLetter) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tREASON\tORIGINAL\tTIME\tERROR")
	for _, d := range dls {
		e := d.Error
		if len(e) > 100 {
			e = e[:100] + "…"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", d.Seq, d.Reason, d.OrigSeq, d.Time.UTC().Format(time.RFC3339), e)
	}
	return tw.Flush()
}

// deleteSelection reads dlq delete's selection: the sequences of its arguments and --seq, a
// reason, or --all; at least one of them, each sequence a number and each range forwards.
func deleteSelection(fs *flagSet, args []string, seqs, reason string, all bool) (ingest.DeleteOptions, error) {
	o := ingest.DeleteOptions{Reason: reason, All: all}
	items := slices.Clone(args)
	if seqs != "" {
		items = append(items, seqs)
	}
	for _, item := range items {
		rs, err := ingest.ParseSeqs(item)
		if err != nil {
			var se *ingest.SelectionError
			if errors.As(err, &se) && item == seqs {
				se.From = fs.named("seq")
			}
			return o, err
		}
		o.Seqs = append(o.Seqs, rs...)
	}
	if len(o.Seqs) == 0 && reason == "" && !all {
		return o, &usageError{msg: "dlq delete needs the dead letters to delete: SEQ[,SEQ|A-B...] (or --seq), --reason R, or --all"}
	}
	if len(o.Seqs) > 0 && all {
		return o, &usageError{msg: "dlq delete takes sequences or --all, not both"}
	}
	return o, nil
}

// dlqDelete deletes (o.DryRun: shows) the dead letters o selects: the list as `dlq list`
// prints it (or with asJSON, the result as JSON), what happens to their bodies sent by
// reference, and the count.
func dlqDelete(ctx context.Context, settings *boundSettings, o ingest.DeleteOptions, asJSON bool) error {
	c, err := settings.load()
	if err != nil {
		return err
	}
	nc, js, err := connectJetStream(c, "omnigraph-worker dlq")
	if err != nil {
		return err
	}
	defer nc.Close()
	res, err := ingest.DeleteDeadLetters(ctx, js, c.Ingest(), o)
	if err != nil && res.Deleted == 0 {
		return err // refused, or failed, before anything was deleted
	}
	if asJSON {
		if perr := printJSON(res); perr != nil && err == nil {
			err = perr
		}
		return err
	}
	if perr := printDeadLetters(res.DeadLetters); perr != nil && err == nil {
		err = perr
	}
	for _, b := range res.Bodies {
		switch {
		case b.Deleted && o.DryRun:
			fmt.Printf("would also delete the %d-byte body of dead letter %d: message %d of stream %s\n", b.Bytes, b.DeadLetter, b.Seq, b.Stream)
		case b.Deleted:
			fmt.Printf("deleted the %d-byte body of dead letter %d too: message %d of stream %s\n", b.Bytes, b.DeadLetter, b.Seq, b.Stream)
		default:
			fmt.Printf("the body of dead letter %d (message %d of stream %s) stays: %s\n", b.DeadLetter, b.Seq, b.Stream, b.NotDeleted)
		}
	}
	if o.DryRun {
		fmt.Printf("would delete %d dead letter(s); nothing was deleted (add --confirm to delete them)\n", res.Deleted)
		return err
	}
	fmt.Printf("deleted %d dead letter(s)\n", res.Deleted)
	return err
}

// checkReason refuses a --reason no dead letter can have, which would otherwise list, replay
// or delete nothing without a word.
func checkReason(fs *flagSet, reason string) error {
	if reason == "" || slices.Contains(errs.DeadLetterReasons(), reason) {
		return nil
	}
	return &usageError{msg: fmt.Sprintf("%s %q is not a dead-letter reason (%s)", fs.named("reason"), reason, strings.Join(errs.DeadLetterReasons(), ", "))}
}

// loopGuardError says that dead letters were left in place because they had been replayed too
// often already: the replay did not do all it was asked, so the command fails.
type loopGuardError struct{ left int }

func (e *loopGuardError) Error() string {
	return fmt.Sprintf("%d dead letter(s) left in place by the loop guard (replayed %d times already): look at them with `dlq show`; they would only fail again", e.left, ingest.DefaultMaxReplays)
}

// checkReplay refuses, before anything is published, a replay the worker would dead-letter for
// its headers alone (as publish checks them) and a range that names no sequence; it sets o's
// range from seqRange (A-B, or one sequence).
func checkReplay(fs *flagSet, o *ingest.ReplayOptions, seqRange string) error {
	if err := checkHeaders(fs.named, o.Branch, o.From, o.Mode); err != nil {
		return err
	}
	if o.From != "" && o.Branch == "" {
		return &usageError{msg: fmt.Sprintf("%s forks the branch --branch names: give --branch too", fs.named("from"))}
	}
	if seqRange == "" {
		return nil
	}
	a, b, ok := strings.Cut(seqRange, "-")
	if !ok {
		b = a
	}
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return &usageError{msg: fmt.Sprintf("%s %s: want A-B (or one sequence)", fs.named("seq"), seqRange)}
	}
	if x > y {
		return &usageError{msg: fmt.Sprintf("%s %s: the first sequence is after the last", fs.named("seq"), seqRange)}
	}
	o.First, o.Last = x, y
	return nil
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " of reason " + reason
}
