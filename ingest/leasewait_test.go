package ingest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestServiceWaitsForTheLeaseBucket: a lease bucket JetStream will not create or answer for
// (here a stream squats on its subjects; on a cluster, its leader died) keeps the service a
// standby that logs and tries again, not a process that exits; once the bucket can be made the
// service takes the lease and consumes.
func TestServiceWaitsForTheLeaseBucket(t *testing.T) {
	sg := newSvcGraph(t)
	ctx := context.Background()
	if _, err := sg.js.CreateStream(ctx, jetstream.StreamConfig{Name: "SQUAT", Subjects: []string{"$KV." + LeaseBucket + ".>"}}); err != nil {
		t.Fatal(err)
	}
	a := sg.run("a")
	for deadline := time.Now().Add(10 * time.Second); a.logs.FilterMessage("lease bucket unavailable; trying again").Len() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the service did not retry the lease bucket: %v", a.logs.All())
		}
	}
	select {
	case err := <-a.done:
		a.done <- err
		t.Fatalf("Run returned while the lease bucket was unavailable: %v", err)
	default:
	}
	if got := a.readyz(); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d without the lease, want 503", got)
	}
	if err := sg.js.DeleteStream(ctx, "SQUAT"); err != nil {
		t.Fatal(err)
	}
	a.waitReady()
	if err := a.end(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
