package errs

import (
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pkgFacts reads this package's source: the value of every Kind* constant, and for every
// type with a kind() method the constant it returns. Reading the source instead of a hand-kept
// list means a new kind or type cannot be forgotten here either.
func pkgFacts(t *testing.T) (consts map[string]string, typeKinds map[string]string) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// The standard library is not imported: constants and the kind() bodies type-check
	// without it, and the errors about the rest are ignored.
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Types: map[ast.Expr]types.TypeAndValue{}}
	if _, err := (&types.Config{Importer: importerFunc(func(string) (*types.Package, error) { return nil, errors.New("no imports") }),
		Error: func(error) {}}).Check("errs", fset, files, info); err != nil && len(info.Defs) == 0 {
		t.Fatal(err)
	}
	consts, typeKinds = map[string]string{}, map[string]string{}
	for id, obj := range info.Defs {
		if c, ok := obj.(*types.Const); ok && strings.HasPrefix(id.Name, "Kind") && c.Val().Kind() == constant.String {
			consts[id.Name] = constant.StringVal(c.Val())
		}
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "kind" {
				continue
			}
			recv := types.ExprString(fn.Recv.List[0].Type)
			ret := fn.Body.List[0].(*ast.ReturnStmt).Results[0]
			tv := info.Types[ret]
			if tv.Value == nil {
				t.Fatalf("%s.kind() does not return a constant", recv)
			}
			typeKinds[recv] = constant.StringVal(tv.Value)
		}
	}
	if len(consts) < 10 || len(typeKinds) < 10 {
		t.Fatalf("source facts look wrong: %d constants, %d types", len(consts), len(typeKinds))
	}
	return consts, typeKinds
}

type importerFunc func(string) (*types.Package, error)

func (f importerFunc) Import(p string) (*types.Package, error) { return f(p) }

var subjectToken = regexp.MustCompile(`^[a-z0-9_]+$`)

func TestCatalogueIsComplete(t *testing.T) {
	consts, typeKinds := pkgFacts(t)
	for name, kind := range consts {
		if _, ok := Lookup(kind); !ok {
			t.Errorf("constant %s = %q has no catalogue entry", name, kind)
		}
	}
	for typ, kind := range typeKinds {
		k, ok := Lookup(kind)
		if !ok || k.ReasonOnly {
			t.Errorf("type %s has kind %q, which the catalogue lacks or holds only as a reason", typ, kind)
		}
	}
	if k, ok := Lookup(ReasonMaxDeliver); !ok || !k.ReasonOnly || k.DeadLetter != ReasonMaxDeliver {
		t.Errorf("max_deliver: %+v %v", k, ok)
	}
	seen := map[string]bool{}
	for _, k := range Catalogue() {
		if seen[k.Kind] {
			t.Errorf("kind %q listed twice", k.Kind)
		}
		seen[k.Kind] = true
		if k.Description == "" || strings.Contains(k.Description, "\n") || strings.Contains(k.Description, "|") {
			t.Errorf("%s: the description must be one line without a table bar: %q", k.Kind, k.Description)
		}
		if k.Permanent && k.NeedsOperator {
			t.Errorf("%s: an error that needs an operator may succeed after the fix, so it is not permanent", k.Kind)
		}
		if k.Permanent != (k.DeadLetter != "") && !k.ReasonOnly {
			t.Errorf("%s: permanent %v but dead-letter reason %q: permanent kinds, and only they, are dead-lettered", k.Kind, k.Permanent, k.DeadLetter)
		}
		if k.DeadLetter != "" && !subjectToken.MatchString(k.DeadLetter) {
			t.Errorf("%s: dead-letter reason %q is not a plain NATS subject token", k.Kind, k.DeadLetter)
		}
		if k.NeedsOperator && k.ExitCode != ExitOperator {
			t.Errorf("%s needs an operator but exits %d", k.Kind, k.ExitCode)
		}
		if k.ReasonOnly != (k.ExitCode == ExitOK) {
			t.Errorf("%s: exit code %d (only a reason-only entry has none)", k.Kind, k.ExitCode)
		}
		if k.ExitCode == ExitUsage {
			t.Errorf("%s: exit code 2 is the CLI's usage error", k.Kind)
		}
	}
	if got := DeadLetterReasons(); !slices.Contains(got, KindMergeConflict) || !slices.Contains(got, ReasonMaxDeliver) || !slices.Contains(got, KindSchemaUnsupported) || len(got) != 10 {
		t.Errorf("dead-letter reasons %v", got)
	}
}

