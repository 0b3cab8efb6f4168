package errs

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// go test ./graph/errs -run TestDocs -update rewrites the generated blocks.
var update = flag.Bool("update", false, "rewrite the catalogue's blocks in README.md and docs/ingest-failures.md")

const (
	readmePath   = "../../README.md"
	failuresPath = "../../docs/ingest-failures.md"
)

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// kindsTable is docs/ingest-failures.md's table of every kind.
func kindsTable() string {
	var b strings.Builder
	b.WriteString("| kind | permanent | needs an operator | exit | dead letter | what |\n|---|---|---|---|---|---|\n")
	for _, k := range Catalogue() {
		exit, dl := fmt.Sprint(k.ExitCode), "never"
		if k.ReasonOnly {
			exit = "-"
		}
		if k.DeadLetter != "" {
			dl = "`dlq." + k.DeadLetter + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", k.Kind, yesNo(k.Permanent), yesNo(k.NeedsOperator), exit, dl, k.Description)
	}
	return b.String()
}

// exitTable is README.md's table of the CLI's exit codes.
func exitTable() string {
	var b strings.Builder
	b.WriteString("| exit | meaning | kinds |\n|---|---|---|\n")
	for _, e := range ExitCodes() {
		kinds := make([]string, len(e.Kinds))
		for i, k := range e.Kinds {
			kinds[i] = "`" + k + "`"
		}
		fmt.Fprintf(&b, "| %d | %s | %s |\n", e.Code, e.Meaning, strings.Join(kinds, ", "))
	}
	return b.String()
}

// block checks (or with -update rewrites) the text between <!-- name --> and <!-- /name -->.
func block(t *testing.T, path, name, want string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	open, end := "<!-- "+name+" (generated from graph/errs: go test ./graph/errs -run TestDocs -update) -->\n", "<!-- /"+name+" -->"
	i, j := strings.Index(doc, open), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no block %q … %q", path, open, end)
	}
	got := doc[i+len(open) : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i+len(open)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: block %s differs from the catalogue (run with -update). Want:\n%s", path, name, want)
}

// The docs' tables are the catalogue's, and the README's prose names every dead-letter reason
// and every kind that needs an operator.
func TestDocs(t *testing.T) {
	block(t, failuresPath, "catalogue:kinds", kindsTable())
	block(t, readmePath, "catalogue:exit-codes", exitTable())

	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	// The outcome table names dead-letter subjects as dlq.<reason> or dlq.<a|b|…>.
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`dlq\.<([a-z_|]+)>`).FindAllStringSubmatch(readme, -1) {
		for _, r := range strings.Split(m[1], "|") {
			named[r] = true
		}
	}
	for _, m := range regexp.MustCompile("dlq\\.([a-z_]+)`").FindAllStringSubmatch(readme, -1) {
		named[m[1]] = true
	}
	reasons := DeadLetterReasons()
	for r := range named {
		if !slices.Contains(reasons, r) {
			t.Errorf("README names dead-letter reason %q, which the catalogue does not have", r)
		}
	}
	for _, r := range reasons {
		if !named[r] {
			t.Errorf("README names no dlq.%s", r)
		}
	}
	for _, k := range Catalogue() {
		if k.NeedsOperator && !strings.Contains(readme, "`"+k.Kind+"`") {
			t.Errorf("README does not name the operator kind %s", k.Kind)
		}
	}
}
