package lance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/kljensen/snowball/english"

	"github.com/omnigraph/omnigraph-worker/lance/file"
)

func tokensOf(text string) []string {
	var out []string
	ftsTokens(text, func(s string) { out = append(out, s) })
	return out
}

// Known cases of the default analyzer: each step of the pipeline, as Lance 10 applies it.
func TestFTSTokensKnown(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"The Quick brown foxes were Running", []string{"quick", "brown", "fox", "run"}},
		{"jumped over the lazy dogs", []string{"jump", "lazi", "dog"}},
		{"running runs ran", []string{"run", "run", "ran"}},
		{"the the the", nil}, // stop words only: no token
		{"", nil},            // no word
		{"Café naïve résumé", []string{"cafe", "naiv", "resume"}}, // stemmed, then folded
		{"ÜBER Straße", []string{"uber", "strasse"}},
		{"don't it's e-mail", []string{"e", "mail"}}, // split at punctuation; don, t, it, s are stop words
		{"organizations generously happily", []string{"organ", "generous", "happili"}},
		{"12345 v2 ½", []string{"12345", "v2", "12"}},
		{"ﬁnance Ångström", []string{"financ", "angstrom"}},
		{"having doing being", []string{}},                                                             // stems of stop words ("have", "do", "be")
		{"ourselves yourselves", []string{"ourselv", "yourselv"}},                                      // stems that are not stop words
		{"x" + string(bytes.Repeat([]byte("x"), 38)), []string{string(bytes.Repeat([]byte("x"), 39))}}, // 39 bytes: kept
		{string(bytes.Repeat([]byte("y"), 40)) + " " + string(bytes.Repeat([]byte("z"), 45)), nil},     // 40 bytes or more: dropped
		{"İstanbul", []string{"i\u0307stanbul"}},                                                       // Rust lower-cases İ to i + combining dot; folding keeps the dot
		{"ζωή ΖΩΉ", []string{"ζωή", "ζωή"}},
	} {
		got := tokensOf(c.text)
		if len(got) != len(c.want) || (len(got) > 0 && !slices.Equal(got, c.want)) {
			t.Errorf("%q: tokens %q, want %q", c.text, got, c.want)
		}
	}
}

