package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The documentation (README.md and docs/*.md) is checked against the code it describes:
// every `worker <command>` it names is a command of the CLI, every `--flag` a flag of that
// command (or, outside a command line, of some command), and every relative link reaches a
// file, and its #anchor a heading or anchor of that file.

// docFiles are the documents the tests read, relative to this package.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, files...)
}

// cliTree is the worker's command tree with cobra's own help and completion commands, as a
// user's command line meets it.
func cliTree() *cobra.Command {
	root := newRoot()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}

// commandFlags are the long flags each command takes, by command path below the program
// ("dlq replay"); "" is the root.
func commandFlags(root *cobra.Command) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.InitDefaultVersionFlag()
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		set := map[string]bool{}
		add := func(f *pflag.Flag) { set[f.Name] = true }
		c.Flags().VisitAll(add)
		c.InheritedFlags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		out[path] = set
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// codeSegments are a document's code: each line of a fenced block and each inline code span,
// with the line it starts on.
type codeSegment struct {
	line int
	text string
}

var inlineCode = regexp.MustCompile("`+[^`]+`+")

// A fenced line's shell comment is prose.
var shellComment = regexp.MustCompile(`(?:^|\s)#.*$`)

func codeSegments(doc string) []codeSegment {
	var out []codeSegment
	fenced, quoting := false, false
	for i, line := range strings.Split(doc, "\n") {
		// The generated scenario tables of docs/schema-evolution.md name the reference
		// engine's tests and its CLI's flags, not this one's.
		switch l := strings.TrimSpace(line); {
		case strings.HasPrefix(l, "<!-- scenarios"):
			quoting = true
		case strings.HasPrefix(l, "<!-- /scenarios"):
			quoting = false
		}
		if quoting {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			out = append(out, codeSegment{i + 1, shellComment.ReplaceAllString(line, "")})
			continue
		}
		for _, m := range inlineCode.FindAllString(line, -1) {
			out = append(out, codeSegment{i + 1, strings.Trim(m, "`")})
		}
	}
	return out
}

// invocation finds `worker <words>` in code: worker as a word of its own (bin/worker, ./worker
// too), not part of another name (omnigraph-worker, worker.yaml).
var invocation = regexp.MustCompile(`(?:^|[\s/(])worker((?:\s+[^\s|;&#)]+)*)`)

// flagWord is a long flag as a word.
var flagWord = regexp.MustCompile(`(?:^|[\s(\[=,])--([a-z][a-z0-9-]*)`)

// otherTools' flags appear in the docs' command lines of nats, docker, go, git and the bench
// driver; they are not the worker's.
var otherTools = regexp.MustCompile(`^\s*(?:\$\s*)?(?:[A-Z_]+=\S*\s+)*(?:nats|docker|go|git|jq|curl|openssl|make|kubectl|npm|node)\b`)

var foreignFlags = map[string]bool{
	// nats CLI
	"pull": true, "deliver": true, "ack": true, "filter": true, "defaults": true, "raw": true,
	// docker compose, docker build
	"profile": true, "build-arg": true,
	// make bench's driver and go tooling
	"tags": true,
}

// resolve walks words down the command tree: the command path they name, and the words after
// it; ok is false when a word where a subcommand must be names none.
func resolve(root *cobra.Command, words []string) (path string, rest []string, ok bool) {
	c := root
	for i, w := range words {
		if strings.HasPrefix(w, "-") || !c.HasSubCommands() {
			return strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " "), words[i:], true
		}
		var next *cobra.Command
		for _, sub := range c.Commands() {
			if sub.Name() == w || slices.Contains(sub.Aliases, w) {
				next = sub
			}
		}
		if next == nil {
			if c != root {
				return c.CommandPath(), words[i:], false
			}
			return w, words[i:], false
		}
		c = next
	}
	return strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " "), nil, true
}

// commandWord is what a command name looks like; placeholders (<command>, COMMAND, …) and
// prose are not checked.
var commandWord = regexp.MustCompile(`^[a-z][a-z-]*$`)

func TestDocsNameRealCommandsAndFlags(t *testing.T) {
	root := cliTree()
	flags := commandFlags(root)
	any := map[string]bool{}
	for _, set := range flags {
		for f := range set {
			any[f] = true
		}
	}
	checked := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(file, "../../")
		for _, seg := range codeSegments(string(b)) {
			text := seg.text
			scoped := map[int]bool{} // flag offsets checked against their command
			for _, m := range invocation.FindAllStringSubmatchIndex(text, -1) {
				words := strings.Fields(text[m[2]:m[3]])
				if len(words) == 0 || !commandWord.MatchString(words[0]) && !strings.HasPrefix(words[0], "-") {
					continue
				}
				path, rest, ok := resolve(root, words)
				if !ok {
					t.Errorf("%s:%d: `worker %s`: no such command (in %q)", name, seg.line, strings.Join(words[:len(words)-len(rest)+1], " "), text)
					continue
				}
				checked++
				// The flags of this command line, up to where another program or comment starts.
				end := m[3]
				for _, stop := range []string{" | ", " # ", "; ", " && "} {
					if i := strings.Index(text[m[2]:], stop); i >= 0 && m[2]+i < end {
						end = m[2] + i
					}
				}
				for _, fm := range flagWord.FindAllStringSubmatchIndex(text[m[2]:end], -1) {
					f := text[m[2]+fm[2] : m[2]+fm[3]]
					scoped[m[2]+fm[2]] = true
					if !flags[path][f] {
						t.Errorf("%s:%d: `worker %s` has no flag --%s (in %q)", name, seg.line, path, f, text)
					}
				}
			}
			if otherTools.MatchString(text) {
				continue
			}
			for _, fm := range flagWord.FindAllStringSubmatchIndex(text, -1) {
				f := text[fm[2]:fm[3]]
				if scoped[fm[2]] || foreignFlags[f] {
					continue
				}
				checked++
				if !any[f] {
					t.Errorf("%s:%d: no worker command has a flag --%s (in %q)", name, seg.line, f, text)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d commands and flags found in the docs: is the scan broken?", checked)
	}
}

// link is a Markdown link or image target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// htmlAnchor is an explicit anchor: <a id="x"> or <a name="x">.
var htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)

// anchors are the #fragments a document's headings (GitHub's slugs) and explicit anchors give.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := slugify(h)
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify is GitHub's heading anchor: lower case, letters, digits, '-' and '_' kept, spaces
// as '-', everything else dropped.
func slugify(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestDocsLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(string(b))
		return cache[path], nil
	}
	links := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(file, "../../")
		fenced := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			// Links inside inline code are examples, not links.
			line = inlineCode.ReplaceAllString(line, "")
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %s: %v", name, i+1, target, err)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %s: an anchor into a file that is not Markdown", name, i+1, target)
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					t.Errorf("%s:%d: link %s: %v", name, i+1, target, err)
					continue
				}
				if !a[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading or anchor #%s", name, i+1, target, strings.TrimPrefix(dest, "../../"), frag)
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative links found: is the scan broken?")
	}
}

func TestSlugify(t *testing.T) {
	for h, want := range map[string]string{
		"Messages in flight (`pipeline_depth`, `pipeline_bytes`)": "messages-in-flight-pipeline_depth-pipeline_bytes",
		"Fleets: several graphs per process":                      "fleets-several-graphs-per-process",
		"5.2 Ids":                                                 "52-ids",
	} {
		if got := slugify(h); got != want {
			t.Errorf("slugify(%q) = %q, want %q", h, got, want)
		}
	}
}

// The checks above catch what they are for: a misspelt subcommand and a flag a command lacks.
func TestDocsCheckerCatches(t *testing.T) {
	root := cliTree()
	if _, _, ok := resolve(root, []string{"dlq", "lst"}); ok {
		t.Error("worker dlq lst resolved")
	}
	if _, _, ok := resolve(root, []string{"nosuch"}); ok {
		t.Error("worker nosuch resolved")
	}
	path, _, ok := resolve(root, []string{"dlq", "replay", "--mode", "merge"})
	flags := commandFlags(root)
	if !ok || path != "dlq replay" || !flags[path]["mode"] || flags[path]["no-such-flag"] {
		t.Errorf("dlq replay: path %q ok %v flags %v", path, ok, flags[path])
	}
	if a := anchors("# A\n```\n# not a heading\n```\n## A\n<a id=\"x\"></a>\n"); !a["a"] || !a["a-1"] || !a["x"] || a["not-a-heading"] {
		t.Errorf("anchors %v", a)
	}
}
