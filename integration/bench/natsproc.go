package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/ingest"
)

// natsProcess is a real nats-server process, built from the module's nats-server version, with
// JetStream and a max_payload that takes the largest graph batch: the server producers and the
// worker meet in production, not the embedded one of `make run`.
type natsProcess struct {
	cmd *exec.Cmd
	url string
}

func startNATSProcess(ctx context.Context, dir string) (*natsProcess, error) {
	bin := filepath.Join(dir, "nats-server")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build nats-server: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := filepath.Join(dir, "nats.conf")
	body := fmt.Sprintf("listen: 127.0.0.1:%d\nmax_payload: %d\njetstream {\n  store_dir: %q\n}\n", port, ingest.MaxMessageBytes, filepath.Join(dir, "js"))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		return nil, err
	}
	p := &natsProcess{cmd: exec.Command(bin, "-c", conf), url: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if nc, err := nats.Connect(p.url); err == nil {
			nc.Close()
			return p, nil
		}
	}
	p.stop()
	return nil, fmt.Errorf("nats-server did not start on %s", p.url)
}

func (p *natsProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

// connectNATSProcess starts a nats-server process in dir (made if missing) and connects to
// it; the caller stops the one and closes the other.
func connectNATSProcess(ctx context.Context, dir string) (*natsProcess, *nats.Conn, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	ns, err := startNATSProcess(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	nc, err := nats.Connect(ns.url)
	if err != nil {
		ns.stop()
		return nil, nil, err
	}
	return ns, nc, nil
}
