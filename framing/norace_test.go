//go:build !race

package framing

// frameAllocShare is the most a frame that reuses released memory may allocate, in percent of
// what ParseRetained allocates for the same batch.
const frameAllocShare = 30
