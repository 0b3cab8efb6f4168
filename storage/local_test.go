package storage_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/storage"
	"github.com/omnigraph/omnigraph-worker/storage/storagetest"
)

const (
	childEnv   = "STORAGE_TEST_PUT_IF_ABSENT_CHILD" // "<id>|<dir>|<start file>|<keys>"
	childProcs = 4
	childKeys  = 200
)

func raceKey(k int) string { return fmt.Sprintf("_versions/%d.manifest", k) }

// racePayload is distinct per writer and key, and long enough (tens of KiB, several write
// calls' worth) that a torn or interleaved file would not match any writer's payload.
func racePayload(w, k int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("<writer %d key %d>", w, k)), 3000+w*17)
}

// TestLocalPutIfAbsentCrossProcess races childProcs copies of this test binary on the same
// keys. fileblob's IfNotExist (an in-process stat under a mutex) fails this; link(2) passes.
func TestLocalPutIfAbsentCrossProcess(t *testing.T) {
	if spec := os.Getenv(childEnv); spec != "" {
		putIfAbsentChild(t, spec)
		return
	}
	dir := t.TempDir()
	ctl := t.TempDir()
	start := filepath.Join(ctl, "start")
	var outs []*bytes.Buffer
	var cmds []*exec.Cmd
	for id := range childProcs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLocalPutIfAbsentCrossProcess$", "-test.count=1", "-test.timeout=5m")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d|%s|%s|%d", childEnv, id, dir, start, childKeys))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		outs, cmds = append(outs, out), append(cmds, cmd)
	}
	// Release all children at once, after each has opened its store and is polling.
	deadline := time.Now().Add(time.Minute)
	for id := 0; id < childProcs; {
		if _, err := os.Stat(filepath.Join(ctl, "ready-"+strconv.Itoa(id))); err == nil {
			id++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatal("children did not become ready")
		}
		time.Sleep(time.Millisecond)
	}
	if err := os.WriteFile(start, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	winners := make([][]int, childKeys)
	for id, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", id, err, outs[id])
		}
		sc := bufio.NewScanner(outs[id])
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "WIN "):
				k, err := strconv.Atoi(strings.TrimPrefix(line, "WIN "))
				if err != nil {
					t.Fatalf("child %d: bad line %q", id, line)
				}
				winners[k] = append(winners[k], id)
			case strings.HasPrefix(line, "BAD "):
				t.Errorf("child %d: %s", id, line)
			}
		}
	}
	s := openT(t, dir)
	wins := make([]int, childProcs)
	for k, ws := range winners {
		if len(ws) != 1 {
			t.Fatalf("key %d: winners %v, want exactly one", k, ws)
		}
		wins[ws[0]]++
		got, err := s.Get(t.Context(), raceKey(k))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, racePayload(ws[0], k)) {
			t.Fatalf("key %d: content is not winner %d's payload (%d bytes)", k, ws[0], len(got))
		}
	}
	t.Logf("wins per process: %v", wins)
	if slices.Max(wins) == childKeys {
		t.Fatalf("one process won every key: there was no race, so nothing was tested")
	}
	objs, err := s.List(t.Context(), "")
	if err != nil || len(objs) != childKeys {
		t.Fatalf("List: %d objects, %v; want %d", len(objs), err, childKeys)
	}
	storagetest.AssertNoTempFiles(t, dir)
}

