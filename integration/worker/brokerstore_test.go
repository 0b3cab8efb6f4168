package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// The broker loses what the worker set up on it: its store (SIGKILLed, the store directory
// deleted, started again empty on the same port), or it refuses to make the streams again.
// The worker must make them again and go on, or say that it cannot.

// readyGrace is how long the worker's fetches may fail before /readyz stops answering 200
// (ingest.FetchGrace), plus room for a busy machine and the poll interval.
const readyGrace = 3*time.Second + 1500*time.Millisecond

// readySample is one answer of /readyz.
type readySample struct {
	at   time.Time
	code int
	body string
}

// readyLog polls /readyz every 50 ms until stop is called, keeping every answer.
type readyLog struct {
	mu      sync.Mutex
	samples []readySample
	stop    func()
}

func sampleReady(t *testing.T, addr string) *readyLog {
	l := &readyLog{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := http.Client{Timeout: time.Second}
		for ctx.Err() == nil {
			at := time.Now()
			s := readySample{at: at}
			if resp, err := c.Get("http://" + addr + "/readyz"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				s.code, s.body = resp.StatusCode, strings.TrimSpace(string(b))
			}
			l.mu.Lock()
			l.samples = append(l.samples, s)
			l.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	l.stop = func() { cancel(); <-done }
	t.Cleanup(l.stop)
	return l
}

// readyBetween are the 200 answers given from from to to.
func (l *readyLog) readyBetween(from, to time.Time) []readySample {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []readySample
	for _, s := range l.samples {
		if s.code == http.StatusOK && !s.at.Before(from) && !s.at.After(to) {
			out = append(out, s)
		}
	}
	return out
}

// publishBatches publishes batches from..to-1 as `publish` numbers them (same bodies and
// message ids), without creating or changing the stream: that is the worker's business here.
func publishBatches(t *testing.T, url string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		publishBody(t, url, graphtest.BatchBody(i), map[string]string{"Omnigraph-Mode": "append", "Nats-Msg-Id": fmt.Sprintf("batch-%d", i)})
	}
}

// waitRecreated waits until the broker holds the worker's ingest stream (with the worker's own
// subjects) and its durable consumer again, and returns when the later of the two was created,
// by the server's clock (the same host's). Each look uses a fresh connection: a connection
// that outlived the restart may still be waiting to reconnect.
func waitRecreated(t *testing.T, url string, within time.Duration) (time.Time, bool) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if created, ok := recreatedAt(url); ok {
			return created, true
		}
	}
	return time.Time{}, false
}

