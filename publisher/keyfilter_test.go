package publisher

import (
	"fmt"
	"testing"
)

// No key added is ever reported absent, the false-positive rate stays under twice the first
// part's across growth, and the filter reads back bit for bit.
func TestKeyFilterHasNoFalseNegatives(t *testing.T) {
	f := &keyFilter{}
	const n = 300_000 // past the first parts' capacities: four parts
	for i := 0; i < n; i++ {
		f.add(fmt.Sprintf("ingest_receipt:m-%d", i))
	}
	if len(f.parts) < 3 || f.count() != n {
		t.Fatalf("%d parts, %d keys", len(f.parts), f.count())
	}
	for i := 0; i < n; i++ {
		if !f.mayContain(fmt.Sprintf("ingest_receipt:m-%d", i)) {
			t.Fatalf("key %d reported absent", i)
		}
	}
	fp := 0
	const probes = 200_000
	for i := 0; i < probes; i++ {
		if f.mayContain(fmt.Sprintf("ingest_receipt:new-%d", i)) {
			fp++
		}
	}
	if rate := float64(fp) / probes; rate > 2*filterFirstFPR {
		t.Fatalf("false-positive rate %.5f over %.5f", rate, 2*filterFirstFPR)
	}
	if bits := float64(f.bytes()*8) / n; bits > 40 {
		t.Fatalf("%.1f bits a key", bits)
	}
	g, rest, err := unmarshalFilter(f.marshal(nil))
	if err != nil || len(rest) != 0 || g.count() != n || g.bytes() != f.bytes() {
		t.Fatalf("read back: %v, %d left, %d keys", err, len(rest), g.count())
	}
	for i := range f.parts {
		for j := range f.parts[i].bits {
			if f.parts[i].bits[j] != g.parts[i].bits[j] {
				t.Fatalf("part %d word %d differs", i, j)
			}
		}
	}
	for _, cut := range []int{0, 3, 20, 40} {
		if _, _, err := unmarshalFilter(f.marshal(nil)[:cut]); err == nil {
			t.Fatalf("a filter cut at %d bytes was read", cut)
		}
	}
}
