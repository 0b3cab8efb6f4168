// Package deploy_test checks the container files against what the worker needs, since no
// container runtime runs in CI: images pinned by digest, healthchecks, start order, limits,
// user, the hardening (loopback ports, credentials from the environment, read-only roots, no
// capabilities) and durable acceptance by NATS.
package deploy_test

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/ingest"
)

type service struct {
	Image           string                       `yaml:"image"`
	Command         []string                     `yaml:"command"`
	ReadOnly        bool                         `yaml:"read_only"`
	CapDrop         []string                     `yaml:"cap_drop"`
	SecurityOpt     []string                     `yaml:"security_opt"`
	StopGracePeriod string                       `yaml:"stop_grace_period"`
	Tmpfs           []string                     `yaml:"tmpfs"`
	Build           any                          `yaml:"build"`
	Profiles        []string                     `yaml:"profiles"`
	DependsOn       map[string]map[string]string `yaml:"depends_on"`
	Healthcheck     *struct{ Test []string }     `yaml:"healthcheck"`
	Restart         string                       `yaml:"restart"`
	MemLimit        string                       `yaml:"mem_limit"`
	Environment     map[string]string            `yaml:"environment"`
	Volumes         []string                     `yaml:"volumes"`
	Ports           []string                     `yaml:"ports"`
}

type compose struct {
	Services map[string]service `yaml:"services"`
}

// composeEnv is the environment the checks run compose's interpolation with: the secrets a
// deployer must set, and nothing else.
var composeEnv = map[string]string{"NATS_PASSWORD": "nats-pass-0123", "MINIO_ROOT_PASSWORD": "minio-pass-4567"}

// readCompose parses docker-compose.yml after compose's interpolation of ${…} with env.
func readCompose(t *testing.T) compose {
	return readComposeEnv(t, composeEnv)
}

