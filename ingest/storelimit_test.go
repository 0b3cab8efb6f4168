package ingest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxBodyBytes is exact against the server's own store: a body of that size is accepted,
// one byte more is refused as too large, with and without headers.
func TestMaxBodyBytesIsTheStoreLimit(t *testing.T) {
	ns, err := StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// A 32 MiB publish into a file store under a loaded race-detector run outlasted the
	// client's default 5 s (CI on e7341ea): the deadline is the test's, not the limit's.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{Graph: "limits"}
	if err := cfg.withDefaults(); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: cfg.Stream, Subjects: []string{cfg.IngestSubject()},
		Storage: jetstream.FileStorage, MaxMsgSize: MaxMessageBytes}); err != nil {
		t.Fatal(err)
	}
	withHeaders := nats.Header{}
	withHeaders.Set(HeaderMode, "append")
	withHeaders.Set(HeaderMsgID, "batch-000001")
	for _, hdr := range []nats.Header{nil, withHeaders} {
		limit := MaxBodyBytes(cfg.IngestSubject(), hdr)
		if limit >= MaxBatchBytes || limit < MaxBatchBytes-200 {
			t.Fatalf("limit %d", limit)
		}
		for _, n := range []int{limit, limit + 1} {
			m := &nats.Msg{Subject: cfg.IngestSubject(), Header: hdr, Data: bytes.Repeat([]byte("x"), n)}
			_, err := js.PublishMsg(ctx, m)
			if n == limit && err != nil {
				t.Fatalf("%d-byte body (the limit, headers %v) refused: %v", n, hdr, err)
			}
			if n > limit && !tooLarge(err) {
				t.Fatalf("%d-byte body (over the limit, headers %v): %v, want too large", n, hdr, err)
			}
		}
	}
}

// Error text goes into a header on one line, cut at a rune boundary when too long.
func TestBoundedText(t *testing.T) {
	if got := boundedText("line 1\r\nline 2"); got != "line 1  line 2" {
		t.Fatalf("%q", got)
	}
	long := strings.Repeat("é", maxHeaderValueBytes) // two bytes a rune
	got := boundedText(long)
	if len(got) > maxHeaderValueBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("%d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if d := boundedDetail(map[string]any{"blob": strings.Repeat("x", 2*maxHeaderValueBytes)}); string(d) != fmt.Sprintf(`{"bytes":%d,"truncated":true}`, 2*maxHeaderValueBytes+11) {
		t.Fatalf("unshrinkable detail: %s", d)
	}
}
