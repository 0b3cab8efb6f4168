package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/ingest"
)

// tool parses args on a flag set binding names with the tools' defaults, as a subcommand does.
func tool(t *testing.T, args []string, environ map[string]string, names ...[]string) (*Config, *Loader, error) {
	t.Helper()
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var all []string
	for _, n := range names {
		all = append(all, n...)
	}
	l := Bind(fs, ToolDefaults(), all...)
	if err := fs.Parse(args); err != nil {
		return nil, l, err
	}
	c, err := l.Load(env(environ))
	return c, l, err
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A tool takes its NATS settings by the same names as `worker run`, from the same three
// sources in the same order, and nothing it does not bind: the worker's own file and
// environment (a bad ack_wait included) do not get in its way.
func TestToolBindsNATSSettings(t *testing.T) {
	file := writeFile(t, "w.yaml", "root: /data/g\ngraph: filegraph\nack_wait: soon\nnats_url: nats://file:4222\nnats_creds: /file.creds\ndlq_stream: FILE_DLQ\n")
	c, _, err := tool(t, []string{"--config", file, "--nats-url", "nats://flag:4222"},
		map[string]string{"OMNIGRAPH_GRAPH": "envgraph", "OMNIGRAPH_ACK_WAIT": "never", "OMNIGRAPH_ROOT": "/env", "OMNIGRAPH_STREAM": "ENV_STREAM"}, NATSSettings)
	if err != nil {
		t.Fatal(err)
	}
	if c.Graph != "envgraph" || c.NATSURL != "nats://flag:4222" || c.NATSCreds != "/file.creds" || c.DLQStream != "FILE_DLQ" || c.Stream != "ENV_STREAM" {
		t.Fatalf("%+v", c)
	}
	if c.Root != "" || c.AckWait != ingest.DefaultAckWait {
		t.Fatalf("a setting the tool does not bind was read: root %q ack_wait %v", c.Root, c.AckWait)
	}
	// Defaults: a tool needs a server to talk to; `run` starts an embedded one.
	c, _, err = tool(t, nil, nil, NATSSettings)
	if err != nil || c.NATSURL != DefaultNATSURL || Defaults().NATSURL != "" {
		t.Fatalf("tool default %q (%v), run default %q", c.NATSURL, err, Defaults().NATSURL)
	}
}

// The refusals are the same *Error everywhere: a misspelt file key (bound or not), a bad value
// from a variable, a missing required setting, a bad value on the command line.
func TestToolErrors(t *testing.T) {
	typo := writeFile(t, "typo.yaml", "graph: g\nnats_ulr: nats://x\n")
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--config", typo}, nil, "config nats_ulr (from " + typo + " line 2): unknown setting"},
		{nil, map[string]string{"OMNIGRAPH_CONFIG": typo}, "config nats_ulr (from " + typo + " line 2): unknown setting"},
		{[]string{"--graph", "a.b"}, nil, `config graph (from --graph): "a.b" must be one NATS subject token`},
		{[]string{"--nats-cert", "c.pem"}, nil, "config nats_cert (from --nats-cert): nats_cert and nats_key go together"},
		{nil, map[string]string{"OMNIGRAPH_LOCAL_FSYNC": "maybe"}, `config local_fsync (from OMNIGRAPH_LOCAL_FSYNC): want on or off`},
		{[]string{"--local-fsync", "sometimes"}, nil, `config local_fsync (from --local-fsync): want on or off`},
	}
	for _, c := range cases {
		_, _, err := tool(t, c.args, c.env, NATSSettings, RootSettings)
		var ce *Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ce) {
			t.Errorf("%v %v: got %v, want %q", c.args, c.env, err, c.want)
		}
	}
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	l := Bind(fs, ToolDefaults(), NATSSettings...).Require("graph")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	_, err := l.Load(env(nil))
	var ce *Error
	if !errors.As(err, &ce) || ce.Setting != "graph" || !strings.Contains(err.Error(), "is required (--graph, OMNIGRAPH_GRAPH or graph: in the --config file)") {
		t.Fatalf("required graph: %v", err)
	}
}