func readComposeEnv(t *testing.T, env map[string]string) compose {
	t.Helper()
	text, err := interpolate(read(t, "../docker-compose.yml"), env)
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// interpolate does what docker compose does to the file's ${VAR}, ${VAR:-default},
// ${VAR-default}, ${VAR:?error} and ${VAR?error} (and $$), with env for the environment.
func interpolate(text string, env map[string]string) (string, error) {
	var failed error
	out := regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`).ReplaceAllStringFunc(text, func(m string) string {
		if m == "$$" {
			return "$"
		}
		p := regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}$`).FindStringSubmatch(m)
		v, set := env[p[1]]
		empty := !set || (strings.HasPrefix(p[2], ":") && v == "")
		switch strings.TrimPrefix(p[2], ":") {
		case "-":
			if empty {
				return p[3]
			}
		case "?":
			if empty && failed == nil {
				failed = fmt.Errorf("required variable %s is missing a value: %s", p[1], p[3])
			}
		}
		return v
	})
	return out, failed
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
			if !pinnedDigest.MatchString(s.Image) {
				t.Errorf("%s: image %q is not pinned by digest (@sha256:…)", name, s.Image)
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
		// The routes, with the cluster's credentials, on each node's command line.
		routes := ""
		if i := slices.Index(s.Command, "--routes"); i >= 0 && i+1 < len(s.Command) {
			routes = s.Command[i+1]
		}
		for _, to := range nodes {
			if !strings.Contains(routes, "nats-route://omnigraph:"+composeEnv["NATS_PASSWORD"]+"@"+to+":6222") {
				t.Errorf("%s: no authenticated route to %s in %q", n, to, routes)
			}
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
			if !strings.Contains(cfg.NATSURL, "@"+n+":4222") {
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
			parts := strings.Split(p, ":")
			hp := parts[len(parts)-2]
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
	for _, from := range regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1) {
		if !pinnedDigest.MatchString(from[1]) {
			t.Errorf("Dockerfile: FROM %s is not pinned by digest", from[1])
		}
	}
	if !regexp.MustCompile(`(?m)^HEALTHCHECK .*worker", "health"`).MatchString(df) {
		t.Error("Dockerfile: no HEALTHCHECK running `worker health`")
	}
	ignore := strings.Fields(read(t, "../.dockerignore"))
	for _, must := range []string{".git", "bin", ".data", "integration/lancecompat/node_modules", ".env"} {
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
	t.Setenv("NATS_USER", "u")
	t.Setenv("NATS_PASSWORD", "p")
	for _, f := range []string{"nats.conf", "nats-cluster.conf"} {
		o, err := server.ProcessConfigFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if o.MaxPayload != ingest.MaxMessageBytes || !o.JetStream {
			t.Errorf("%s: max_payload %d (want %d), jetstream %v", f, o.MaxPayload, ingest.MaxMessageBytes, o.JetStream)
		}
		// Durable acceptance: a write is fsynced before its publish is acknowledged.
		if !o.SyncAlways {
			t.Errorf("%s: JetStream does not fsync before acknowledging (sync_interval: always)", f)
		}
		if f == "nats-cluster.conf" && (o.ServerName != "nats-2" || o.Cluster.Name != "omnigraph" || o.Cluster.Username != "u") {
			t.Errorf("%s: server %q, cluster %q, route user %q", f, o.ServerName, o.Cluster.Name, o.Cluster.Username)
		}
	}
}

// pinnedDigest is an image reference pinned by digest: name:tag@sha256:<64 hex>.
var pinnedDigest = regexp.MustCompile(`^[a-z0-9./_-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`)

// TestComposeHardened: every service, the default ones and the cluster profile's, runs with a
// read-only root filesystem, no capabilities, no privilege gain and a grace period to stop in;
// what it writes goes to a volume or a tmpfs; its published ports listen on 127.0.0.1 unless
// OMNIGRAPH_BIND says otherwise.
func TestComposeHardened(t *testing.T) {
	c := readCompose(t)
	for name, s := range c.Services {
		if !s.ReadOnly {
			t.Errorf("%s: read_only is not true", name)
		}
		if !slices.Equal(s.CapDrop, []string{"ALL"}) {
			t.Errorf("%s: cap_drop %v, want [ALL]", name, s.CapDrop)
		}
		if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: security_opt %v lacks no-new-privileges:true", name, s.SecurityOpt)
		}
		if d, err := time.ParseDuration(s.StopGracePeriod); err != nil || d < 10*time.Second {
			t.Errorf("%s: stop_grace_period %q, want at least 10s (a commit in flight finishes, the lease is released)", name, s.StopGracePeriod)
		}
		if !slices.Contains(s.Tmpfs, "/tmp") {
			t.Errorf("%s: read-only without a tmpfs /tmp: %v", name, s.Tmpfs)
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") || strings.Count(p, ":") != 2 {
				t.Errorf("%s: port %q is not bound to 127.0.0.1", name, p)
			}
		}
	}
	// The writable places each needs: JetStream's and MinIO's stores on volumes, the worker's
	// working directory (the image's WORKDIR) on a tmpfs it owns.
	workdir := regexp.MustCompile(`(?m)^WORKDIR\s+(\S+)\s*$`).FindAllStringSubmatch(read(t, "../Dockerfile"), -1)
	if len(workdir) == 0 {
		t.Fatal("Dockerfile: no WORKDIR")
	}
	wd := workdir[len(workdir)-1][1]
	for name, s := range c.Services {
		switch {
		case strings.HasPrefix(s.Image, "nats:"), strings.Contains(s.Image, "minio/minio:"):
			if !slices.ContainsFunc(s.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") }) {
				t.Errorf("%s: its store /data is not a volume: %v", name, s.Volumes)
			}
		case s.Build != nil:
			if !slices.Contains(s.Tmpfs, wd+":uid=65532,gid=65532") {
				t.Errorf("%s: the working directory %s is not a tmpfs the worker's user owns: %v", name, wd, s.Tmpfs)
			}
		}
	}
	// OMNIGRAPH_BIND opens them on purpose.
	env := maps.Clone(composeEnv)
	env["OMNIGRAPH_BIND"] = "0.0.0.0"
	if p := readComposeEnv(t, env).Services["nats"].Ports; !slices.Equal(p, []string{"0.0.0.0:4222:4222"}) {
		t.Errorf("OMNIGRAPH_BIND=0.0.0.0: nats ports %v", p)
	}
}

