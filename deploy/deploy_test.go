// Package deploy_test checks the container files against what the worker needs, since no
// container runtime runs in CI: pinned images, healthchecks, start order, limits, user.
package deploy_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

type service struct {
	Image       string                       `yaml:"image"`
	Build       any                          `yaml:"build"`
	Profiles    []string                     `yaml:"profiles"`
	DependsOn   map[string]map[string]string `yaml:"depends_on"`
	Healthcheck *struct{ Test []string }     `yaml:"healthcheck"`
	Restart     string                       `yaml:"restart"`
	MemLimit    string                       `yaml:"mem_limit"`
	Environment map[string]string            `yaml:"environment"`
	Volumes     []string                     `yaml:"volumes"`
	Ports       []string                     `yaml:"ports"`
}

type compose struct {
	Services map[string]service `yaml:"services"`
}

func readCompose(t *testing.T) compose {
	var c compose
	if err := yaml.Unmarshal([]byte(read(t, "../docker-compose.yml")), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// workerConfig loads a worker service's environment as `worker run` would, so that a setting
// the worker would refuse fails here rather than in a container.
func workerConfig(t *testing.T, name string, s service) *config.Config {
	t.Helper()
	c, err := config.Load(nil, func(k string) string { return s.Environment[k] })
	if err != nil {
		t.Fatalf("%s: `worker run` refuses its environment: %v", name, err)
	}
	return c
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
	c := readCompose(t)
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
	workerConfig(t, "worker", w)
}

// TestComposeDefaultUnchanged: `docker compose up` without a profile runs what it always ran.
func TestComposeDefaultUnchanged(t *testing.T) {
	var plain []string
	for name, s := range readCompose(t).Services {
		if len(s.Profiles) == 0 {
			plain = append(plain, name)
		}
	}
	slices.Sort(plain)
	if want := []string{"minio", "minio-bucket", "nats", "worker"}; !slices.Equal(plain, want) {
		t.Fatalf("services without a profile: %v, want %v", plain, want)
	}
}

// TestComposeClusterProfile: `--profile cluster` runs three routed NATS servers and two fleet
// workers that use all three with every stream replicated three times, beside the default
// services (host ports apart).
func TestComposeClusterProfile(t *testing.T) {
	c := readCompose(t)
	var nodes, workers []string
	for name, s := range c.Services {
		if !slices.Contains(s.Profiles, "cluster") {
			continue
		}
		if strings.HasPrefix(s.Image, "nats:") {
			nodes = append(nodes, name)
		} else if s.Build != nil {
			workers = append(workers, name)
		}
	}
	slices.Sort(nodes)
	if len(nodes) != 3 || len(workers) < 2 {
		t.Fatalf("cluster profile: NATS servers %v and workers %v, want 3 and at least 2", nodes, workers)
	}
	conf := read(t, "nats-cluster.conf")
	if !strings.Contains(conf, "server_name: $SERVER_NAME") {
		t.Error("nats-cluster.conf: server_name must come from SERVER_NAME, one per node")
	}
	names := map[string]bool{}
	for _, n := range nodes {
		s := c.Services[n]
		if !strings.Contains(conf, "nats-route://"+n+":6222") {
			t.Errorf("nats-cluster.conf routes to no %s", n)
		}
		if !slices.Contains(s.Volumes, "./deploy/nats-cluster.conf:/etc/nats/nats.conf:ro") {
			t.Errorf("%s does not run deploy/nats-cluster.conf: %v", n, s.Volumes)
		}
		sn := s.Environment["SERVER_NAME"]
		if sn == "" || names[sn] {
			t.Errorf("%s: SERVER_NAME %q missing or shared", n, sn)
		}
		names[sn] = true
	}
	var fleet string
	for _, w := range workers {
		s := c.Services[w]
		cfg := workerConfig(t, w, s)
		if cfg.Graphs == "" || cfg.Graph != "" {
			t.Errorf("%s: not in fleet mode (graphs %q, graph %q)", w, cfg.Graphs, cfg.Graph)
		}
		if cfg.StreamReplicas != 3 {
			t.Errorf("%s: stream_replicas %d, want 3", w, cfg.StreamReplicas)
		}
		for _, n := range nodes {
			if !strings.Contains(cfg.NATSURL, "nats://"+n+":4222") {
				t.Errorf("%s: nats_url %q lacks %s", w, cfg.NATSURL, n)
			}
			if s.DependsOn[n]["condition"] != "service_healthy" {
				t.Errorf("%s: does not wait for %s to be healthy", w, n)
			}
		}
		if s.MemLimit == "" || s.Healthcheck == nil {
			t.Errorf("%s: needs a mem_limit and a healthcheck", w)
		}
		id := cfg.Fleet + "|" + cfg.Graphs + "|" + cfg.Root
		if fleet != "" && id != fleet {
			t.Errorf("%s: fleet, graphs or root differ from the other workers' (%s vs %s)", w, id, fleet)
		}
		fleet = id
	}
	host := map[string]string{}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			hp, _, _ := strings.Cut(p, ":")
			if other, ok := host[hp]; ok {
				t.Errorf("host port %s published by %s and %s", hp, other, name)
			}
			host[hp] = name
		}
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
	for _, f := range []string{"nats.conf", "nats-cluster.conf"} {
		m := regexp.MustCompile(`(?m)^max_payload:\s*(\d+)`).FindStringSubmatch(read(t, f))
		if m == nil {
			t.Fatalf("%s sets no max_payload", f)
		}
		if n, _ := strconv.Atoi(m[1]); n < ingest.MaxMessageBytes {
			t.Errorf("%s max_payload %d is under the %d bytes a full batch with headers needs", f, n, ingest.MaxMessageBytes)
		}
	}
}

// The NATS config files parse with the module's own nats-server (the minor version the
// images pin), and say what the compose file relies on: the payload for full batches,
// JetStream, and for the cluster its name, a route to each node and the node's own name.
func TestNATSConfigsParse(t *testing.T) {
	t.Setenv("SERVER_NAME", "nats-2")
	for _, f := range []string{"nats.conf", "nats-cluster.conf"} {
		o, err := server.ProcessConfigFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if o.MaxPayload != ingest.MaxMessageBytes || !o.JetStream {
			t.Errorf("%s: max_payload %d (want %d), jetstream %v", f, o.MaxPayload, ingest.MaxMessageBytes, o.JetStream)
		}
		if f == "nats-cluster.conf" && (o.ServerName != "nats-2" || o.Cluster.Name != "omnigraph" || len(o.Routes) != 3) {
			t.Errorf("%s: server %q, cluster %q, %d routes", f, o.ServerName, o.Cluster.Name, len(o.Routes))
		}
	}
}
