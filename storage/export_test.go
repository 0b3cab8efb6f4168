package storage

// SpareTarget is how many spare files a local root keeps ready.
const SpareTarget = spareTarget

// ReadySpares is how many spare files st has ready to take (a file is on disk a moment before
// it is ready).
func ReadySpares(st Store) int {
	s := unwrap(st).(*store)
	if s.spares == nil {
		return 0
	}
	s.spares.mu.Lock()
	defer s.spares.mu.Unlock()
	return len(s.spares.ready)
}

// LocalFsync reports whether st's local writes are fsynced.
func LocalFsync(st Store) bool { return !unwrap(st).(*store).noFsync }

// SyncEvent is one traced step of a local write with fsync on (dirsync.go).
type SyncEvent = syncEvent

// The kinds of SyncEvent.
const (
	EventFileSynced   = eventFileSynced
	EventPublished    = eventPublished
	EventDirSyncStart = eventDirSyncStart
	EventDirSyncDone  = eventDirSyncDone
	EventWriteStart   = eventWriteStart
	EventWriteDone    = eventWriteDone
	EventDirCreated   = eventDirCreated
)

// SyncedAfter reports whether a sync of dir in evs started after index from and ended before
// index before.
func SyncedAfter(evs []SyncEvent, dir string, from, before int) bool {
	return syncedAfter(evs, dir, from, before)
}

// TraceSyncs makes fn see every SyncEvent of this process, in order, until stop is called.
func TraceSyncs(fn func(SyncEvent)) (stop func()) { return setTrace(fn) }
