package rows

import (
	"strconv"
	"testing"
)

// parseNumberStrconv is parseNumber without its short-integer path: the serde_json
// classification done by strconv alone.
func parseNumberStrconv(raw []byte) (jnum, bool) {
	s := string(raw)
	if u, err := strconv.ParseUint(s, 10, 64); err == nil && raw[0] != '-' {
		return jnum{kind: numU64, u: u}, true
	}
	if raw[0] == '-' {
		if mag, err := strconv.ParseUint(s[1:], 10, 64); err == nil && mag != 0 && mag <= 1<<63 {
			return jnum{kind: numI64, i: int64(-mag)}, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return jnum{}, false
	}
	return jnum{kind: numF64, f: f}, true
}

func TestParseNumberShortIntegers(t *testing.T) {
	for _, s := range []string{
		"0", "7", "-1", "-0", "42", "1234567890123456789", "9999999999999999999", "-9999999999999999999",
		"18446744073709551615", "18446744073709551616", "-9223372036854775808", "-9223372036854775809",
		"1.5", "-2e3", "1E2", "-", "12a", "0.0", "-0.0",
	} {
		got, gotOK := parseNumber([]byte(s))
		want, wantOK := parseNumberStrconv([]byte(s))
		if got != want || gotOK != wantOK {
			t.Errorf("parseNumber(%s) = %+v %v, want %+v %v", s, got, gotOK, want, wantOK)
		}
	}
}

func FuzzParseNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "123", "-9223372036854775808", "18446744073709551615", "1e5", "-1.25"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			return
		}
		got, gotOK := parseNumber([]byte(s))
		want, wantOK := parseNumberStrconv([]byte(s))
		if gotOK != wantOK || gotOK && (got.kind != want.kind || got.u != want.u || got.i != want.i || got.f != want.f && !(got.f != got.f && want.f != want.f)) {
			t.Fatalf("parseNumber(%q) = %+v %v, want %+v %v", s, got, gotOK, want, wantOK)
		}
	})
}
