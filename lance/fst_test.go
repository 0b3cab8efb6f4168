package lance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestFSTRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 10, 100, 1000, 5000} {
		m := map[string]uint64{}
		for len(m) < n {
			k := make([]byte, 1+r.IntN(8))
			for i := range k {
				k[i] = "abcdefghij\xc3\xa9xyz"[r.IntN(15)]
			}
			m[string(k)] = uint64(len(m))
		}
		if n == 3 {
			m[""] = 77
		}
		keys, vals, err := readFST(buildFST(m), 1<<30)
		if err != nil {
			t.Fatalf("%d keys: %v", n, err)
		}
		if len(keys) != len(m) || !slices.IsSorted(keys) {
			t.Fatalf("%d keys: read %d, sorted %v", n, len(keys), slices.IsSorted(keys))
		}
		for i, k := range keys {
			if m[k] != vals[i] {
				t.Fatalf("%d keys: %q = %d, want %d", n, k, vals[i], m[k])
			}
		}
	}
}

// A large node (more than 32 transitions) carries an input index; outputs up to 8 bytes.
func TestFSTWideNodes(t *testing.T) {
	m := map[string]uint64{}
	for b := 0; b < 256; b++ {
		m[string([]byte{byte(b)})] = uint64(b) << 40
		m[fmt.Sprintf("x%c", rune(b%128))] = uint64(b)
	}
	keys, vals, err := readFST(buildFST(m), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if m[k] != vals[i] {
			t.Fatalf("%q = %d, want %d", k, vals[i], m[k])
		}
	}
	if len(keys) != len(m) {
		t.Fatalf("%d keys, want %d", len(keys), len(m))
	}
}

// FuzzReadFST: any bytes either decode (and then re-encode to a map that reads back the same)
// or fail with an error; never a panic or an endless walk.
func FuzzReadFST(f *testing.F) {
	f.Add(buildFST(map[string]uint64{"brown": 1, "cafe": 7, "fox": 2, "run": 3, "ran": 11}))
	f.Add(buildFST(map[string]uint64{"": 5}))
	f.Add(buildFST(map[string]uint64{}))
	wide := map[string]uint64{}
	for b := 0; b < 64; b++ {
		wide[string([]byte{byte(b), 'x'})] = uint64(b) << 20
	}
	f.Add(buildFST(wide))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, vals, err := readFST(b, 1<<12)
		if err != nil {
			return
		}
		m := map[string]uint64{}
		for i, k := range keys {
			if _, dup := m[k]; dup {
				return // a hostile map may spell a key twice; nothing to compare
			}
			m[k] = vals[i]
		}
		k2, v2, err := readFST(buildFST(m), 1<<12)
		if err != nil || !slices.Equal(k2, keys) || !slices.Equal(v2, vals) {
			t.Fatalf("re-encoded map differs: %v", err)
		}
	})
}