// Each kind has its own exit code except where sharing is the point: the kinds that need an
// operator (10), the two stale-authority conflicts (7, as since before the catalogue), and the
// kinds with no code of their own (1, internal).
func TestExitCodesAreDistinct(t *testing.T) {
	shared := map[int]bool{ExitOperator: true, 7: true, ExitInternal: true}
	byCode := map[int][]string{}
	for _, k := range Catalogue() {
		if !k.ReasonOnly {
			byCode[k.ExitCode] = append(byCode[k.ExitCode], k.Kind)
		}
	}
	for code, kinds := range byCode {
		if len(kinds) > 1 && !shared[code] {
			t.Errorf("exit code %d is shared by %v", code, kinds)
		}
	}
	if got := byCode[7]; !slices.Equal(got, []string{KindReadSetChanged, KindPublishedDatasetVersionMismatch}) {
		t.Errorf("exit 7: %v", got)
	}
	for _, k := range Catalogue() {
		if k.NeedsOperator != slices.Contains(byCode[ExitOperator], k.Kind) {
			t.Errorf("%s: needs operator %v, exit %d", k.Kind, k.NeedsOperator, k.ExitCode)
		}
	}
	// The codes before the catalogue existed stay what they were.
	for kind, code := range map[string]int{KindInvalid: 3, KindKeyConflict: 4, KindResourceLimit: 5, KindRecoveryRequired: 6,
		KindReadSetChanged: 7, KindPublishedDatasetVersionMismatch: 7, KindBranchMissing: 8, KindMergeConflict: 9,
		KindMsgIDReused: 1, KindStorageRefused: 1, KindRetryExhausted: 1, KindUnknown: 1} {
		if k, _ := Lookup(kind); k.ExitCode != code {
			t.Errorf("%s exits %d, was %d", kind, k.ExitCode, code)
		}
	}
	codes := ExitCodes()
	for i, e := range codes {
		if i > 0 && codes[i-1].Code >= e.Code {
			t.Fatalf("exit codes out of order: %+v", codes)
		}
		if (len(e.Kinds) == 0) != (e.Code == ExitOK || e.Code == ExitUsage) {
			t.Errorf("exit %d (%s) has kinds %v", e.Code, e.Meaning, e.Kinds)
		}
		delete(byCode, e.Code)
	}
	if len(byCode) != 0 {
		t.Errorf("exit codes without a meaning: %v", byCode)
	}
}

// classifiedErr stands in for an error type of another package.
type classifiedErr struct{ kind string }

func (e *classifiedErr) Error() string               { return "foreign: " + e.kind }
func (e *classifiedErr) ErrorKind() string           { return e.kind }
func (e *classifiedErr) ErrorDetail() map[string]any { return map[string]any{"k": e.kind} }

type classifiedNoDetail struct{}

func (classifiedNoDetail) Error() string     { return "plain" }
func (classifiedNoDetail) ErrorKind() string { return KindCorrupt }

func TestClassifiedErrors(t *testing.T) {
	for _, k := range Catalogue() {
		if k.ReasonOnly {
			continue
		}
		err := fmt.Errorf("a: %w", errors.Join(io.EOF, &classifiedErr{kind: k.Kind}))
		if Kind(err) != k.Kind || Permanent(err) != k.Permanent || NeedsOperator(err) != k.NeedsOperator || ExitCode(err) != k.ExitCode {
			t.Errorf("%s: kind %q permanent %v operator %v exit %d", k.Kind, Kind(err), Permanent(err), NeedsOperator(err), ExitCode(err))
		}
		if d := Detail(err); d["k"] != k.Kind {
			t.Errorf("%s: detail %v", k.Kind, d)
		}
	}
	// A kind the catalogue does not hold, or holds only as a reason, is no kind at all.
	for _, kind := range []string{"made_up", ReasonMaxDeliver, ""} {
		err := &classifiedErr{kind: kind}
		if Kind(err) != KindUnknown || Detail(err) != nil || ExitCode(err) != ExitInternal || NeedsOperator(err) || Permanent(err) {
			t.Errorf("%q: kind %q", kind, Kind(err))
		}
	}
	if Detail(classifiedNoDetail{}) != nil || Kind(classifiedNoDetail{}) != KindCorrupt {
		t.Error("a Classified error without ErrorDetail has no detail but its kind")
	}
	// This package's own types come first, wherever they sit in the chain.
	mixed := errors.Join(&classifiedErr{kind: KindTableDrift}, &KeyConflict{TypeKey: "node:P"})
	if Kind(mixed) != KindKeyConflict || NeedsOperator(mixed) || ExitCode(mixed) != 4 {
		t.Errorf("own type first: %q", Kind(mixed))
	}
	if ExitCode(nil) != ExitOK || NeedsOperator(nil) || ExitCode(io.EOF) != ExitInternal {
		t.Error("nil and untyped exit codes")
	}
}
