package hugepage

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// vmaAnonHuge is AnonHugePages, in bytes, of the mapping of this process that holds b's first
// byte (/proc/self/smaps).
func vmaAnonHuge(t *testing.T, b []byte) int64 {
	t.Helper()
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := vmaRange(line); ok {
			in = lo <= addr && addr < hi
			continue
		}
		if n, ok := anonHugeField(line); in && ok {
			if n < 0 {
				t.Fatalf("smaps: %q", line)
			}
			return n
		}
	}
	t.Fatalf("smaps: no mapping holds %#x", addr)
	return 0
}

// vmaRange parses a mapping's first line, "lo-hi perms ...".
func vmaRange(line string) (lo, hi uint64, ok bool) {
	r, _, found := strings.Cut(line, " ")
	a, b, dash := strings.Cut(r, "-")
	if !found || !dash {
		return 0, 0, false
	}
	lo, err1 := strconv.ParseUint(a, 16, 64)
	hi, err2 := strconv.ParseUint(b, 16, 64)
	return lo, hi, err1 == nil && err2 == nil
}

// The probe touches every page of both spans, backs the small one with small pages only, and
// the huge one with huge pages where the kernel gives them.
func TestFirstTouchBacksEachSpanAsAdvised(t *testing.T) {
	mode, err := kernelMode(enabledPath)
	if err != nil {
		t.Fatal(err)
	}
	const n = 16 << 20
	var smallHuge, hugeHuge int64
	small, huge, err := firstTouch(n-1, func(s, h []byte) { // rounded up to 16 MiB
		if len(s) != n || len(h) != n {
			t.Fatalf("spans of %d and %d bytes, want %d", len(s), len(h), n)
		}
		for _, b := range [][]byte{s, h} {
			for i := 0; i < len(b); i += pageBytes {
				if b[i] != 1 {
					t.Fatalf("page %d of a span was not touched", i/pageBytes)
				}
			}
		}
		smallHuge, hugeHuge = vmaAnonHuge(t, s), vmaAnonHuge(t, h)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %q: 16 MiB first touched in %v (small pages), %v (huge); %d and %d bytes in huge pages", mode, small, huge, smallHuge, hugeHuge)
	if small <= 0 || huge <= 0 {
		t.Errorf("durations %v and %v", small, huge)
	}
	if mode == "" {
		return // no transparent huge pages in this kernel: both spans are small pages
	}
	if smallHuge != 0 {
		t.Errorf("the span advised MADV_NOHUGEPAGE holds %d bytes in huge pages", smallHuge)
	}
	// The kernel falls back to small pages where it finds no free huge page: half is proof
	// enough that the advice took.
	if mode != "never" && hugeHuge < n/2 {
		t.Errorf("kernel %q: the span advised MADV_HUGEPAGE holds only %d bytes in huge pages", mode, hugeHuge)
	}
	if mode == "never" && hugeHuge != 0 {
		t.Errorf("kernel %q: %d bytes in huge pages", mode, hugeHuge)
	}
}

func TestFirstTouchRefusesNothing(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, _, err := FirstTouch(n); err == nil || !strings.Contains(err.Error(), fmt.Sprint(n)) {
			t.Errorf("FirstTouch(%d): %v", n, err)
		}
	}
}
