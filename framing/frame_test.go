package framing

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// frameBodies are batches that take every path: template lines, the fast path's first lines,
// lines the general scanner frames (whitespace in values, escapes), blank lines, and a body
// large enough to be framed in parts.
func frameBodies() map[string][]byte {
	return map[string][]byte{
		"graph":   graphBody(0, 1000),
		"general": []byte("{\"type\":\"A\",\"data\":{\"x\": [1, 2]}}\n\n{\"edge\":\"E\",\"from\":\"a\\u0062\",\"to\":\"c\",\"data\":{\"id\":\"e\\n1\",\"w\":1}}\r\n{\"type\":\"A\"}"),
		"tiny":    []byte(`{"type":"A","data":{"id":"a1","n":1}}`),
		"parts":   graphBody(7, 5000),
	}
}

// A Frame's records are ParseRetained's, and stay so when the memory of frames released
// before is reused; what a record held (its strings, and its values, which point into the
// body) outlives its release.
func TestFrameAgreesWithParseAcrossReuse(t *testing.T) {
	held := Unreleased()
	defer func() {
		if got := Unreleased(); got != held {
			t.Errorf("%d frames unreleased after the test released all it framed; %d before", got, held)
		}
	}()
	for name, body := range frameBodies() {
		want, err := ParseRetained(body, DefaultLimits())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for round := range 4 {
			fr, err := FrameRetained(body, DefaultLimits())
			if err != nil {
				t.Fatalf("%s round %d: %v", name, round, err)
			}
			if !reflect.DeepEqual(fr.Records, want) {
				t.Fatalf("%s round %d: a frame's records differ from ParseRetained's", name, round)
			}
			kept := make([]Record, len(fr.Records))
			for i, r := range fr.Records {
				r.Data = append(Members(nil), r.Data...)
				kept[i] = r
			}
			if Unreleased() != held+1 {
				t.Fatalf("%s: %d frames unreleased, want %d", name, Unreleased(), held+1)
			}
			fr.Release()
			fr.Release() // idempotent
			if fr.Records != nil {
				t.Fatalf("%s: records still visible after Release", name)
			}
			// Another batch reuses the memory; the copies taken before are intact.
			other, err := FrameRetained(graphBody(round+100, 1000), DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(kept, want) {
				t.Fatalf("%s round %d: what a released record held changed when its memory was reused", name, round)
			}
			other.Release()
		}
	}
}

// A refused batch hands nothing out, and what it took goes back.
func TestFrameRefusal(t *testing.T) {
	held := Unreleased()
	fr, err := FrameRetained([]byte("{\"type\":\"A\"}\n{\"type\":1}\n"), DefaultLimits())
	if err == nil || fr != nil {
		t.Fatalf("got %v, %v; want a refusal", fr, err)
	}
	if !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("the refusal does not name line 2: %v", err)
	}
	fr, err = FrameRetained(bytes.Repeat([]byte("x"), 9), Limits{MaxBytes: 8})
	if err == nil || fr != nil {
		t.Fatalf("got %v, %v; want the body refused as too large", fr, err)
	}
	if Unreleased() != held {
		t.Fatalf("refusals left %d frames unreleased, %d before", Unreleased(), held)
	}
	var nilFrame *Frame
	nilFrame.Release()
}

// Released memory is reused: framing the same batch again allocates a fraction of what
// ParseRetained allocates.
func TestFrameReusesReleasedMemory(t *testing.T) {
	body := graphBody(0, 1000)
	perParse := allocatedPer(t, func() {
		if _, err := ParseRetained(body, DefaultLimits()); err != nil {
			t.Fatal(err)
		}
	})
	perFrame := allocatedPer(t, func() {
		fr, err := FrameRetained(body, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		fr.Release()
	})
	t.Logf("bytes allocated per batch: ParseRetained %d, FrameRetained and Release %d", perParse, perFrame)
	if perFrame > perParse*frameAllocShare/100 {
		t.Fatalf("a frame allocated %d bytes per batch, over %d%% of ParseRetained's %d", perFrame, frameAllocShare, perParse)
	}
}

func allocatedPer(t *testing.T, f func()) uint64 {
	t.Helper()
	f()
	f()
	const runs = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / runs
}

// graphBody is n node lines and n edge lines of the graph benches' shape.
func graphBody(k, n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"type":"Person","data":{"handle":"p%d-%d","name":"name-%d-%d","age":%d,"score":%g}}`+"\n", k, i, k, i, i%90, float64(i)*0.5)
	}
	for i := range n {
		fmt.Fprintf(&b, `{"edge":"Knows","from":"p%d-%d","to":"p%d-%d","data":{"id":"k%d-%d","since":%d}}`+"\n", k, i, k, (i+1)%n, k, i, i)
	}
	return b.Bytes()
}

// Framed in parts, a frame's records and slabs come from the pools too, and go back.
func TestFrameInParts(t *testing.T) {
	body := graphBody(3, 3000)
	lim := DefaultLimits()
	want, err := parseParts(body, lim, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for parts := 1; parts <= 4; parts++ {
		for range 2 {
			fr := &Frame{}
			got, err := parseParts(body, lim, parts, fr)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%d parts: records differ (%v)", parts, err)
			}
			if fr.array == nil || len(fr.slabs) < parts {
				t.Fatalf("%d parts: the frame kept %d records and %d slabs", parts, cap(fr.array), len(fr.slabs))
			}
			fr.Release()
		}
	}
}

// A batch of 8,192 lines, newline-terminated as producers write them, takes an array of 8,192
// records: the final newline starts no line, so the pooled size does not double.
func TestFrameArrayFitsThePowerOfTwoBatch(t *testing.T) {
	fr, err := FrameRetained(graphBody(0, 4096), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Release()
	if len(fr.Records) != 8192 || cap(fr.array) != 8192 {
		t.Fatalf("%d records in an array of %d, want 8192 in 8192", len(fr.Records), cap(fr.array))
	}
}