// TestComposeCredentials: the secrets come from the environment (compose refuses to start
// without NATS_PASSWORD or MINIO_ROOT_PASSWORD), none is written in the file, NATS publishes
// no port without authentication (the monitoring port stays inside its container), and the
// workers connect with the credentials NATS requires.
func TestComposeCredentials(t *testing.T) {
	for _, missing := range []string{"NATS_PASSWORD", "MINIO_ROOT_PASSWORD"} {
		env := maps.Clone(composeEnv)
		delete(env, missing)
		if _, err := interpolate(read(t, "../docker-compose.yml"), env); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("without %s: %v, want compose to refuse", missing, err)
		}
	}
	raw := read(t, "../docker-compose.yml")
	for _, secret := range composeEnv {
		if strings.Contains(raw, secret) {
			t.Fatal("the test's secret is in the file")
		}
	}
	// In the file as written, every secret is a reference to the environment.
	var plain compose
	if err := yaml.Unmarshal([]byte(raw), &plain); err != nil {
		t.Fatal(err)
	}
	secretKey := regexp.MustCompile(`PASSWORD|SECRET`)
	userinfo := regexp.MustCompile(`://([^/@]*)@`)
	for name, s := range plain.Services {
		for k, v := range s.Environment {
			if secretKey.MatchString(k) && !regexp.MustCompile(`^\$\{[A-Z_]+:\?[^}]*\}$`).MatchString(v) {
				t.Errorf("%s: %s is not a required variable from the environment: %q", name, k, v)
			}
			for _, ui := range userinfo.FindAllStringSubmatch(v, -1) {
				if !regexp.MustCompile(`^\$\{[A-Z_]+(:-[^}]*)?\}:\$\{[A-Z_]+:\?[^}]*\}$`).MatchString(ui[1]) {
					t.Errorf("%s: %s carries a password that is not from the environment: %q", name, k, v)
				}
			}
		}
	}
	c := readCompose(t)
	user, pass := "omnigraph", composeEnv["NATS_PASSWORD"]
	t.Setenv("SERVER_NAME", "nats-1")
	for name, s := range c.Services {
		if !strings.HasPrefix(s.Image, "nats:") {
			continue
		}
		if s.Environment["NATS_USER"] != user || s.Environment["NATS_PASSWORD"] != pass {
			t.Errorf("%s: NATS_USER/NATS_PASSWORD not passed to the server: %v", name, s.Environment)
		}
		conf := strings.TrimPrefix(strings.TrimSuffix(s.Volumes[0], ":/etc/nats/nats.conf:ro"), "./deploy/")
		t.Setenv("NATS_USER", user)
		t.Setenv("NATS_PASSWORD", pass)
		o, err := server.ProcessConfigFile(conf)
		if err != nil {
			t.Fatalf("%s: %v", conf, err)
		}
		if o.Username != user || o.Password != pass || o.HTTPHost != "127.0.0.1" {
			t.Errorf("%s (%s): clients need user %q (got %q) and its password; monitoring on %q, want 127.0.0.1 only", name, conf, user, o.Username, o.HTTPHost)
		}
		for _, p := range s.Ports {
			if !strings.HasSuffix(p, ":4222") {
				t.Errorf("%s: publishes %q, a port other than the authenticated client port", name, p)
			}
		}
		if slices.Contains(s.Profiles, "cluster") {
			if o.Cluster.Username != user || o.Cluster.Password != pass {
				t.Errorf("%s: routes are not authenticated", name)
			}
		}
	}
	for name, s := range c.Services {
		if s.Build == nil {
			continue
		}
		cfg := workerConfig(t, name, s)
		for _, one := range strings.Split(cfg.NATSURL, ",") {
			u, err := url.Parse(one)
			if err != nil {
				t.Fatal(err)
			}
			if p, _ := u.User.Password(); u.User.Username() != user || p != pass {
				t.Errorf("%s: connects to %s without the NATS credentials", name, u.Redacted())
			}
		}
		if s.Environment["AWS_SECRET_ACCESS_KEY"] != composeEnv["MINIO_ROOT_PASSWORD"] || s.Environment["AWS_ACCESS_KEY_ID"] != c.Services["minio"].Environment["MINIO_ROOT_USER"] {
			t.Errorf("%s: not MinIO's credentials", name)
		}
	}
}
