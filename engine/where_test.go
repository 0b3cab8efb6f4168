package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseWhere(t *testing.T) {
	for in, want := range map[string]string{
		"name = alice":                  "[name = 'alice']",
		"  id=='a b'  ":                 "[id = 'a b']",
		`x<>"q\"uote" AND y>=3`:         `[x != 'q"uote' y >= '3']`,
		"a<1 and b<=2 and c>3 and d!=4": "[a < '1' b <= '2' c > '3' d != '4']",
		"s = 'it''s'":                   "[s = 'it''s']",
		"d >= 2024-01-02T03:04:05Z":     "[d >= '2024-01-02T03:04:05Z']",
		"name = ''":                     "[name = '']",
		"_x9 = -1.5e3":                  "[_x9 = '-1.5e3']",
	} {
		got, err := ParseWhere(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if s := fmt.Sprint(got); s != want {
			t.Errorf("%q: %s, want %s", in, s, want)
		}
	}
	c, _ := ParseWhere("ab = 1 and cd = 'x'")
	if c[0].Pos != 1 || c[0].ValuePos != 6 || c[1].Pos != 12 || c[1].ValuePos != 17 {
		t.Errorf("positions %+v", c)
	}
	for in, want := range map[string]string{
		"":                                   "where clause, column 1: expected a property name, found the end",
		"= 3":                                `where clause, column 1: expected a property name, found "="`,
		"name":                               "where clause, column 5: expected an operator (=, !=, <, <=, >, >=) after name, found the end",
		"name ~ 3":                           `where clause, column 6: expected an operator (=, !=, <, <=, >, >=) after name, found "~"`,
		"name =":                             "where clause, column 7: expected a value, found the end",
		"name = 'abc":                        "where clause, column 8: unterminated quoted value",
		"a = 1 or b = 2":                     `where clause, column 7: expected 'and' or the end, found "or"`,
		"a = 1 and":                          "where clause, column 10: expected a property name, found the end",
		"a = 1 b = 2":                        `where clause, column 7: expected 'and' or the end, found "b"`,
		"a = \xff":                           "where clause, column 5: not UTF-8",
		strings.Repeat("a", MaxWhereBytes+1): "where clause, column 4097: longer than 4096 bytes",
	} {
		_, err := ParseWhere(in)
		var we *WhereError
		if !errors.As(err, &we) || err.Error() != want {
			t.Errorf("%.20q: %v, want %s", in, err, want)
		}
	}
}

// The parser never panics, places every error inside the clause (or just past it), and what
// it parses renders back (Condition.String) to the same conditions.
func FuzzParseWhere(f *testing.F) {
	for _, s := range []string{"name = alice", "a<1 and b<=2 and c>3 and d!=4", `x<>"q\"uote" AND y>=3`, "s = 'it''s'",
		"id == 'a b'", "name =", "a = 1 or", "'", "a = '", "\xff", "a=b=c", "a = 1 and b = \"\\\\\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseWhere(s)
		if err != nil {
			var we *WhereError
			if !errors.As(err, &we) || we.Pos < 1 || we.Pos > len(s)+1 && len(s) <= MaxWhereBytes {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if len(cs) == 0 {
			t.Fatalf("%q: no condition and no error", s)
		}
		var parts []string
		for _, c := range cs {
			if c.Pos < 1 || c.ValuePos <= c.Pos || c.ValuePos > len(s)+1 {
				t.Fatalf("%q: positions %+v", s, c)
			}
			parts = append(parts, c.String())
		}
		rendered := strings.Join(parts, " and ")
		if len(rendered) > MaxWhereBytes {
			return // quotes doubled past the bound
		}
		again, err := ParseWhere(rendered)
		if err != nil {
			t.Fatalf("%q renders as %q, which does not parse: %v", s, strings.Join(parts, " and "), err)
		}
		for i := range cs {
			if again[i].Property != cs[i].Property || again[i].Op != cs[i].Op || again[i].Value != cs[i].Value {
				t.Fatalf("%q: %+v read back as %+v", s, cs[i], again[i])
			}
		}
	})
}
