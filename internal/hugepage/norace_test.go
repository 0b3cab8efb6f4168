//go:build !race

package hugepage

const raceEnabled = false
