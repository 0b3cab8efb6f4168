package recovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

var memSeq atomic.Int64

// stores returns a local store and an in-memory store, each rooted at a fresh graph root.
func stores(t *testing.T) map[string]storage.Store {
	t.Helper()
	ctx := context.Background()
	out := map[string]storage.Store{}
	local, err := storage.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mem, err := storage.Open(ctx, fmt.Sprintf("mem://recovery-test-%d/graphs/g1", memSeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	out["local"], out["mem"] = local, mem
	t.Cleanup(func() { local.Close(); mem.Close() })
	return out
}

// armedFor builds an Armed sidecar bound to st's graph root.
func armedFor(t *testing.T, st storage.Store) *Sidecar {
	t.Helper()
	spec := branchSpec()
	spec.Root = RootLocation(st)
	s, err := NewLoadSidecar(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func confirmOf(t *testing.T, s *Sidecar) *Sidecar {
	t.Helper()
	ups, txns := confirmedUpdates()
	c, err := s.Confirm(ups, txns)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			if l, err := List(ctx, st); err != nil || len(l) != 0 {
				t.Fatalf("empty root lists %v, %v", l, err)
			}
			s := armedFor(t, st)
			if err := Write(ctx, st, s, nil); err != nil {
				t.Fatal(err)
			}
			disk, err := st.Get(ctx, Key(s.OperationID))
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := Marshal(s); string(disk) != string(want) {
				t.Fatalf("on disk:\n%s\nwant:\n%s", disk, want)
			}
			listed, err := List(ctx, st)
			if err != nil || len(listed) != 1 || listed[0].Name != FileName(s.OperationID) || listed[0].Key != Key(s.OperationID) || listed[0].Size != int64(len(disk)) {
				t.Fatalf("listed %+v, %v", listed, err)
			}
			got, ok, err := Read(ctx, st, listed[0].Name)
			if err != nil || !ok || got.ProtocolV3.EffectPhase != Armed || got.OperationID != s.OperationID {
				t.Fatalf("read %+v %v %v", got, ok, err)
			}

			c := confirmOf(t, got)
			if err := Rewrite(ctx, st, c, nil); err != nil {
				t.Fatal(err)
			}
			got, ok, err = Read(ctx, st, listed[0].Name)
			if err != nil || !ok || got.ProtocolV3.EffectPhase != EffectsConfirmed || *got.Tables[0].ConfirmedVersion != 4 {
				t.Fatalf("after rewrite %+v %v %v", got, ok, err)
			}

			if err := Delete(ctx, st, s.OperationID); err != nil {
				t.Fatal(err)
			}
			if err := Delete(ctx, st, s.OperationID); err != nil {
				t.Fatalf("second delete: %v", err)
			}
			if l, err := List(ctx, st); err != nil || len(l) != 0 {
				t.Fatalf("after delete lists %v, %v", l, err)
			}
		})
	}
}

func TestListFiltersAndSorts(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			var made []*Sidecar
			for range 3 {
				made = append(made, armedFor(t, st))
			}
			for _, i := range []int{2, 0, 1} { // written out of order
				if err := Write(ctx, st, made[i], nil); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range []string{Dir + "/README", Dir + "/x.json.bak", Dir + "/sub/" + FileName(goldenOp), "other/" + FileName(goldenOp)} {
				if err := st.Put(ctx, k, []byte("{}")); err != nil {
					t.Fatal(err)
				}
			}
			listed, err := List(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if len(listed) != 3 {
				t.Fatalf("listed %+v", listed)
			}
			for i, l := range listed {
				if l.Name != FileName(made[i].OperationID) {
					t.Fatalf("position %d: %s, want %s", i, l.Name, FileName(made[i].OperationID))
				}
			}
		})
	}
}

// A writer may publish and delete its sidecar between discovery's LIST and its GET: benign.
func TestReadVanishedBetweenListAndGet(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := armedFor(t, st)
			if err := Write(ctx, st, s, nil); err != nil {
				t.Fatal(err)
			}
			listed, err := List(ctx, st)
			if err != nil || len(listed) != 1 {
				t.Fatal(listed, err)
			}
			if err := Delete(ctx, st, s.OperationID); err != nil { // the concurrent writer's Phase D
				t.Fatal(err)
			}
			got, ok, err := Read(ctx, st, listed[0].Name)
			if got != nil || ok || err != nil {
				t.Fatalf("vanished sidecar: %v %v %v", got, ok, err)
			}
		})
	}
}

// A corrupt, future or foreign sidecar is refused loudly by Read and stays on disk.
func TestReadRefusesAndLeavesFile(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			foreign := newArmed(t) // bound to /data/g1, not this store
			foreignJSON, _ := Marshal(foreign)
			future := strings.Replace(goldenArmed, `"schema_version": 9`, `"schema_version": 10`, 1)
			for body, kind := range map[string]ErrorKind{
				`{"schema_version": 9, "operation_id": `: KindCorrupt,
				future:                                   KindFutureVersion,
				string(foreignJSON):                      KindForeignRoot,
			} {
				if err := st.Put(ctx, Key(goldenOp), []byte(body)); err != nil {
					t.Fatal(err)
				}
				_, ok, err := Read(ctx, st, FileName(goldenOp))
				var se *SidecarError
				if ok || !errors.As(err, &se) || se.Kind != kind || se.File != st.Location(Key(goldenOp)) {
					t.Fatalf("want %s refusal naming %s, got ok=%v %v", kind, st.Location(Key(goldenOp)), ok, err)
				}
				if still, found, err := st.GetIfExists(ctx, Key(goldenOp)); err != nil || !found || string(still) != body {
					t.Fatalf("refused sidecar was touched: found=%v err=%v", found, err)
				}
			}
			if _, _, err := Read(ctx, st, Key(goldenOp)); err == nil {
				t.Fatal("Read accepted a key instead of a file name")
			}
		})
	}
}

