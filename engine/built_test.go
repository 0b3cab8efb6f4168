package engine

import (
	"context"
	"strings"
	"testing"
)

// Rows built ahead serve a load whose mode and catalog they were built for, and only its first
// attempt; built for another mode they are ignored and the records are built again. (The
// built rows here deliberately differ from the records, to see which ones the load used.)
func TestLoadUsesRowsBuiltAheadOnlyWhenTheyFit(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	ahead := LoadRequest{Mode: ModeAppend, Records: records(t, people[0])}
	built, err := g.Build(ahead)
	if err != nil {
		t.Fatal(err)
	}
	req := LoadRequest{Mode: ModeAppend, Records: records(t, people[1]), Built: built}
	if _, err := g.Load(ctx, req); err != nil {
		t.Fatal(err)
	}
	if out := export(t, g, ""); !strings.Contains(out, `"alice"`) || strings.Contains(out, `"bob"`) {
		t.Fatalf("the load did not use the rows built ahead:\n%s", out)
	}
	other, err := g.Build(LoadRequest{Mode: ModeMerge, Records: records(t, people[2])})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, people[1]), Built: other}); err != nil {
		t.Fatal(err)
	}
	if out := export(t, g, ""); !strings.Contains(out, `"bob"`) || strings.Contains(out, `"acme.io"`) {
		t.Fatalf("rows built for another mode were used:\n%s", out)
	}
	if _, err := g.Build(LoadRequest{Mode: ModeAppend, Records: records(t, `{"type":"Nope","data":{}}`)}); err == nil {
		t.Fatal("an unknown type was built")
	}
}
