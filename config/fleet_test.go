package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGraphsSetting: graphs comes from a flag, a variable, or the file as a comma string or
// a YAML list; each graph gets its own streams and its root under <root>.
func TestGraphsSetting(t *testing.T) {
	c, err := Load([]string{"--root", "/r", "--graphs", "b, a,b"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.GraphList(); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("--graphs: %v", got)
	}
	if ic := c.IngestOf("a"); ic.Graph != "a" || ic.Stream != "OMNIGRAPH_A" || ic.DLQStream != "OMNIGRAPH_A_DLQ" || ic.EventsStream != "OMNIGRAPH_A_EVENTS" {
		t.Fatalf("IngestOf(a): %+v", ic)
	}
	c, err = Load([]string{"--root", "/r"}, env(map[string]string{"OMNIGRAPH_GRAPHS": "x,y", "OMNIGRAPH_FLEET": "east"}))
	if err != nil || !slices.Equal(c.GraphList(), []string{"x", "y"}) || c.Fleet != "east" {
		t.Fatalf("OMNIGRAPH_GRAPHS: %+v %v", c, err)
	}
	dir := t.TempDir()
	for body, want := range map[string][]string{
		"root: /r\ngraphs: [g1, g2]\n":        {"g1", "g2"},
		"root: /r\ngraphs:\n  - g1\n  - g3\n": {"g1", "g3"},
		"root: /r\ngraphs: g4,g5\n":           {"g4", "g5"},
	} {
		file := filepath.Join(dir, "w.yaml")
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load([]string{"--config", file}, env(nil))
		if err != nil || !slices.Equal(c.GraphList(), want) {
			t.Fatalf("%q: %v %v", body, c, err)
		}
	}
	for root, want := range map[string]string{
		"/data/graphs": "/data/graphs/g1",
		"rel/graphs/":  "rel/graphs/g1",
		"s3://b/graphs?endpoint=http://minio:9000&region=us-east-1": "s3://b/graphs/g1?endpoint=http://minio:9000&region=us-east-1",
		"s3://b":      "s3://b/g1",
		"mem://m/x/":  "mem://m/x/g1",
		"file:///a/b": "file:///a/b/g1",
	} {
		if got := (&Config{Root: root}).GraphRoot("g1"); got != want {
			t.Errorf("GraphRoot(%q): %q, want %q", root, got, want)
		}
	}
}

// TestGraphsRefused: graph and graphs together, a name that is no subject token, stream
// names every graph would share, a bad fleet name, a list where one value goes, and neither
// graph nor graphs: each refused naming the setting.
func TestGraphsRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(file, []byte("root: [a, b]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		setting string
		says    string
	}{
		{[]string{"--root", "/r", "--graph", "a", "--graphs", "b,c"}, nil, "graphs", `config graphs (from --graphs): graph "a" is set too`},
		{[]string{"--root", "/r", "--graphs", "b,c"}, map[string]string{"OMNIGRAPH_GRAPH": "a"}, "graphs", `graph "a" is set too`},
		{[]string{"--root", "/r", "--graphs", "b,c.d"}, nil, "graphs", `"c.d" must be one NATS subject token`},
		{[]string{"--root", "/r", "--graphs", " , "}, nil, "graphs", "names no graph"},
		{[]string{"--root", "/r", "--graphs", "b", "--stream", "S"}, nil, "graphs", `stream "S" is set too`},
		{[]string{"--root", "/r", "--graphs", "b", "--fleet", "a.b"}, nil, "fleet", `"a.b": want letters`},
		{[]string{"--root", "/r"}, nil, "graph", "is required (--graph, OMNIGRAPH_GRAPH or graph: in the --config file), or graphs (--graphs) instead"},
		{[]string{"--config", file, "--graph", "g"}, nil, "root", "want a single value, not a YAML list"},
	} {
		_, err := Load(tc.args, env(tc.env))
		var ce *Error
		if !errors.As(err, &ce) || ce.Setting != tc.setting || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%v %v: %v, want %s: …%s…", tc.args, tc.env, err, tc.setting, tc.says)
		}
	}
}