// local_fsync is on unless a source turns it off, in any of the spellings storage accepted.
func TestLocalFsync(t *testing.T) {
	file := writeFile(t, "w.yaml", "local_fsync: off\n")
	for _, c := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, true},
		{nil, map[string]string{"OMNIGRAPH_LOCAL_FSYNC": "0"}, false},
		{nil, map[string]string{"OMNIGRAPH_LOCAL_FSYNC": "false"}, false},
		{nil, map[string]string{"OMNIGRAPH_LOCAL_FSYNC": "No"}, false},
		{[]string{"--config", file}, nil, false},
		{[]string{"--config", file}, map[string]string{"OMNIGRAPH_LOCAL_FSYNC": "on"}, true},
		{[]string{"--local-fsync=1"}, map[string]string{"OMNIGRAPH_LOCAL_FSYNC": "off"}, true},
	} {
		got, _, err := tool(t, c.args, c.env, RootSettings)
		if err != nil || got.LocalFsync != c.want {
			t.Errorf("%v %v: %v %v, want %v", c.args, c.env, got, err, c.want)
		}
	}
	c, err := Load([]string{"--root", "/r", "--graph", "g", "--local-fsync", "off"}, env(nil))
	if err != nil || c.LocalFsync {
		t.Fatalf("run: %+v %v", c, err)
	}
}

// Flagged tells a setting given on the command line from one the file or environment gave.
func TestFlagged(t *testing.T) {
	_, l, err := tool(t, []string{"--nats-url", "nats://x:1"}, map[string]string{"OMNIGRAPH_GRAPH": "g"}, NATSSettings)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Flagged("nats_url") || l.Flagged("graph") {
		t.Fatalf("nats_url flagged %v, graph flagged %v", l.Flagged("nats_url"), l.Flagged("graph"))
	}
}

// Ingest names the streams as ingest does when the config leaves them empty, keeps the ones
// it names, and carries compaction_fanout over as it is: 0 is off in both.
func TestIngest(t *testing.T) {
	c := Defaults()
	c.Graph = "my-graph"
	ic := c.Ingest()
	if ic.Stream != "OMNIGRAPH_MY_GRAPH" || ic.DLQStream != "OMNIGRAPH_MY_GRAPH_DLQ" || ic.Consumer != "omnigraph-worker" ||
		ic.AckWait != 30*time.Second || ic.MaxDeliver != 10 || ic.RetryBudget != 10*time.Minute || ic.CompactionFanout != 16 ||
		ic.PipelineDepth != 4 || ic.PipelineBytes != 128<<20 {
		t.Fatalf("%+v", ic)
	}
	if ic.Stream != ingest.StreamName(c.Graph) || ic.DLQStream != ingest.DLQStreamName(c.Graph) {
		t.Fatal("config and ingest name the streams differently")
	}
	c.Stream, c.DLQStream, c.Consumer, c.CompactionFanout = "IN", "DEAD", "me", 0
	ic = c.Ingest()
	if ic.Stream != "IN" || ic.DLQStream != "DEAD" || ic.Consumer != "me" || ic.CompactionFanout != 0 {
		t.Fatalf("%+v", ic)
	}
}

// selfSigned writes a certificate and its key (PEM) usable both as a CA and as a client pair.
func selfSigned(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert = writeFile(t, "cert.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	key = writeFile(t, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})))
	return cert, key
}

// NATSOptions turn the settings into the connection's options: its name, credentials, the CA
// and the client pair; a file that cannot be read is the option's error.
func TestNATSOptions(t *testing.T) {
	apply := func(c *Config) (nats.Options, error) {
		o := nats.GetDefaultOptions()
		for _, opt := range c.NATSOptions("omnigraph-worker test") {
			if err := opt(&o); err != nil {
				return o, err
			}
		}
		return o, nil
	}
	c := ToolDefaults()
	o, err := apply(&c)
	if err != nil || o.Name != "omnigraph-worker test" || o.UserJWT != nil || o.Secure {
		t.Fatalf("no settings: %+v %v", o, err)
	}
	cert, key := selfSigned(t)
	creds := writeFile(t, "user.creds", "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ.e30.c2ln\n------END NATS USER JWT------\n")
	c.NATSCreds, c.NATSCA, c.NATSCert, c.NATSKey = creds, cert, cert, key
	o, err = apply(&c)
	if err != nil || o.UserJWT == nil || o.SignatureCB == nil || !o.Secure || o.RootCAsCB == nil || o.TLSCertCB == nil {
		t.Fatalf("every setting: %+v %v", o, err)
	}
	c.NATSCA = filepath.Join(t.TempDir(), "missing.pem")
	if _, err := apply(&c); err == nil || !strings.Contains(err.Error(), "rootCA") {
		t.Fatalf("missing CA: %v", err)
	}
}
