package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// INVERTED interop: Go builds a full-text index on gfts; the engine builds its own on efts, a
// table with exactly the same rows, fragments and deletions; both then get the same appended
// fragment, which no index covers. The engine (fts.mjs ftsverify) must list Go's index, count
// its rows as indexed, answer every full-text query from it (its plan names the index; without
// an index the same query fails) and return exactly the rows and scores it returns from its
// own index on efts.

// ftsWords is the vocabulary of the full-text rows: mixed case, punctuation, stop words,
// inflections for the stemmer, accents and ligatures for the folding, numbers, and words of
// 39, 40 and 45 bytes (the analyzer drops those of 40 bytes or more).
var ftsWords = []string{"The", "quick", "brown", "foxes", "were", "running", "runs", "ran", "and", "jumped", "over",
	"lazy", "dogs'", "DOG", "Café", "naïve", "résumé", "Straße", "über", "co-operate", "e-mail", "it's", "don't",
	"organizations", "organizing", "happily", "generously", "12345", "v2", strings.Repeat("x", 39),
	strings.Repeat("y", 40), strings.Repeat("z", 45), "Ångström", "ﬁnance", "hello,", "world!", "(parenthesis)",
	"a", "I", "of", "to", "Running.", "cafe", "ÉCOLE", "ecoles"}

// ftsText is row i's text: nil (a null) every 41st row, an empty string or stop words only
// now and then, else 1 to 23 words of ftsWords.
func ftsText(i int) *string {
	var s string
	switch {
	case i%41 == 7:
		return nil
	case i%53 == 9:
		s = ""
	case i%59 == 11:
		s = "the and of to a"
	default:
		n := 1 + (i*7)%23
		ws := make([]string, n)
		for k := range ws {
			ws[k] = ftsWords[(i*31+k*k*17+k)%len(ftsWords)]
		}
		sep := " "
		if i%2 == 0 {
			sep = "  "
		}
		s = strings.Join(ws, sep)
	}
	return &s
}

var ftsArrow = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func ftsRecord(lo, hi int) []arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, ftsArrow)
	defer b.Release()
	for i := lo; i < hi; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if s := ftsText(i); s == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(*s)
		}
	}
	return []arrow.Record{b.NewRecord()}
}

// ftsCanonical is rows [lo, hi) as canonical.mjs rows (an Int64 id as a decimal string).
func ftsCanonical(lo, hi int) []map[string]any {
	var out []map[string]any
	for i := lo; i < hi; i++ {
		r := map[string]any{"id": strconv.Itoa(i), "s": nil}
		if s := ftsText(i); s != nil {
			r["s"] = *s
		}
		out = append(out, r)
	}
	return out
}

// ftsQueries are the full-text queries both tables answer; ftsNoMatch are those of them that
// find no row: a stop word, a word in no row, and words whose stems differ from the indexed
// ones because Lance stems before it folds ("résumé" is indexed as "resume", the query
// "resume" stems to "resum") or a stem the text does not have ("happy" -> "happi", the text's
// "happily" -> "happili").
var (
	ftsQueries = []string{"running", "RUNS", "fox", "foxes", "dog", "cafe", "Café", "ecole", "résumé", "resume",
		"Straße", "strasse", "uber", "organization", "happy", "generous", "12345", "v2", "finance", "angstrom", "mail",
		"operate", strings.Repeat("x", 39), "quick brown", "lazy dogs jumped", "hello world", "the", "nothingmatches"}
	ftsNoMatch = []string{"resume", "strasse", "happy", "the", "nothingmatches"}
	// ftsStemDiffers are the queries an engine stems unlike Lance 10 (Lance 12's Snowball 3
	// stemmer: "organization" is no longer "organ"); an index holds Lance 10's stems.
	ftsStemDiffers = map[string][]string{"lance12": {"organization"}}
)

// ftsSpec is <dir>/ftscases.json.
type ftsSpec struct {
	GoTable         string              `json:"go_table"`
	EngineTable     string              `json:"engine_table"`
	Index           string              `json:"index"`
	PreIndexVersion uint64              `json:"pre_index_version"`
	IndexedRows     uint64              `json:"indexed_rows"`
	Append          []map[string]any    `json:"append"`
	Queries         []string            `json:"queries"`
	NoMatch         []string            `json:"no_match"`
	StemDiffers     map[string][]string `json:"stem_differs"`
}

// invertedCompat runs the INVERTED interop in dir (a fresh directory).
func invertedCompat(ctx context.Context, s *suite, dir string) {
	spec, err := goBuildsInverted(ctx, dir, s.version)
	s.add("fts/go-builds-inverted", err)
	if err != nil {
		return
	}
	if err := writeJSON(filepath.Join(dir, "ftscases.json"), spec); err != nil {
		s.add("fts/cases", err)
		return
	}
	if err := s.runNode(ctx, "fts/", "ftsverify", dir); err != nil {
		return
	}
	ftsEngineMaintains(ctx, s, dir)
}

// goBuildsInverted creates gfts and efts alike (1,000 rows in two fragments, three deleted),
// builds Go's INVERTED index on gfts.s, then appends 60 rows to gfts that no index covers. The
// engine does the same to efts with its own index (ftsverify).
func goBuildsInverted(ctx context.Context, dir string, v file.Version) (*ftsSpec, error) {
	sch, err := schema.FromArrow(ftsArrow)
	if err != nil {
		return nil, err
	}
	spec := &ftsSpec{GoTable: "gfts", EngineTable: "efts", Index: "s_idx", Queries: ftsQueries, NoMatch: ftsNoMatch,
		StemDiffers: ftsStemDiffers}
	var g *lance.Dataset
	for _, t := range []string{"efts", "gfts"} {
		st, err := openTable(ctx, dir, t)
		if err != nil {
			return nil, err
		}
		d, err := lance.Create(ctx, st, sch, ftsRecord(0, 600), lance.CreateOptions{FileVersion: v})
		if err != nil {
			return nil, err
		}
		s, err := d.StageAppend(ctx, ftsRecord(600, 1000), lance.StageOptions{})
		if err != nil {
			return nil, err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return nil, err
		}
		if s, err = d.StageDelete(ctx, lance.In("id", int64(3), int64(150), int64(700)), lance.StageOptions{}); err != nil {
			return nil, err
		}
		if d, err = d.Commit(ctx, s); err != nil {
			return nil, err
		}
		g = d
	}
	spec.PreIndexVersion, spec.IndexedRows = g.Version(), g.CountRows()
	s, err := g.StageInvertedIndex(ctx, "s", lance.IndexOptions{})
	if err != nil {
		return nil, err
	}
	if g, err = g.Commit(ctx, s); err != nil {
		return nil, err
	}
	if x := g.Inverted("s"); x == nil || x.Name != spec.Index || len(x.Fragments) != 2 {
		return nil, fmt.Errorf("Go lists INVERTED index %+v, want s_idx over fragments 0 and 1", x)
	}
	if s, err = g.StageAppend(ctx, ftsRecord(1000, 1060), lance.StageOptions{}); err != nil {
		return nil, err
	}
	if _, err = g.Commit(ctx, s); err != nil {
		return nil, err
	}
	spec.Append = ftsCanonical(1000, 1060)
	return spec, nil
}