// Write and Rewrite validate against the store's own root and never store an invalid sidecar.
func TestWriteRefusesInvalid(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			foreign := newArmed(t)
			wantRefusal(t, Write(ctx, st, foreign, nil), KindForeignRoot, "foreign")
			bad := armedFor(t, st)
			bad.ProtocolV3.Effects[0].PlannedTransaction.ReadVersion = 99
			wantRefusal(t, Rewrite(ctx, st, bad, nil), KindShape, "reads version 99")
			if l, err := List(ctx, st); err != nil || len(l) != 0 {
				t.Fatalf("invalid sidecar stored: %v %v", l, err)
			}
			if err := Delete(ctx, st, "../x"); err == nil {
				t.Fatal("Delete accepted a non-ULID operation id")
			}
		})
	}
}

func withFailpoint(t *testing.T, name string) {
	t.Helper()
	if err := failpoint.Enable(name, "error"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Disable(name) })
}

func wantInjected(t *testing.T, err error, name string) {
	t.Helper()
	var fe *failpoint.Error
	if !errors.As(err, &fe) || fe.Name != name {
		t.Fatalf("want injected %s, got %v", name, err)
	}
}

// Each I/O step fails loudly under its failpoint and leaves the durable state as it was.
func TestFailpoints(t *testing.T) {
	ctx := context.Background()
	st := stores(t)["local"]

	s := armedFor(t, st)
	t.Run("write", func(t *testing.T) {
		withFailpoint(t, FailpointWrite)
		wantInjected(t, Write(ctx, st, s, nil), FailpointWrite)
		if _, found, _ := st.GetIfExists(ctx, Key(s.OperationID)); found {
			t.Fatal("sidecar stored despite the failed write")
		}
	})
	t.Run("storage put", func(t *testing.T) {
		withFailpoint(t, "storage.put")
		wantInjected(t, Write(ctx, st, s, nil), "storage.put")
	})
	if err := Write(ctx, st, s, nil); err != nil {
		t.Fatal(err)
	}
	t.Run("confirm", func(t *testing.T) {
		withFailpoint(t, FailpointConfirm)
		wantInjected(t, Rewrite(ctx, st, confirmOf(t, s), nil), FailpointConfirm)
		got, ok, err := Read(ctx, st, FileName(s.OperationID))
		if err != nil || !ok || got.ProtocolV3.EffectPhase != Armed {
			t.Fatalf("after failed confirm: %v %v %v", got, ok, err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		withFailpoint(t, FailpointDelete)
		wantInjected(t, Delete(ctx, st, s.OperationID), FailpointDelete)
		if _, found, _ := st.GetIfExists(ctx, Key(s.OperationID)); !found {
			t.Fatal("sidecar gone despite the failed delete")
		}
	})
	t.Run("list", func(t *testing.T) {
		withFailpoint(t, FailpointList)
		l, err := List(ctx, st)
		wantInjected(t, err, FailpointList)
		if l != nil {
			t.Fatalf("failed list returned %v", l)
		}
	})
	t.Run("storage list_dir", func(t *testing.T) {
		withFailpoint(t, "storage.list_dir")
		_, err := List(ctx, st)
		wantInjected(t, err, "storage.list_dir")
	})
	t.Run("read", func(t *testing.T) {
		withFailpoint(t, "storage.get_if_exists")
		got, ok, err := Read(ctx, st, FileName(s.OperationID))
		wantInjected(t, err, "storage.get_if_exists")
		if got != nil || ok {
			t.Fatal("a failed GET was reported as a sidecar")
		}
	})
}

// The whole Phase A–D sequence against a store, as a Load drives it.
func TestPhasesAgainstStore(t *testing.T) {
	ctx := context.Background()
	st := stores(t)["mem"]
	s := armedFor(t, st)
	if err := Write(ctx, st, s, nil); err != nil {
		t.Fatal(err)
	}
	ups, txns := confirmedUpdates()
	ups[0].Meta = publisher.TableVersionMetadata{ManifestPath: st.Location("edges/x")}
	c, err := s.Confirm(ups, map[ids.TableIdentity]Transaction{idPerson: txns[idPerson], idKnows: txns[idKnows]})
	if err != nil {
		t.Fatal(err)
	}
	if err := Rewrite(ctx, st, c, nil); err != nil {
		t.Fatal(err)
	}
	got, ok, err := Read(ctx, st, FileName(c.OperationID))
	if err != nil || !ok {
		t.Fatal(err)
	}
	want, _ := Marshal(c)
	have, _ := Marshal(got)
	assertJSON(t, have, string(want))
	if err := Delete(ctx, st, c.OperationID); err != nil {
		t.Fatal(err)
	}
}
