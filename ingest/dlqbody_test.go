package ingest

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A dead letter sent by reference gets its body back from the ingest stream only while that
// stream is the one it came from and the sequence still holds that message: after the stream
// is made again (its sequences start over) or the sequence holds another message, the replay
// refuses with a BodyGoneError instead of replaying a stranger's batch.
func TestOriginalBodyOnlyFromItsOwnMessage(t *testing.T) {
	ctx := context.Background()
	f := newDLQFixture(t)
	body := strings.Repeat("x", 100)
	seq := f.original(body)
	fetch := func() ([]byte, error) { // the newest dead letter's body
		dls, err := DeadLetters(ctx, f.js, f.cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		return originalBody(ctx, f.js, dls[len(dls)-1])
	}
	f.letter("invalid", seq, "", 100, f.created)
	if got, err := fetch(); err != nil || string(got) != body {
		t.Fatalf("its own body: %q %v", got, err)
	}
	var gone *BodyGoneError
	f.letter("invalid", seq, "", 100, f.created-1) // from an earlier incarnation of the stream
	if _, err := fetch(); !errors.As(err, &gone) || !strings.Contains(err.Error(), "created again") {
		t.Fatalf("a re-created stream: %v", err)
	}
	f.letter("invalid", seq, "", 99, f.created) // the sequence holds a message of another size
	if _, err := fetch(); !errors.As(err, &gone) || !strings.Contains(err.Error(), "another message") {
		t.Fatalf("another message: %v", err)
	}
}
