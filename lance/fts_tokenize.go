package lance

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// The text analysis of Lance's default INVERTED index (InvertedIndexParams::default(): base
// tokenizer "simple", language English, max_token_length 40, lower_case, stem,
// remove_stop_words and ascii_folding on, no positions), as Lance 10 applies it to every
// document and every query, in this order:
//
//  1. split into words: maximal runs of characters that Rust's char::is_alphanumeric accepts
//     (Unicode Alphabetic or Numeric);
//  2. drop words of FTSMaxTokenBytes bytes or more;
//  3. lower-case each character (Rust's char::to_lowercase, no final-sigma rule);
//  4. stem with the English Snowball (Porter2) stemmer;
//  5. drop the word if its stem is an English stop word (NLTK's list);
//  6. fold non-ASCII characters to ASCII where Lucene's ASCIIFoldingFilter has a folding.
//
// A token's position counts every word of step 1. Only what survives step 5 is a token.
const FTSMaxTokenBytes = 40

// ftsTokens calls emit with each token of text, in order.
func ftsTokens(text string, emit func(tok string)) {
	ftsWords(text, func(w string) {
		if tok, ok := ftsToken(w); ok {
			emit(tok)
		}
	})
}

// ftsWords calls emit with each word of text (step 1), in order. An ASCII byte is judged by
// a table; only the rest is decoded (an invalid byte as U+FFFD, which is no word's, as ranging
// over the string does).
func ftsWords(text string, emit func(word string)) {
	start := -1
	for i := 0; i < len(text); {
		alnum, size := ftsASCIIAlnum[text[i]], 1
		if text[i] >= utf8.RuneSelf {
			var r rune
			r, size = utf8.DecodeRuneInString(text[i:])
			alnum = ftsAlphanumeric(r)
		}
		switch {
		case alnum && start < 0:
			start = i
		case !alnum && start >= 0:
			emit(text[start:i])
			start = -1
		}
		i += size
	}
	if start >= 0 {
		emit(text[start:])
	}
}

// ftsASCIIAlnum says which ASCII bytes are alphanumeric (ftsAlphanumeric); false past ASCII.
var ftsASCIIAlnum = func() (t [256]bool) {
	for c := range utf8.RuneSelf {
		t[c] = ftsAlphanumeric(rune(c))
	}
	return t
}()

// ftsToken is steps 2 to 6 for one word: its token, or false when the word is dropped. It
// depends on the word alone, so a build may remember it per word (the stemmer is most of an
// index build's time, and text repeats its words).
func ftsToken(w string) (string, bool) {
	if len(w) >= FTSMaxTokenBytes {
		return "", false
	}
	w = ftsLower(w)
	w = ftsStem(w)
	if ftsStopWords[w] {
		return "", false
	}
	return ftsFold(w), true
}

// ftsAlphanumeric is Rust's char::is_alphanumeric: the Alphabetic property (letters, letter
// numbers and Other_Alphabetic marks) or a Numeric general category (Nd, Nl, No), with the
// characters Rust's newer Unicode tables add.
func ftsAlphanumeric(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.Is(ftsNewerAlphanumeric, r)
}

// ftsLower lower-cases as Rust's char::to_lowercase does, character by character.
func ftsLower(w string) string {
	ascii := true
	for i := 0; i < len(w); i++ {
		if w[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(w)
	}
	var sb strings.Builder
	sb.Grow(len(w))
	for _, r := range w {
		if r == 'İ' { // the one unconditional multi-character lower-casing
			sb.WriteString("i\u0307")
			continue
		}
		sb.WriteRune(unicode.ToLower(r))
	}
	return sb.String()
}

// ftsStem is the English Snowball stemmer. Words of one or two characters are kept as they
// are (Snowball counts characters; the library counts bytes).
func ftsStem(w string) string {
	// Every rule and exception of the English stemmer ends in a letter, so a word ending in a
	// digit (a number, a key like "p1000005") is its own stem: the stemmer is skipped, as it
	// costs most of a build of such keys.
	if utf8.RuneCountInString(w) <= 2 || '0' <= w[len(w)-1] && w[len(w)-1] <= '9' {
		return w
	}
	return english.Stem(w, true)
}

// ftsFold replaces each non-ASCII character that has an ASCII folding by it.
func ftsFold(w string) string {
	i := 0
	for i < len(w) && w[i] < utf8.RuneSelf {
		i++
	}
	if i == len(w) {
		return w
	}
	var sb strings.Builder
	sb.Grow(len(w))
	sb.WriteString(w[:i])
	for _, r := range w[i:] {
		if f, ok := ftsFolding[r]; ok {
			sb.WriteString(f)
		} else {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// ftsStopWords is the English stop word list Lance 10 removes (the stop-words crate's, which
// is NLTK's), checked against the stemmed word. Entries with an apostrophe never match a token:
// the tokenizer splits words there.
var ftsStopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
		yourselves he he'd he'll he's him his himself she she'd she'll she's her hers herself it
		it'd it'll it's its itself they they'd they'll they're they've them their theirs
		themselves what which who whom this that that'll these those am is are was were be been
		being have has had having do does did doing a an the and but if or because as until while
		of at by for with about against between into through during before after above below to
		from up down in out on off over under again further then once here there when where why
		how all any both each few more most other some such no nor not only own same so than too
		very s t can will just don don't should should've now d ll m o re ve y ain aren aren't
		couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't
		ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't
		weren weren't won won't wouldn wouldn't i'd i'll i'm i've we'd we'll we're we've`) {
		m[w] = true
	}
	return m
}()
