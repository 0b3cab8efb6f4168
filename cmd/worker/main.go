// Command worker is the omnigraph-worker binary: the JetStream worker (`run`), a producer
// (`publish`), and the graph tools (`init`, `load`, `export`, `commits`, `recover`).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// Exit codes: one per error kind (graph/errs's catalogue gives each kind its code; the kinds
// that need an operator share one), so scripts can route failures without parsing text.
const (
	exitOK       = errs.ExitOK
	exitInternal = errs.ExitInternal
	exitUsage    = errs.ExitUsage
)

// getenv is the process environment as the commands see it: they pass it to config, the one
// reader of OMNIGRAPH_* settings, and read nothing else but the Go runtime's GOGC and
// GOMEMLIMIT. Tests replace it.
var getenv = os.Getenv

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string) error
}

var commands = []command{
	{"init", "create a graph from a .pg schema", cmdInit},
	{"load", "apply an NDJSON graph batch as one commit", cmdLoad},
	{"export", "write a branch's rows as NDJSON in the load envelope", cmdExport},
	{"commits", "list a branch's graph commits", cmdCommits},
	{"branch", "graph branches: create NAME [--from B], list [--json], delete NAME", cmdBranch},
	{"merge", "merge --source S [--target T] [--delete-source] into one commit (--root), or publish the request (--graph)", cmdMerge},
	{"optimize", "compact main's tables (fragment runs; --all for everything Lance would) in one commit", cmdOptimize},
	{"cleanup", "remove old versions and the files only they name (--keep N [--older-than 7d]; a preview unless --confirm)", cmdCleanup},
	{"recover", "resolve pending recovery sidecars (--list to only show them; --restore-drift also puts drifted tables back)", cmdRecover},
	{"dlq", "dead letters: list [--reason R] [--json], show SEQ, replay [--reason R] [--seq A-B] [--mode M] [--branch B --from BASE] [--split] [--dry-run]", cmdDLQ},
	{"publish", "publish a graph batch to a graph's ingest subject (a producer for scripts)", cmdPublish},
	{"run", "consume graph batches from NATS JetStream", cmdRun},
	{"health", "ask a running worker's /readyz (--live: /healthz); exit 0 only on 200", cmdHealth},
	{"version", "print the version", func(context.Context, []string) error { fmt.Println("omnigraph-worker 0.1.0"); return nil }},
}

// usageError is a bad command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: worker <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'worker <command> -h' for a command's flags.")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(exitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range commands {
		if c.name == os.Args[1] {
			err := c.run(ctx, os.Args[2:])
			if err != nil {
				fmt.Fprintln(os.Stderr, "error:", err)
			}
			os.Exit(exitCode(err))
		}
	}
	usage()
	os.Exit(exitUsage)
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	var ce *config.Error
	if errors.As(err, &ue) || errors.As(err, &ce) {
		return exitUsage
	}
	return kindExit(err)
}
