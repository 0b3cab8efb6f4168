// Package hugepage lets the Go heap be backed by transparent huge pages on kernels that give
// them only on request (transparent_hugepage=madvise, the usual distribution default).
//
// Why a writer might want them: a commit of a few thousand rows builds tens of megabytes of
// batches, index folds and file pages, and a growing graph's id indexes keep growing. Each
// first touch of a page is a page fault, and on a virtual machine the hypervisor may have to
// back the page too. Which page size that costs less per byte depends on the host, and it can
// change under the same guest: on the machine this was written on, 256 MiB touched in 4 KiB
// pages once took 1.05 s and 18-620 ms in 2 MiB ones; months later 0.14-0.2 s in 4 KiB pages
// and 1.9-2.2 s in 2 MiB ones (FirstTouch measures it). The Go runtime maps its heap without
// asking for huge pages (it did in Go 1.21.0 and stopped), so on a madvise kernel every heap
// page is a 4 KiB one unless AdviseHeap is asked for some.
//
// AdviseHeap grows the heap by a span of untouched address space, advises it MADV_HUGEPAGE
// and hands it back to the runtime; the advice stays with the mapping, which the runtime
// keeps for the life of the process and allocates from lowest address first, so the heap's
// growth into that span faults 2 MiB at a time.
package hugepage

// Result is what AdviseHeap did.
type Result struct {
	// Mode is the kernel's transparent huge page setting ("always", "madvise", "never"), or
	// "" where there is none (not Linux, or a kernel without them).
	Mode string
	// Advised is the bytes of heap address space advised: 0 unless Mode is "madvise" (with
	// "always" every page already may be huge; with "never" none can be).
	Advised int
}
