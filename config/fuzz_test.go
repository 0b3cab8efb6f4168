package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzLoad loads arbitrary YAML files (with the two required settings from the environment).
// Loading never panics; a refusal is an *Error naming the setting, where it came from and why;
// an accepted config validates, and loading the same file again gives the same config.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"", "graph: demo\n", "ack_wait: 45s\nmax_deliver: 5\n", "compaction_fanout: 1\n", "gc_percent: 0\n",
		"nats_cert: c.pem\n", "unknown: 1\n", "root: [1, 2]\n", "ack_wait: forever\n", "graph: a.b\n",
		"lease_ttl: 100ms\n", "nats_port: 99999999999999999999\n", "- a\n- b\n", "graph: !!binary aGk=\n",
		"graph: demo\ngraph: other\n", "{a: 1", "http: :9090\nnats_dir: /tmp/x\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "worker.yaml")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		env := func(k string) string {
			return map[string]string{"OMNIGRAPH_CONFIG": file, "OMNIGRAPH_ROOT": "/data/graph", "OMNIGRAPH_GRAPH": "demo"}[k]
		}
		c, err := Load(nil, env)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.Setting == "" || ce.Source == "" || ce.Reason == "" {
				t.Fatalf("%q refused with %T %v: want an *Error naming setting, source and reason", data, err, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%q accepted but does not validate: %v", data, err)
		}
		again, err := Load(nil, env)
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("%q loads differently the second time: %+v vs %+v (%v)", data, again, c, err)
		}
	})
}
