//go:build race

package hugepage

// raceEnabled: the race detector's shadow memory takes small-page faults of its own for every
// heap page written.
const raceEnabled = true
