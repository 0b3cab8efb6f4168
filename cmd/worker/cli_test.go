package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// Help on the binary and on every verb and subcommand succeeds; an unknown verb, a missing
// subcommand and a bad flag are usage errors.
func TestHelpAndUsage(t *testing.T) {
	withEnv(t, nil)
	helps := [][]string{{"--help"}, {"-h"}, {"help"}, {"--version"}, {"branch", "-h"}, {"branch", "create", "-h"}, {"dlq", "show", "--help"}}
	for _, c := range commands {
		helps = append(helps, []string{c.name, "-h"})
	}
	for _, args := range helps {
		if _, err := captureStdout(t, func() error { return execute(context.Background(), args) }); err != nil {
			t.Errorf("worker %s: %v", strings.Join(args, " "), err)
		}
	}
	for _, args := range [][]string{nil, {"lod"}, {"branch"}, {"branch", "rename"}, {"load", "--bogus"}, {"run", "extra"}} {
		err := execute(context.Background(), args)
		if exitCode(err) != exitUsage {
			t.Errorf("worker %s: %v (exit %d), want usage", strings.Join(args, " "), err, exitCode(err))
		}
	}
	if err := execute(context.Background(), []string{"lod"}); err == nil || !strings.Contains(err.Error(), "did you mean load") {
		t.Errorf("no suggestion: %v", err)
	}
}

// Flags after a positional argument count, and a flag still beats the environment and the
// config file once it has gone through pflag.
func TestInterspersedFlagsAndPrecedence(t *testing.T) {
	root := initGraph(t)
	withEnv(t, nil)
	if _, err := captureStdout(t, func() error { return run("branch", "create", "--root", root, "x1", "--from", "main") }); err != nil {
		t.Fatal(err)
	}
	out, err := captureStdout(t, func() error { return run("branch", "list", "--root", root) })
	if err != nil || !strings.Contains(out, "x1 (from main") {
		t.Fatalf("branch list: %v\n%s", err, out)
	}
	// A given flag ranks above the environment and the file (http: the address health asks).
	yaml := writeTemp(t, "w.yaml", "http: 127.0.0.1:3\n")
	for _, env := range []map[string]string{{"OMNIGRAPH_HTTP": "127.0.0.1:1"}, {"OMNIGRAPH_CONFIG": yaml}} {
		withEnv(t, env)
		err := run("health", "--timeout", "1s", "--http", "127.0.0.1:2")
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1:2/readyz") {
			t.Errorf("%v: %v, want the flag's address asked", env, err)
		}
	}
}

// A key conflict names the id; a root a live worker serves is refused as usage.
func TestDescribeAndLiveWorkerExit(t *testing.T) {
	id := "alice"
	err := fmt.Errorf("load: %w", &errs.LineError{Line: 2, Err: &errs.KeyConflict{TypeKey: "node:Person", EntityID: &id}})
	if got := describe(err); !strings.Contains(got, `already has this id (id "alice")`) || exitCode(err) != 4 {
		t.Errorf("%s (exit %d)", got, exitCode(err))
	}
	if got := describe(&errs.KeyConflict{TypeKey: "node:Person"}); strings.Contains(got, "(id") {
		t.Errorf("no id to name: %s", got)
	}
	err = fmt.Errorf("branch: %w", &liveWorkerError{uri: "file:///g", pids: []int{1}})
	if exitCode(err) != exitUsage {
		t.Errorf("live worker refusal exits %d", exitCode(err))
	}
	var lw *liveWorkerError
	if !errors.As(err, &lw) {
		t.Fatal("not typed")
	}
}

// Help shows each setting's kind (duration, int, on|off), not "string" for all, and its
// default.
func TestHelpShowsSettingKinds(t *testing.T) {
	withEnv(t, nil)
	out, err := captureStdout(t, func() error { return execute(context.Background(), []string{"run", "-h"}) })
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--ack-wait duration", "--max-deliver int", "--local-fsync on|off", "--root string", "(default 30s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("run -h lacks %q:\n%s", want, out)
		}
	}
}
