package recovery

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Failpoints fired by the I/O helpers, each before any storage call (the storage layer's own
// storage.* points fire inside it as usual).
const (
	FailpointWrite   = "recovery.sidecar_write"
	FailpointConfirm = "recovery.sidecar_confirm"
	FailpointDelete  = "recovery.sidecar_delete"
	FailpointList    = "recovery.sidecar_list"
)

// FileName is "<operationID>.json".
func FileName(operationID string) string { return operationID + ".json" }

// Key is the sidecar's key relative to the graph root: "__recovery/<operationID>.json".
func Key(operationID string) string { return Dir + "/" + FileName(operationID) }

// RootLocation is the graph root location of a store rooted at the graph root, in the form table
// pins use: Location("") without the trailing '/'.
func RootLocation(st storage.Store) string { return strings.TrimSuffix(st.Location(""), "/") }

// Write arms s (Phase A): it validates s against the store's graph root and puts
// __recovery/<operation_id>.json as one atomic whole-object write. Any error means the writer
// must abort before its first HEAD-advancing commit. fence is checked right before the put,
// after the failpoint: a writer paused there that lost its lease meanwhile arms nothing.
func Write(ctx context.Context, st storage.Store, s *Sidecar, fence Fence) error {
	if err := failpoint.Inject(FailpointWrite); err != nil {
		return fmt.Errorf("recovery: write sidecar: %w", err)
	}
	if err := fence.Check(ctx, "arm"); err != nil {
		return err
	}
	return put(ctx, st, s, "write")
}

// Rewrite replaces the sidecar object with s in one atomic whole-object write; it is how a writer
// records EffectsConfirmed (s from Confirm) and recovery its rollback plan. s must descend from a
// sidecar this process wrote (Write) or read (Read): the object is replaced only while it still
// holds the bytes that one had, so a writer that lost its lease can neither re-create a sidecar
// the new writer's recovery retired nor overwrite the plan that recovery wrote. That refusal
// is a *FenceError wrapping ErrSidecarMoved. On error the object is as it was. fence is checked
// first as well: a writer that knows it lost its lease does not even try.
func Rewrite(ctx context.Context, st storage.Store, s *Sidecar, fence Fence) error {
	if err := failpoint.Inject(FailpointConfirm); err != nil {
		return fmt.Errorf("recovery: rewrite sidecar: %w", err)
	}
	if err := fence.Check(ctx, "rewrite the sidecar"); err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("recovery: rewrite nil sidecar")
	}
	data, err := encodeValid(st, s, "rewrite")
	if err != nil {
		return err
	}
	if s.stored == nil {
		return fmt.Errorf("recovery: rewrite sidecar %s: it was neither written nor read here, so there is nothing to replace it over", s.OperationID)
	}
	if err := st.ReplaceIfUnchanged(ctx, Key(s.OperationID), s.stored, data); err != nil {
		if errors.Is(err, storage.ErrChanged) || errors.Is(err, storage.ErrNotFound) {
			return &FenceError{Step: "rewrite the sidecar", Err: fmt.Errorf("%w: %w", ErrSidecarMoved, err)}
		}
		return fmt.Errorf("recovery: rewrite sidecar %s: %w", s.OperationID, err)
	}
	s.stored = data
	return nil
}

// ErrSidecarMoved is a sidecar rewrite refused because the object no longer holds what this
// writer last saw: another writer (the new lease holder's recovery) changed or removed it.
var ErrSidecarMoved = errors.New("recovery: the sidecar was changed or removed by another writer")

func put(ctx context.Context, st storage.Store, s *Sidecar, op string) error {
	if s == nil {
		return fmt.Errorf("recovery: %s nil sidecar", op)
	}
	data, err := encodeValid(st, s, op)
	if err != nil {
		return err
	}
	if err := st.Put(ctx, Key(s.OperationID), data); err != nil {
		return fmt.Errorf("recovery: %s sidecar %s: %w", op, s.OperationID, err)
	}
	s.stored = data
	return nil
}

// encodeValid validates s against the store's graph root and encodes it.
func encodeValid(st storage.Store, s *Sidecar, op string) ([]byte, error) {
	if err := s.validate(Key(s.OperationID), RootLocation(st)); err != nil {
		return nil, err
	}
	data, err := Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("recovery: %s sidecar %s: %w", op, s.OperationID, err)
	}
	return data, nil
}

// Delete removes the sidecar of operationID (Phase D). Deleting an absent sidecar succeeds. The
// writer logs and swallows a failure, since its write is already published.
func Delete(ctx context.Context, st storage.Store, operationID string) error {
	if err := failpoint.Inject(FailpointDelete); err != nil {
		return fmt.Errorf("recovery: delete sidecar %s: %w", operationID, err)
	}
	if !ids.IsULID(operationID) {
		return fmt.Errorf("recovery: delete sidecar: operation id %q is not a canonical ULID", operationID)
	}
	if err := st.Delete(ctx, Key(operationID)); err != nil {
		return fmt.Errorf("recovery: delete sidecar %s: %w", operationID, err)
	}
	return nil
}

// Listed is one sidecar object found by List.
type Listed struct {
	Name string // file name, "<operation_id>.json"; pass it to Read
	Key  string // key relative to the graph root
	Size int64
}

// List lists __recovery/ once and returns its .json objects sorted by name, which for ULID names
// is chronological. Other names and sub-directories are ignored; nothing is read. A failure is
// always returned: a consumer must never treat an unreadable directory as empty.
func List(ctx context.Context, st storage.Store) ([]Listed, error) {
	if err := failpoint.Inject(FailpointList); err != nil {
		return nil, fmt.Errorf("recovery: list sidecars: %w", err)
	}
	files, _, err := st.ListDir(ctx, Dir)
	if err != nil {
		return nil, fmt.Errorf("recovery: list sidecars: %w", err)
	}
	out := make([]Listed, 0, len(files))
	for _, f := range files {
		name := f.Key[strings.LastIndexByte(f.Key, '/')+1:]
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		out = append(out, Listed{Name: name, Key: f.Key, Size: f.Size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Read fetches and parses one listed sidecar with a single GET. ok is false, with no error, when
// the object no longer exists: a writer may publish and delete its sidecar between List and
// Read, which is a benign concurrent completion. Every other storage failure is returned as is,
// and a body Parse refuses is returned as its *SidecarError with the object left untouched.
func Read(ctx context.Context, st storage.Store, name string) (s *Sidecar, ok bool, err error) {
	if name == "" || strings.ContainsRune(name, '/') {
		return nil, false, fmt.Errorf("recovery: read sidecar: %q is not a file name under %s/", name, Dir)
	}
	key := Dir + "/" + name
	data, found, err := st.GetIfExists(ctx, key)
	if err != nil {
		return nil, false, fmt.Errorf("recovery: read sidecar %s: %w", name, err)
	}
	if !found {
		return nil, false, nil
	}
	s, err = Parse(st.Location(key), data, RootLocation(st))
	if err != nil {
		return nil, false, err
	}
	s.stored = data
	return s, true, nil
}
