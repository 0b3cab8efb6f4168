//go:build race

package framing

// The race detector makes sync.Pool drop a quarter of what is put back.
const frameAllocShare = 60
