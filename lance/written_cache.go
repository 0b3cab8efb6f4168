package lance

import (
	"slices"
	"strings"
)

// A writer reads back what it wrote a moment ago: the __manifest dataset merges its newest
// small fragments every 16 publishes (publisher.CompactTail), reading the data and deletion
// files its own last publishes wrote, then reads the merged file's ids to move its cached
// addresses. On an object store each read is a round trip inside a commit's chain. Data and
// deletion files are never changed once written (their names are random), so the bytes of
// the small ones this process wrote are kept in memory by location, within a byte budget, and
// a read of one of them is served from there. A miss (another process wrote it, it was
// evicted, the process restarted) reads storage as before; both give the same bytes.

// writtenFileMaxBytes is the largest file kept: __manifest fragments and deletion files, and
// the data files of small batches, not the data of bulk loads.
const writtenFileMaxBytes = 64 << 10

// DefaultWrittenCacheBytes is the default budget of the written-files cache: the files of
// a few hundred small commits.
const DefaultWrittenCacheBytes = 8 << 20

var writtenFiles = newLRU[string](DefaultWrittenCacheBytes, func(b []byte) []byte { return b }, func([]byte) {})

// SetWrittenCacheBytes sets the written-files cache's budget; 0 turns it off and empties it.
func SetWrittenCacheBytes(n int64) { writtenFiles.setBudget(n) }

// rememberWritten keeps the bytes of the file just written at key of a dataset directory
// (location: its absolute location) when it is a small data or deletion file. The bytes are
// copied: the caller's buffer is not ours to keep.
func rememberWritten(location, key string, b []byte) {
	if len(b) > writtenFileMaxBytes || !(strings.HasPrefix(key, "data/") || strings.HasPrefix(key, "_deletions/")) {
		return
	}
	writtenFiles.keep(location, slices.Clone(b), int64(len(b)))
}

// writtenBytes is the kept content of the file at location when it is size bytes long (a size
// the manifest records that differs means another file, read from storage). Callers must not
// modify it.
func writtenBytes(location string, size int64) ([]byte, bool) {
	b, ok := writtenFiles.get(location)
	if !ok || size >= 0 && int64(len(b)) != size {
		return nil, false
	}
	return b, true
}
