package graphtest

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BatchBody is batch i of the integration suites on the Example schema: a Person p<i>, a
// Company c<i>.io and the WorksAt edge w<i> between them, three rows a check can find.
func BatchBody(i int) string {
	return fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P","active":true}}
{"type":"Company","data":{"domain":"c%d.io","name":"C","size":"smb"}}
{"edge":"WorksAt","from":"p%d","to":"c%d.io","data":{"id":"w%d"}}`, i, i, i, i, i)
}

// PublishAcked publishes batch i to graph's ingest subject as an append with Nats-Msg-Id
// batch-<i>, again and again until JetStream acknowledges it or limit passes: through a
// server's death or a stream leader's election a publish fails for a while, and the id makes a
// retry of a stored one a duplicate.
func PublishAcked(js jetstream.JetStream, graph string, i int, limit time.Duration) error {
	var err error
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		m := nats.NewMsg("omnigraph." + graph + ".ingest")
		m.Data = []byte(BatchBody(i))
		m.Header.Set("Omnigraph-Mode", "append")
		m.Header.Set("Nats-Msg-Id", fmt.Sprintf("batch-%d", i))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = js.PublishMsg(ctx, m)
		cancel()
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("batch %d to %s not acknowledged: %w", i, graph, err)
}