// testdata/fts_tokens_lance10.jsonl holds what Lance 10 indexed for about 2,200 words of
// Snowball's English vocabulary (every 16th, the stop words, capitalised forms, the words whose
// stems Lance 12 changed) and about 2,900 single characters between "zq" and "zq" (each one
// Lance 10 lower-cases or folds, a sample of the rest): the tokens Lance 10 wrote to its index
// for each, read back from its files. Every code point to U+3FFFF and all 31,635 words were
// compared when the folding table was made; this keeps a sample.
func TestFTSTokensLance10Golden(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "fts_tokens_lance10.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, bad := 0, 0
	for sc.Scan() {
		var c struct {
			Text   string   `json:"text"`
			Tokens []string `json:"tokens"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		got := tokensOf(c.Text)
		slices.Sort(got)
		slices.Sort(c.Tokens)
		if !slices.Equal(got, c.Tokens) {
			if bad++; bad <= 20 {
				t.Errorf("%q (%U): tokens %q, Lance 10 %q", c.Text, []rune(c.Text), got, c.Tokens)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 5000 || bad > 0 {
		t.Fatalf("%d of %d cases differ", bad, n)
	}
}

// Go builds, on a table Lance 10 wrote and indexed (integration/lancecompat/ftsfixture.mjs:
// two fragments, deleted rows, nulls, empty strings, stop-word-only strings, long words,
// postings of more than 128 documents), an index whose files hold exactly what Lance 10's
// hold: the same token map, documents, posting blocks (scores bit for bit), impacts and
// metadata, and the same index details.
func TestInvertedMatchesLance10(t *testing.T) {
	d, dir := openFixture(t, "lance10-fts.lance")
	eng := d.Inverted("s")
	if eng == nil {
		t.Fatal("the fixture lists no INVERTED index on s")
	}
	fo, err := d.fileOptions(file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := &fileWrites{}
	x, err := d.buildInverted(t.Context(), "s", "", fo, w)
	if err != nil {
		t.Fatal(err)
	}
	if x.Name != eng.Name || x.Details.TypeURL != eng.Details.TypeURL || !bytes.Equal(x.Details.Value, eng.Details.Value) ||
		*x.IndexVersion != *eng.IndexVersion || !slices.Equal(x.Fields, eng.Fields) || !slices.Equal(x.Fragments, eng.Fragments) {
		t.Fatalf("metadata: Go %s %s %x v%d %v %v, Lance 10 %s %s %x v%d %v %v", x.Name, x.Details.TypeURL, x.Details.Value,
			*x.IndexVersion, x.Fields, x.Fragments, eng.Name, eng.Details.TypeURL, eng.Details.Value, *eng.IndexVersion, eng.Fields, eng.Fragments)
	}
	goFiles := map[string][]byte{}
	for _, f := range w.files {
		goFiles[filepath.Base(f.key)] = f.data
	}
	engFile := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, eng.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Lance numbers the partition by its build worker; Go's is always 0.
	engParts, _ := filepath.Glob(filepath.Join(dir, eng.Dir(), "part_*_docs.lance"))
	if len(engParts) != 1 {
		t.Fatalf("Lance 10 wrote %d partitions", len(engParts))
	}
	engPart := filepath.Base(engParts[0])[:len(filepath.Base(engParts[0]))-len("docs.lance")]
	for _, name := range []string{"metadata.lance", "part_0_tokens.lance", "part_0_docs.lance", "part_0_invert.lance"} {
		g, ok := goFiles[name]
		if !ok {
			t.Fatalf("Go wrote no %s", name)
		}
		en := name
		if name != "metadata.lance" {
			en = engPart + name[len("part_0_"):]
		}
		gm, gc := fileContents(t, g)
		em, ec := fileContents(t, engFile(en))
		if name == "metadata.lance" {
			em["partitions"] = "[0]"
		}
		if fmt.Sprint(gm) != fmt.Sprint(em) {
			t.Errorf("%s: schema metadata\n  Go      %v\n  Lance10 %v", name, gm, em)
		}
		if !slices.Equal(gc, ec) {
			t.Errorf("%s: contents differ\n  Go      %.400s\n  Lance10 %.400s", name, gc, ec)
		}
	}
	got, err := decodeInverted(goFiles["part_0_tokens.lance"], goFiles["part_0_docs.lance"], goFiles["part_0_invert.lance"])
	if err != nil {
		t.Fatal(err)
	}
	full := 0
	for _, p := range got.postings {
		if len(p)/2 >= invertedBlock {
			full++
		}
	}
	if full == 0 || len(got.rowIDs) >= int(d.CountRows()) {
		t.Fatalf("the fixture should have full posting blocks (%d lists) and rows without tokens (%d docs, %d rows)",
			full, len(got.rowIDs), d.CountRows())
	}
}

// fileContents is a Lance file's schema metadata and every value of every column, as text.
func fileContents(t *testing.T, b []byte) (map[string]string, []string) {
	t.Helper()
	r, cols, err := readIndexRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{}
	for k, v := range r.Schema().Metadata {
		md[k] = string(v)
	}
	var out []string
	for i, c := range cols {
		for row := 0; row < c.Len(); row++ {
			out = append(out, fmt.Sprintf("%d:%d:%s", i, row, c.(interface{ ValueStr(int) string }).ValueStr(row)))
		}
	}
	return md, out
}

// An index built on a table Go wrote: deleted rows and nulls are no documents, every fragment
// is covered, the postings and lengths are the analyzer's, and the commit lists the index.
func TestStageInvertedIndex(t *testing.T) {
	ctx := t.Context()
	texts := map[int64]string{}
	b := array.NewRecordBuilder(memory.DefaultAllocator, testArrow)
	for id := int64(0); id < 300; id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		if id%7 == 3 {
			b.Field(1).AppendNull()
			continue
		}
		s := fmt.Sprintf("Row %d: the %s foxes were running; café #%d", id, []string{"quick", "lazy", "brown"}[id%3], id%4)
		texts[id] = s
		b.Field(1).(*array.StringBuilder).Append(s)
	}
	d, err := Create(ctx, memStore(t), testSchema(t), []arrow.Record{b.NewRecord()}, CreateOptions{})
	b.Release()
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StageAppend(ctx, rows(300, 301, 302), StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err = d.Commit(ctx, s); err != nil {
		t.Fatal(err)
	}
	texts[301], texts[302] = "n301", "n302"
	if s, err = d.StageDelete(ctx, In("id", int64(10), int64(301)), StageOptions{}); err != nil {
		t.Fatal(err)
	}
	if d, err = d.Commit(ctx, s); err != nil {
		t.Fatal(err)
	}
	delete(texts, 10)
	delete(texts, 301)

	if _, err := d.StageInvertedIndex(ctx, "id", IndexOptions{}); err == nil {
		t.Fatal("an INVERTED index on an integer column was staged")
	}
	s, err = d.StageInvertedIndex(ctx, "name", IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err = d.Commit(ctx, s); err != nil {
		t.Fatal(err)
	}
	x := d.Inverted("name")
	if x == nil || x.Name != "name_idx" || x.Kind() != "Inverted" || *x.IndexVersion != 2 || !slices.Equal(x.Fragments, []uint32{0, 1}) {
		t.Fatalf("index %+v", x)
	}
	read := func(name string) []byte {
		b, err := d.dir.Get(ctx, x.Dir()+name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	got, err := decodeInverted(read("part_0_tokens.lance"), read("part_0_docs.lance"), read("part_0_invert.lance"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.rowIDs) != len(texts) {
		t.Fatalf("%d documents, want %d", len(got.rowIDs), len(texts))
	}
	// Rebuild the bag of each row's tokens from the postings.
	bags := map[uint64][]string{}
	for tok, p := range got.postings {
		for i := 0; i < len(p); i += 2 {
			for k := uint32(0); k < p[i+1]; k++ {
				bags[got.rowIDs[p[i]]] = append(bags[got.rowIDs[p[i]]], got.tokens[tok])
			}
		}
	}
	for doc, id := range got.rowIDs {
		want := tokensOf(texts[int64(id)])
		g := bags[id]
		slices.Sort(want)
		slices.Sort(g)
		if !slices.Equal(g, want) || int(got.lengths[doc]) != len(want) {
			t.Fatalf("row %d: tokens %q (length %d), want %q", id, g, got.lengths[doc], want)
		}
	}
	for tok, s := range got.maxScore {
		if !(s > 0) || math.IsInf(float64(s), 0) {
			t.Fatalf("token %q: max score %v", got.tokens[tok], s)
		}
	}
}

// A word ending in a digit is its own stem (ftsStem skips the stemmer for it): the stemmer
// agrees on every such word of letters, digits and endings its rules look for.
func TestFTSStemOfWordsEndingInADigit(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	parts := []string{"ies", "sses", "ed", "ing", "ly", "y", "e", "s", "ational", "izer", "ness", "ful", "p", "x", "ou", "skis", "news", "dying", "a", "9", "0", "42"}
	for i := 0; i < 20000; i++ {
		w := ""
		for n := 1 + rng.IntN(4); n > 0; n-- {
			w += parts[rng.IntN(len(parts))]
		}
		w += string(rune('0' + rng.IntN(10)))
		if got := english.Stem(w, true); got != w {
			t.Fatalf("the stemmer changes %q to %q", w, got)
		}
		if got := ftsStem(w); got != w {
			t.Fatalf("ftsStem(%q) = %q", w, got)
		}
	}
}

// ftsWordsByRune is step 1 as ranging over the string's runes does it: the oracle of the
// table-driven ftsWords.
func ftsWordsByRune(text string) []string {
	var out []string
	start := -1
	for i, r := range text {
		if ftsAlphanumeric(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, text[start:i])
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, text[start:])
	}
	return out
}

// ftsWords splits any text, valid UTF-8 or not, into the words ranging over its runes finds.
func FuzzFTSWords(f *testing.F) {
	for _, s := range []string{"", "p8000000-17", "Hello, wörld! ½ café", "ab\xffcd\xc3", "日本語 テキスト123", "a\u0301b  \tc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var got []string
		ftsWords(text, func(w string) { got = append(got, w) })
		if want := ftsWordsByRune(text); !slices.Equal(got, want) {
			t.Fatalf("ftsWords(%q) = %q, want %q", text, got, want)
		}
	})
}
