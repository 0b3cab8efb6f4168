package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// listenError is an address `worker run` cannot listen on: the embedded NATS server's port
// (nats_port) or the HTTP address (http), in use or refused by the system. It is found before
// anything is opened or created, so the run leaves nothing behind.
type listenError struct {
	Setting, Addr string
	Err           error
}

func (e *listenError) Error() string {
	what, fix := "the HTTP address", "set http to a free address (--http, OMNIGRAPH_HTTP; empty: no HTTP server)"
	if e.Setting == "nats_port" {
		what, fix = "the embedded NATS server's port", "set nats_port to a free port (--nats-port, OMNIGRAPH_NATS_PORT; -1: any free port), or nats_url to use a running NATS server"
	}
	why := "cannot be listened on"
	if errors.Is(e.Err, syscall.EADDRINUSE) {
		why = "is in use"
	}
	return fmt.Sprintf("%s %s (%s) %s: %v; %s", what, e.Addr, e.Setting, why, e.Err, fix)
}

func (e *listenError) Unwrap() error { return e.Err }

// checkPorts listens, and stops listening at once, on each address `worker run` with c will
// listen on: the embedded NATS server's port (when nats_url is empty) and the HTTP address.
// A port taken between this check and the server's start still fails that start, naming it.
func checkPorts(c *config.Config) error {
	if c.NATSURL == "" && c.NATSPort > 0 {
		if err := tryListen("nats_port", net.JoinHostPort(embeddedHost, strconv.Itoa(c.NATSPort))); err != nil {
			return err
		}
	}
	if c.HTTP != "" {
		return tryListen("http", c.HTTP)
	}
	return nil
}

// embeddedHost is where ingest.StartEmbedded listens.
const embeddedHost = "127.0.0.1"

func tryListen(setting, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &listenError{Setting: setting, Addr: addr, Err: err}
	}
	return ln.Close()
}

// madeDirs are the local directories a `worker run` will make that are not there before it
// starts (its graph root, the embedded NATS server's store), so that a run that fails before
// it serves can remove what it made, and only that.
type madeDirs []string

// dirsToMake are c's local root and embedded NATS store (natsDir, "" for none) among those
// not there yet.
func dirsToMake(c *config.Config, natsDir string) madeDirs {
	var out madeDirs
	for _, d := range []string{c.Root, natsDir} {
		if d == "" {
			continue
		}
		p, ok := storage.LocalPath(d)
		if !ok {
			continue
		}
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			out = append(out, p)
		}
	}
	return out
}

// remove removes the directories (a run that failed before it served).
func (m madeDirs) remove() {
	for _, d := range m {
		_ = os.RemoveAll(d)
	}
}
