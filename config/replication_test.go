package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReplicationSettings: stream_replicas, placement_cluster and placement_tags reach
// ingest's Replication from every source; the default is one replica and no placement.
func TestReplicationSettings(t *testing.T) {
	c, err := Load([]string{"--root", "/r", "--graph", "g"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Ingest().Replication; r.Replicas != 1 || r.Cluster != "" || r.Tags != nil {
		t.Fatalf("default replication %+v", r)
	}
	file := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(file, []byte("root: /r\ngraph: g\nstream_replicas: 3\nplacement_tags: ' ssd, ,fast '\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = Load([]string{"--config", file, "--placement-cluster", "east"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Ingest().Replication; r.Replicas != 3 || r.Cluster != "east" || !slices.Equal(r.Tags, []string{"ssd", "fast"}) {
		t.Fatalf("replication %+v", r)
	}
	c, err = Load([]string{"--config", file}, env(map[string]string{"OMNIGRAPH_STREAM_REPLICAS": "5"}))
	if err != nil || c.Ingest().Replication.Replicas != 5 {
		t.Fatalf("OMNIGRAPH_STREAM_REPLICAS: %+v %v", c, err)
	}
	for _, n := range []string{"0", "6", "three"} {
		_, err := Load([]string{"--root", "/r", "--graph", "g", "--stream-replicas", n}, env(nil))
		var ce *Error
		if !errors.As(err, &ce) || ce.Setting != "stream_replicas" || !strings.Contains(err.Error(), "stream_replicas") {
			t.Errorf("stream_replicas %s: %v", n, err)
		}
	}
}