func putIfAbsentChild(t *testing.T, spec string) {
	parts := strings.Split(spec, "|")
	id, _ := strconv.Atoi(parts[0])
	dir, start := parts[1], parts[2]
	keys, _ := strconv.Atoi(parts[3])
	s, err := storage.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if id%2 == 0 {
		storage.KeepSpares(s) // half the writers publish through spare files
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(start), "ready-"+strconv.Itoa(id)), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	ctl := filepath.Dir(start)
	waitFor := func(path string) {
		for {
			if _, err := os.Stat(path); err == nil {
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	waitFor(start)
	for k := range keys {
		// A barrier per key: every child attempts key k at (nearly) the same moment, so each
		// key is a fresh race rather than the fastest child winning everything after the first.
		arrive := func(c int) string { return filepath.Join(ctl, fmt.Sprintf("arrive-%d-%d", k, c)) }
		if err := os.WriteFile(arrive(id), nil, 0o666); err != nil {
			t.Fatal(err)
		}
		for c := range childProcs {
			waitFor(arrive(c))
		}
		err := s.PutIfAbsent(t.Context(), raceKey(k), racePayload(id, k))
		switch {
		case err == nil:
			fmt.Printf("WIN %d\n", k)
		case errors.Is(err, storage.ErrAlreadyExists):
			// The loser reads at once: the file it sees must already be complete.
			got, err := s.Get(t.Context(), raceKey(k))
			if err != nil {
				fmt.Printf("BAD key %d: get after losing: %v\n", k, err)
				continue
			}
			whole := false
			for w := range childProcs {
				whole = whole || bytes.Equal(got, racePayload(w, k))
			}
			if !whole {
				fmt.Printf("BAD key %d: torn read of %d bytes\n", k, len(got))
			}
		default:
			fmt.Printf("BAD key %d: %v\n", k, err)
		}
	}
}

// TestLocalTempFilesCleanedUp covers every PutIfAbsent and Put exit path that has written a
// temporary file.
func TestLocalTempFilesCleanedUp(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	dir := t.TempDir()
	s := openT(t, dir)
	ctx := t.Context()
	check := func(step string) {
		t.Helper()
		storagetest.AssertNoTempFiles(t, dir)
		if t.Failed() {
			t.Fatalf("after %s", step)
		}
	}
	if err := s.PutIfAbsent(ctx, "a/b", []byte("1")); err != nil {
		t.Fatal(err)
	}
	check("PutIfAbsent success")
	if err := s.PutIfAbsent(ctx, "a/b", []byte("2")); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("second PutIfAbsent: %v", err)
	}
	check("PutIfAbsent losing")
	// A directory occupies the name: link fails with EEXIST but the key holds no object, so
	// this must not be reported as ErrAlreadyExists.
	if err := s.Put(ctx, "d/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	err := s.PutIfAbsent(ctx, "d", []byte("1"))
	if err == nil || errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("PutIfAbsent over a directory = %v; want a plain error", err)
	}
	check("PutIfAbsent over a directory")
	if err := s.Put(ctx, "d", []byte("1")); err == nil {
		t.Fatal("Put over a non-empty directory succeeded")
	}
	check("failed Put (rename over a directory)")
	// A parent that is a file: the temporary file cannot even be created.
	if err := s.PutIfAbsent(ctx, "a/b/c", []byte("1")); err == nil {
		t.Fatal("PutIfAbsent below a file succeeded")
	}
	check("PutIfAbsent below a file")
	if err := s.Put(ctx, "a/b", []byte("overwritten")); err != nil {
		t.Fatal(err)
	}
	check("Put success")
	if err := failpoint.Enable("storage.put_if_absent", "error"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "e", []byte("1")); !failpoint.IsInjected(err) {
		t.Fatalf("armed failpoint: %v", err)
	}
	failpoint.Reset()
	check("injected PutIfAbsent failure")
	objs, err := s.List(ctx, "")
	if err != nil || len(objs) != 2 {
		t.Fatalf("List = %v, %v; want a/b and d/x", objs, err)
	}
}

// TestLocalHidesFileblobTemps: another gocloud tool writing the same directory leaves
// "<name>.<hex>.tmp" files while it writes (and forever if it crashes).
func TestLocalHidesFileblobTemps(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"t/a.lance.18a2f3c4e5a6b7c8.tmp", "t/a.lance", "t/report.tmp", "t/x.abc.tmp"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(name), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	s := openT(t, dir)
	objs, err := s.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	if got := strings.Join(keys, ","); got != "t/a.lance,t/report.tmp,t/x.abc.tmp" {
		t.Fatalf("List = %s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "t", "a.lance.attrs")); err == nil {
		t.Fatal("sidecar written")
	}
}

// TestLocalOnlyNotFoundIsAbsent: a failure to look (here ENAMETOOLONG) is an error, not "absent".
func TestLocalOnlyNotFoundIsAbsent(t *testing.T) {
	s := openT(t, t.TempDir())
	key := strings.Repeat("x", 300)
	if _, ok, err := s.GetIfExists(t.Context(), key); err == nil || ok {
		t.Fatalf("GetIfExists(name too long) = %v, %v; want an error", ok, err)
	}
	if _, err := s.Exists(t.Context(), key); err == nil {
		t.Fatal("Exists(name too long): want an error")
	}
	if err := s.Put(t.Context(), "k.attrs", nil); !errors.Is(err, storage.ErrInvalidKey) {
		t.Fatalf("Put(k.attrs) = %v; want ErrInvalidKey on local roots", err)
	}
}

// TestLocalDeletePrefixPrunesDirs: a deleted table leaves no empty directory skeleton, and the
// opened root directory itself survives DeletePrefix("").
func TestLocalDeletePrefixPrunesDirs(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	ctx := t.Context()
	for _, k := range []string{"t/data/a.lance", "t/_versions/1.manifest", "u/keep"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeletePrefix(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "t")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory t survived DeletePrefix: %v", err)
	}
	if err := s.DeletePrefix(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("root after DeletePrefix(\"\"): %v, %v; want it empty but present", entries, err)
	}
	sub := s.Sub("w")
	if err := sub.Put(ctx, "x/y", nil); err != nil {
		t.Fatal(err)
	}
	if err := sub.DeletePrefix(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "w")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Sub directory survived its DeletePrefix(\"\"): %v", err)
	}
	if err := sub.Put(ctx, "again", nil); err != nil { // and the Sub stays usable
		t.Fatal(err)
	}
	if err := s.Put(ctx, "v", nil); err != nil {
		t.Fatal(err)
	}
}

// A file that vanishes between the directory read and its stat (a concurrent writer's temp
// file) must not fail a listing.
func TestLocalListToleratesVanishingEntries(t *testing.T) {
	dir := t.TempDir()
	s, err := storage.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "v/keep", []byte("x")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := filepath.Join(dir, "v", fmt.Sprintf("k#%d", i))
			_ = os.WriteFile(p, []byte("t"), 0o644)
			_ = os.Remove(p)
		}
	}()
	for i := 0; i < 300; i++ {
		files, _, err := s.ListDir(t.Context(), "v")
		if err != nil {
			close(stop)
			t.Fatalf("ListDir while entries churn: %v", err)
		}
		if len(files) != 1 || files[0].Key != "v/keep" {
			close(stop)
			t.Fatalf("listing %v", files)
		}
		if _, err := s.List(t.Context(), ""); err != nil {
			close(stop)
			t.Fatalf("List while entries churn: %v", err)
		}
	}
	close(stop)
	<-done
}
