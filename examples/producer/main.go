// Command producer is an example producer for omnigraph-worker: it publishes one NDJSON graph
// batch to a graph's ingest subject with nats.go's jetstream package, then waits for the
// batch's outcome event on the graph's events stream and prints it. It needs nothing from
// this module: copy it as the start of your own producer (docs/producers.md is the contract).
//
//	make run &
//	go run ./examples/producer -graph demo -msg-id example-1
//
// It exits 0 when the batch was committed (or already applied, or empty), 1 when it was
// dead-lettered or held for an operator, and 2 when no outcome came within -timeout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Event is the part of an outcome event this producer reads (docs/producers.md lists them all).
type Event struct {
	Kind           string `json:"kind"`
	Outcome        string `json:"outcome"`
	SourceStream   string `json:"source_stream"`
	SourceSequence uint64 `json:"source_sequence"`
	SourceMsgID    string `json:"source_msg_id"`
	GraphCommitID  string `json:"graph_commit_id"`
	Reason         string `json:"reason"`
	ErrorKind      string `json:"error_kind"`
	Error          string `json:"error"`
	DLQSequence    uint64 `json:"dlq_sequence"`
}

// Batch is one publish: the body and its headers.
type Batch struct {
	Graph, Mode, Branch, From, Actor, MsgID string
	Body                                    []byte
}

// streamName is the worker's default stream of a graph: OMNIGRAPH_<GRAPH>, dashes as '_'.
func streamName(graph string) string {
	return "OMNIGRAPH_" + strings.ToUpper(strings.ReplaceAll(graph, "-", "_"))
}

// Publish publishes b and returns JetStream's ack and the events stream's last sequence
// before the publish, from which its outcome event is to be read.
func Publish(ctx context.Context, js jetstream.JetStream, b Batch) (*jetstream.PubAck, uint64, error) {
	events, err := js.Stream(ctx, streamName(b.Graph)+"_EVENTS")
	if err != nil {
		return nil, 0, fmt.Errorf("events stream of graph %s (is its worker running?): %w", b.Graph, err)
	}
	info, err := events.Info(ctx)
	if err != nil {
		return nil, 0, err
	}
	msg := nats.NewMsg("omnigraph." + b.Graph + ".ingest")
	msg.Data = b.Body
	for k, v := range map[string]string{"Omnigraph-Mode": b.Mode, "Omnigraph-Branch": b.Branch,
		"Omnigraph-From": b.From, "Omnigraph-Actor": b.Actor} {
		if v != "" {
			msg.Header.Set(k, v)
		}
	}
	var opts []jetstream.PublishOpt
	if b.MsgID != "" {
		// The JetStream dedupe id and the commit's receipt key: publish again with the same
		// id after a timeout, and the batch is still applied once.
		opts = append(opts, jetstream.WithMsgID(b.MsgID))
	}
	ack, err := js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		return nil, 0, err
	}
	return ack, info.State.LastSeq, nil
}

// Wait reads the events of graph after sequence from and returns the first outcome of the
// message JetStream acknowledged as ack. A "held" event is not final: the batch commits once
// an operator mends the graph, so Wait reports it and waits on unless stopAtHeld.
func Wait(ctx context.Context, js jetstream.JetStream, graph string, ack *jetstream.PubAck, from uint64, stopAtHeld bool) (*Event, error) {
	cons, err := js.OrderedConsumer(ctx, streamName(graph)+"_EVENTS", jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"omnigraph." + graph + ".events"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from + 1,
	})
	if err != nil {
		return nil, err
	}
	for {
		msgs, err := cons.Fetch(100, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, err
		}
		for m := range msgs.Messages() {
			var ev Event
			if json.Unmarshal(m.Data(), &ev) != nil {
				continue
			}
			if ev.SourceStream != ack.Stream || ev.SourceSequence != ack.Sequence {
				continue
			}
			if ev.Outcome != "held" || stopAtHeld {
				return &ev, nil
			}
			fmt.Fprintf(os.Stderr, "held for an operator (%s): %s\n", ev.ErrorKind, ev.Error)
		}
		if err := msgs.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func main() {
	url := flag.String("nats-url", nats.DefaultURL, "NATS server")
	graph := flag.String("graph", "demo", "graph name")
	mode := flag.String("mode", "merge", "load mode: merge, append or overwrite")
	branch := flag.String("branch", "", "branch (default main)")
	msgID := flag.String("msg-id", "", "Nats-Msg-Id: dedupe and receipt key")
	timeout := flag.Duration("timeout", time.Minute, "how long to wait for the outcome")
	flag.Parse()
	body := []byte(`{"type":"Person","data":{"handle":"alice","name":"Alice","active":true}}` + "\n")

	nc, err := nats.Connect(*url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(2)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ack, from, err := Publish(ctx, js, Batch{Graph: *graph, Mode: *mode, Branch: *branch, MsgID: *msgID, Body: body})
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer: publish:", err)
		os.Exit(2)
	}
	fmt.Printf("published: stream %s sequence %d duplicate %v\n", ack.Stream, ack.Sequence, ack.Duplicate)
	ev, err := Wait(ctx, js, *graph, ack, from, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer: no outcome:", err)
		os.Exit(2)
	}
	out, _ := json.Marshal(ev)
	fmt.Println(string(out))
	switch ev.Outcome {
	case "committed", "already_applied", "empty":
		return
	}
	os.Exit(1)
}
