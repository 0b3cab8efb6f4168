package pg

import (
	"math"
	"testing"
)

func TestFormatFloatSerde(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0.0", 1: "1.0", -1.5: "-1.5", 0.1: "0.1", 100: "100.0", 1e15: "1000000000000000.0",
		1e16: "1e16", 1.5e16: "1.5e16", 123456789012345678: "1.2345678901234568e17", 1e20: "1e20",
		0.0001: "0.0001", 0.00001: "0.00001", 0.000001: "1e-6", 1.25e-7: "1.25e-7", 1e300: "1e300",
		math.Copysign(0, -1): "-0.0", 5e-324: "5e-324", 12.34: "12.34",
	} {
		if got := formatFloatSerde(f); got != want {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
	}
}

func TestFormatFloatRustDebug(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0.0", 1: "1.0", -2.5: "-2.5", 1e15: "1000000000000000.0", 1e16: "1e16", 0.0001: "0.0001",
		0.00001: "1e-5", 1.5e-7: "1.5e-7", 123456789012345678: "1.2345678901234568e17",
	} {
		if got := formatFloatRustDebug(f); got != want {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
	}
}

func TestJSONStringEscapes(t *testing.T) {
	got := compactJSON(obj("s", "q\" b\\ \n\r\t\b\f \x01\x1f <>& \u2028\u2029 é😀"))
	want := `{"s":"q\" b\\ \n\r\t\b\f \u0001\u001f <>& ` + "\u2028\u2029 é😀" + `"}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if p := prettyJSON(obj("a", []jv{}, "b", obj(), "c", []jv{uint64(1), nil})); p != "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1,\n    null\n  ]\n}" {
		t.Fatalf("pretty %q", p)
	}
}