func recreatedAt(url string) (time.Time, bool) {
	nc, err := nats.Connect(url)
	if err != nil {
		return time.Time{}, false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return time.Time{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "OMNIGRAPH_DEMO")
	if err != nil || len(s.CachedInfo().Config.Subjects) != 4 { // ingest, merge, maintenance, schema
		return time.Time{}, false
	}
	c, err := js.Consumer(ctx, "OMNIGRAPH_DEMO", "omnigraph-worker")
	if err != nil {
		return time.Time{}, false
	}
	created := s.CachedInfo().Created
	if cc := c.CachedInfo().Created; cc.After(created) {
		created = cc
	}
	return created, true
}

// metricValue is the value of one series in the worker's /metrics ("" when absent).
func metricValue(t *testing.T, addr, series string) string {
	t.Helper()
	body := httpGet(t, "http://"+addr+"/metrics", http.StatusOK)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// The defect of issue #29 (item 4): nats-server is SIGKILLed, its store deleted, and it is
// started again empty on the same port. The worker takes its lease again (the bucket went
// with the store), re-creates its ingest, dead-letter and events streams and its consumer with
// its own settings, says so in its log and metrics, and commits what is published afterwards;
// the events and dead letters land in the re-created streams. /readyz never answers 200 while
// the worker cannot fetch for longer than the grace: neither while the broker is down nor while
// the streams are missing.
func TestAdversarialBrokerStoreLost(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	w := startWorker(t, root, ns.url, "", "--http", addr)
	waitStream(t, ns.url)
	publishBatches(t, ns.url, 0, 5)
	waitAcked(t, ns.url, 5, w)
	waitReady(t, addr, http.StatusOK)
	ready := sampleReady(t, addr)

	killed := time.Now()
	ns.kill()
	if err := os.RemoveAll(ns.store); err != nil {
		t.Fatal(err)
	}
	// Down for longer than the grace: the worker cannot fetch meanwhile and must say so.
	time.Sleep(5 * time.Second)
	ns.start()
	restarted := time.Now()
	created, ok := waitRecreated(t, ns.url, 30*time.Second)
	if !ok {
		ready.stop()
		late := ready.readyBetween(restarted.Add(readyGrace), time.Now())
		last := ""
		if len(late) > 0 {
			last = late[len(late)-1].body
		}
		t.Fatalf("the worker did not re-create its stream and consumer within 30 s of the broker coming back empty; "+
			"/readyz answered 200 %d times meanwhile (last %q)\nworker output:\n%s", len(late), last, w.out)
	}
	t.Logf("down %v; stream and consumer re-created %v after the broker came back", restarted.Sub(killed).Round(time.Millisecond),
		created.Sub(restarted).Round(time.Millisecond))

	publishBatches(t, ns.url, 5, 10)
	publishBody(t, ns.url, `{"type":"Nope","data":{}}`, map[string]string{"Nats-Msg-Id": "hostile"})
	waitAcked(t, ns.url, 6, w) // the new stream's sequences 1..6
	waitReady(t, addr, http.StatusOK)
	ready.stop()
	if late := ready.readyBetween(killed.Add(readyGrace), created); len(late) > 0 {
		t.Fatalf("/readyz answered 200 %d times while the worker could not fetch (broker killed at %s, stream back at %s), first at %s: %q",
			len(late), killed.Format(time.RFC3339Nano), created.Format(time.RFC3339Nano), late[0].at.Format(time.RFC3339Nano), late[0].body)
	}

	// The events of the new batches are in the re-created events stream, the hostile batch in
	// the re-created dead-letter stream.
	deadline := time.Now().Add(20 * time.Second)
	for streamMsgs(t, ns.url, "OMNIGRAPH_DEMO_EVENTS") < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the re-created events stream holds %d events, want 5", streamMsgs(t, ns.url, "OMNIGRAPH_DEMO_EVENTS"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if dls := listDeadLetters(t, ns.url); len(dls) != 1 || dls[0].Reason != "invalid" || dls[0].OrigSeq != 6 {
		t.Fatalf("dead letters %+v", dls)
	}
	out := w.out.String()
	if !regexp.MustCompile(`"msg":"re-created [^"]*".*OMNIGRAPH_DEMO.*omnigraph-worker`).MatchString(out) {
		t.Fatalf("the worker did not log what it re-created:\n%s", out)
	}
	if n := strings.Count(out, `"msg":"lease acquired"`); n < 2 {
		t.Fatalf("lease acquired %d times, want again after the store was lost:\n%s", n, out)
	}
	for _, what := range []string{"stream", "dlq_stream", "events_stream", "consumer"} {
		if v := metricValue(t, addr, fmt.Sprintf(`omnigraph_streams_recreated_total{graph="demo",what=%q}`, what)); v != "1" {
			t.Errorf("omnigraph_streams_recreated_total{what=%q} %q, want 1", what, v)
		}
	}
	if v := metricValue(t, addr, `omnigraph_stalled{graph="demo"}`); v != "0" {
		t.Errorf("omnigraph_stalled %q after the recovery", v)
	}
	w.terminate(t)
	checkExactlyOnce(t, root, 10)
}

// The broker comes back empty but refuses to make the ingest stream again (its file store is
// now smaller than the stream's configured stream_max_bytes; the lease bucket, which reserves
// nothing, is made). The worker holds the lease and cannot fetch: /readyz answers 503 naming
// JetStream's refusal within the grace, and past retry_budget the worker reports itself stalled
// as other stalls are reported. Once the broker can hold the stream again the worker re-creates
// it, commits, and the stall clears.
func TestAdversarialBrokerRefusesStreams(t *testing.T) {
	ns := prepareNATS(t)
	ns.configure("max_file_store: 1GB")
	ns.start()
	root := initGraph(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	const budget = 4 * time.Second
	w := startWorker(t, root, ns.url, "", "--http", addr, "--stream-max-bytes", fmt.Sprint(256<<20), "--retry-budget", budget.String())
	waitStream(t, ns.url)
	publishBatches(t, ns.url, 0, 3)
	waitAcked(t, ns.url, 3, w)
	waitReady(t, addr, http.StatusOK)

	ns.kill()
	if err := os.RemoveAll(ns.store); err != nil {
		t.Fatal(err)
	}
	ns.configure("max_file_store: 64MB")
	ns.start()
	restarted := time.Now()
	const refusal = "insufficient storage resources"
	waitReady(t, addr, http.StatusServiceUnavailable, refusal)
	waitReady(t, addr, http.StatusServiceUnavailable, "stalled: ", refusal)
	if took := time.Since(restarted); took > budget+10*time.Second {
		t.Fatalf("stalled reported %v after the broker came back, retry budget %v", took, budget)
	}
	t.Logf("/readyz while stalled: %s", httpGet(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable))
	if v := metricValue(t, addr, `omnigraph_stalled{graph="demo"}`); v != "1" {
		t.Fatalf("omnigraph_stalled %q while stalled", v)
	}
	if v := metricValue(t, addr, `omnigraph_retry_budget_exhausted_total{action="stalled",graph="demo"}`); v != "1" {
		t.Fatalf(`omnigraph_retry_budget_exhausted_total{action="stalled"} %q`, v)
	}
	if out := w.out.String(); !strings.Contains(out, `"level":"error"`) || !strings.Contains(out, "stalled") {
		t.Fatalf("no stall in the log:\n%s", out)
	}

	// The broker can hold the stream again (its store kept: the lease bucket survives).
	ns.kill()
	ns.configure("max_file_store: 1GB")
	ns.start()
	if _, ok := waitRecreated(t, ns.url, 60*time.Second); !ok {
		t.Fatalf("the worker did not re-create its stream once the broker could hold it:\n%s", w.out)
	}
	publishBatches(t, ns.url, 3, 6)
	waitAcked(t, ns.url, 3, w)
	waitReady(t, addr, http.StatusOK)
	if v := metricValue(t, addr, `omnigraph_stalled{graph="demo"}`); v != "0" {
		t.Fatalf("omnigraph_stalled %q after the recovery", v)
	}
	s, err := connectJS(t, ns.url).Stream(context.Background(), "OMNIGRAPH_DEMO")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.MaxBytes; got != 256<<20 {
		t.Fatalf("re-created stream's max bytes %d, want the configured %d", got, 256<<20)
	}
	w.terminate(t)
	checkExactlyOnce(t, root, 6)
	if testing.Verbose() {
		t.Logf("worker output:\n%s", w.out)
	}
}
