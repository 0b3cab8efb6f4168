// Package deploy_test checks the container files against what the worker needs, since no
// container runtime runs in CI: pinned images, healthchecks, start order, limits, user.
package deploy_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/omnigraph/omnigraph-worker/ingest"
)

type compose struct {
	Services map[string]struct {
		Image       string                       `yaml:"image"`
		Build       any                          `yaml:"build"`
		DependsOn   map[string]map[string]string `yaml:"depends_on"`
		Healthcheck *struct{ Test []string }     `yaml:"healthcheck"`
		Restart     string                       `yaml:"restart"`
		MemLimit    string                       `yaml:"mem_limit"`
		Environment map[string]string            `yaml:"environment"`
	} `yaml:"services"`
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// moduleMinor is the major.minor of a module in go.mod ("2.15" for v2.15.2).
func moduleMinor(t *testing.T, module string) string {
	m := regexp.MustCompile(regexp.QuoteMeta(module) + ` v(\d+\.\d+)\.`).FindStringSubmatch(read(t, "../go.mod"))
	if m == nil {
		t.Fatalf("%s not in go.mod", module)
	}
	return m[1]
}

func TestCompose(t *testing.T) {
	var c compose
	if err := yaml.Unmarshal([]byte(read(t, "../docker-compose.yml")), &c); err != nil {
		t.Fatal(err)
	}
	natsMinor := moduleMinor(t, "github.com/nats-io/nats-server/v2")
	for name, s := range c.Services {
		if s.Build == nil {
			image, tag, ok := strings.Cut(s.Image, ":")
			if !ok || tag == "" || strings.Contains(tag, "latest") {
				t.Errorf("%s: image %q is not pinned to a version", name, s.Image)
			}
			if image == "nats" && !strings.HasPrefix(tag, natsMinor+".") {
				t.Errorf("nats: image %q, but the worker embeds and tests nats-server %s", s.Image, natsMinor)
			}
		}
		if s.Restart != "no" && s.Healthcheck == nil {
			t.Errorf("%s: a long-running service without a healthcheck", name)
		}
		for dep, opts := range s.DependsOn {
			if opts["condition"] == "" {
				t.Errorf("%s: depends_on %s without a condition (it may start before %s is ready)", name, dep, dep)
			}
		}
	}
	w, ok := c.Services["worker"]
	if !ok {
		t.Fatal("no worker service")
	}
	if w.MemLimit == "" {
		t.Error("worker: no mem_limit (the worker's memory limit follows the container's)")
	}
	http := w.Environment["OMNIGRAPH_HTTP"]
	_, port, _ := strings.Cut(http, ":")
	if w.Healthcheck == nil || !strings.Contains(strings.Join(w.Healthcheck.Test, " "), "health --http 127.0.0.1:"+port) {
		t.Errorf("worker: the healthcheck should run `worker health` against OMNIGRAPH_HTTP %q", http)
	}
}

func TestDockerfile(t *testing.T) {
	df := read(t, "../Dockerfile")
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindStringSubmatch(df)
	if user == nil || strings.HasPrefix(user[1], "0") || strings.HasPrefix(user[1], "root") {
		t.Errorf("Dockerfile: the final image must run as a non-root USER, got %v", user)
	}
	if !regexp.MustCompile(`(?m)^HEALTHCHECK .*worker", "health"`).MatchString(df) {
		t.Error("Dockerfile: no HEALTHCHECK running `worker health`")
	}
	ignore := strings.Fields(read(t, "../.dockerignore"))
	for _, must := range []string{".git", "bin", ".data", "integration/lancecompat/node_modules"} {
		found := false
		for _, l := range ignore {
			found = found || l == must
		}
		if !found {
			t.Errorf(".dockerignore does not keep %s out of the build context", must)
		}
	}
}

func TestNATSConf(t *testing.T) {
	m := regexp.MustCompile(`(?m)^max_payload:\s*(\d+)`).FindStringSubmatch(read(t, "nats.conf"))
	if m == nil {
		t.Fatal("nats.conf sets no max_payload")
	}
	if n, _ := strconv.Atoi(m[1]); n < ingest.MaxMessageBytes {
		t.Errorf("nats.conf max_payload %d is under the %d bytes a full batch with headers needs", n, ingest.MaxMessageBytes)
	}
}
