package main

import "time"

// What a process pays for memory it has never touched moves on this machine too, and which
// page size costs less has flipped under the same guest: 4 KiB pages once cost two to fifty
// times as much per MiB as 2 MiB ones, later a tenth as much (performance.md, seventeenth and
// thirty-second sessions). A worker young enough to be growing its heap pays it on every MiB
// of growth, so the sustained lines print both sizes' cost (hugepage.FirstTouch) beside
// create_us.

// touchProbeBytes is how much fresh memory a first-touch probe maps in each page size: 16
// huge pages, about 0.25 s on a host that charges 8 ms a MiB for them.
const touchProbeBytes = 32 << 20

// msPerMiB is what touchProbeBytes' first touch took, per MiB, in milliseconds.
func msPerMiB(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond) / float64(touchProbeBytes>>20)
}
