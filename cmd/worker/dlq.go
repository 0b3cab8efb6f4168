package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

// cmdDLQ is the operators' dead-letter tool: list, show, replay.
func cmdDLQ(sub string) func(fs *flagSet) runFunc {
	return func(fs *flagSet) runFunc {
		settings := bindSettings(fs, config.NATSSettings).require("graph")
		reason, asJSON, seqRange, mode, branch, from, split, dryRun := new(string), new(bool), new(string), new(string), new(string), new(string), new(bool), new(bool)
		if sub != "show" {
			reason = fs.String("reason", "", "only dead letters of this reason ("+strings.Join(errs.DeadLetterReasons(), ", ")+")")
		}
		switch sub {
		case "list":
			asJSON = fs.Bool("json", false, "print JSON")
		case "replay":
			seqRange = fs.String("seq", "", "replay only dead-letter sequences A-B (or one sequence)")
			mode = fs.String("mode", "", "replay with this Omnigraph-Mode (e.g. merge)")
			branch = fs.String("branch", "", "replay into this branch (e.g. a quarantine branch)")
			from = fs.String("from", "", "with --branch: fork it from this base if missing")
			split = fs.Bool("split", false, "replay split into batches under the limits, nodes before edges")
			dryRun = fs.Bool("dry-run", false, "show what a replay would do, changing nothing")
		}
		return func(ctx context.Context, args []string) error {
			if sub != "show" && len(args) != 0 {
				return &usageError{msg: "dlq " + sub + " takes no arguments"}
			}
			return dlq(ctx, sub, args, settings, *reason, *asJSON, *seqRange, *mode, *branch, *from, *split, *dryRun)
		}
	}
}

// dlq runs a dlq subcommand once its command line is parsed.
func dlq(ctx context.Context, sub string, args []string, settings *boundSettings, reason string, asJSON bool, seqRange, mode, branch, from string, split, dryRun bool) error {
	if err := checkReason(reason); err != nil {
		return err
	}
	if sub == "replay" {
		if err := checkReplay(seqRange, mode, branch, from); err != nil {
			return err
		}
	}
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
	case "replay":
		o := ingest.ReplayOptions{Reason: reason, Mode: mode, Branch: branch, From: from, Split: split, DryRun: dryRun}
		if seqRange != "" {
			a, b, ok := strings.Cut(seqRange, "-")
			if !ok {
				b = a
			}
			if o.First, err = strconv.ParseUint(a, 10, 64); err != nil {
				return &usageError{msg: "--seq wants A-B"}
			}
			if o.Last, err = strconv.ParseUint(b, 10, 64); err != nil {
				return &usageError{msg: "--seq wants A-B"}
			}
		}
		res, err := ingest.Replay(ctx, js, cfg, o, func(line string) { fmt.Println(line) })
		if err == nil && seqRange != "" && res.Replayed == 0 && res.Skipped == 0 {
			return fmt.Errorf("no dead letter%s with a sequence in %d-%d: nothing was replayed (dlq list shows them)", reasonSuffix(reason), o.First, o.Last)
		}
		verb := "replayed"
		if dryRun {
			verb = "would replay"
		}
		fmt.Printf("%s %d dead letter(s) as %d message(s); %d left in place by the loop guard\n", verb, res.Replayed, res.Published, res.Skipped)
		if err == nil && res.Skipped > 0 {
			err = &loopGuardError{left: res.Skipped}
		}
		return err
	}
	return &usageError{msg: "dlq subcommands: list, show, replay"}
}

// checkReason refuses a --reason no dead letter can have, which would otherwise list or replay
// nothing without a word.
func checkReason(reason string) error {
	if reason == "" || slices.Contains(errs.DeadLetterReasons(), reason) {
		return nil
	}
	return &usageError{msg: fmt.Sprintf("--reason %q is not a dead-letter reason (%s)", reason, strings.Join(errs.DeadLetterReasons(), ", "))}
}

// loopGuardError says that dead letters were left in place because they had been replayed too
// often already: the replay did not do all it was asked, so the command fails.
type loopGuardError struct{ left int }

func (e *loopGuardError) Error() string {
	return fmt.Sprintf("%d dead letter(s) left in place by the loop guard (replayed %d times already): look at them with `dlq show`; they would only fail again", e.left, ingest.DefaultMaxReplays)
}

// checkReplay refuses, before anything is published, a replay the worker would dead-letter for
// its headers alone (as publish checks them) and a range that names no sequence.
func checkReplay(seqRange, mode, branch, from string) error {
	if err := checkHeaders(branch, from, mode); err != nil {
		return err
	}
	if from != "" && branch == "" {
		return &usageError{msg: "--from forks the branch --branch names: give --branch too"}
	}
	if a, b, ok := strings.Cut(seqRange, "-"); ok {
		x, errA := strconv.ParseUint(a, 10, 64)
		y, errB := strconv.ParseUint(b, 10, 64)
		if errA == nil && errB == nil && x > y {
			return &usageError{msg: fmt.Sprintf("--seq %s: the first sequence is after the last", seqRange)}
		}
	}
	return nil
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " of reason " + reason
}
