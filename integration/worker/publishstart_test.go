package worker

import (
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// TestPublishBeforeTheWorkerMadeItsStream: a batch published while the worker is still
// starting (no stream yet takes the subject) is sent again until the worker's stream takes
// it, longer than nats.go's own two retries would wait, and the worker then loads it. The
// tests publish with publishOn right after starting a worker; on a loaded machine the worker
// made its streams later than nats.go waited, and such a test failed with "no response from
// stream".
func TestPublishBeforeTheWorkerMadeItsStream(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	js := connectJS(t, ns.url)
	published := make(chan error, 1)
	go func() { published <- publishWith(js, "omnigraph.demo.ingest", graphtest.BatchBody(0), nil) }()
	time.Sleep(time.Second) // nats.go alone gives up after 500 ms
	select {
	case err := <-published:
		t.Fatalf("the publish returned before any stream existed: %v", err)
	default:
	}
	w := startWorker(t, root, ns.url, "")
	select {
	case err := <-published:
		if err != nil {
			t.Fatalf("publish: %v\n%s", err, w.out)
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("the publish did not end once the worker started:\n%s", w.out)
	}
	waitAcked(t, ns.url, 1, w)
}
