package ingest

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// Maintenance requests on omnigraph.<graph>.maintenance let an operator compact or clean up a
// graph a worker serves: the worker applies them in stream order, between batches, under its
// lease, which no direct tool beside a running worker can do (on an object store it cannot even
// tell that a worker runs).

// MaintenanceRequestBody is the JSON body of a maintenance request.
type MaintenanceRequestBody struct {
	Op string `json:"op"` // "optimize" or "cleanup"
	// optimize
	All    bool `json:"all,omitempty"`
	Fanout int  `json:"fanout,omitempty"`
	// Indices also builds the indices a table with rows lacks (engine.OptimizeOptions).
	Indices bool `json:"indices,omitempty"`
	// cleanup
	Keep      int    `json:"keep,omitempty"`
	OlderThan string `json:"older_than,omitempty"` // a whole number with s, m, h, d or w
	DryRun    bool   `json:"dry_run,omitempty"`
}

// ParseMaintenanceRequest reads a maintenance request strictly.
func ParseMaintenanceRequest(data []byte) (MaintenanceRequestBody, error) {
	var body MaintenanceRequestBody
	if err := decodeRequest(data, &body, "maintenance request", `{"op":"optimize","all","fanout","indices"} or {"op":"cleanup","keep","older_than","dry_run"}`); err != nil {
		return body, err
	}
	switch body.Op {
	case "optimize":
		if body.Keep != 0 || body.OlderThan != "" || body.DryRun {
			return body, &errs.InvalidInput{Field: "op", Reason: "keep, older_than and dry_run belong to cleanup"}
		}
		if body.Fanout == 1 || body.Fanout < 0 {
			return body, &errs.InvalidInput{Field: "fanout", Reason: "must be at least 2"}
		}
	case "cleanup":
		if body.All || body.Fanout != 0 || body.Indices {
			return body, &errs.InvalidInput{Field: "op", Reason: "all, fanout and indices belong to optimize"}
		}
		if body.Keep < 1 {
			return body, &errs.InvalidInput{Field: "keep", Reason: "cleanup needs keep of at least 1"}
		}
		if _, err := ParseAge(body.OlderThan); err != nil {
			return body, &errs.InvalidInput{Field: "older_than", Reason: err.Error()}
		}
	default:
		return body, &errs.InvalidInput{Field: "op", Reason: fmt.Sprintf("unknown maintenance op %q (want optimize or cleanup)", body.Op)}
	}
	return body, nil
}

// ParseAge reads a duration with the cleanup units s, m, h, d and w ("" is none).
func ParseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[s[len(s)-1]]
	n, err := strconv.ParseUint(s[:len(s)-1], 10, 32)
	if unit == 0 || err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a positive whole number followed by s, m, h, d or w", s)
	}
	// Beyond about 292 years the product wraps around, to a negative age that would keep nothing.
	if n > uint64(math.MaxInt64/unit) {
		return 0, fmt.Errorf("%q is longer than %d%c", s, math.MaxInt64/unit, s[len(s)-1])
	}
	return time.Duration(n) * unit, nil
}

// maintenanceRequest parses a maintenance request and returns the write that applies it.
func (w *Worker) maintenanceRequest(msg jetstream.Msg) (func(context.Context) (*applied, error), error) {
	body, err := ParseMaintenanceRequest(msg.Data())
	if err != nil {
		return nil, err
	}
	actor := msg.Headers().Get(HeaderActor)
	if body.Op == "optimize" {
		return func(ctx context.Context) (*applied, error) {
			res, err := w.g.Optimize(ctx, engine.OptimizeOptions{All: body.All, Fanout: body.Fanout, Indices: body.Indices, Actor: actor})
			if err != nil {
				return nil, err
			}
			ev := Event{Kind: "optimize", Branch: "main", Optimize: res}
			if res.Commit != nil {
				ev.GraphCommitID, ev.ManifestVersion, ev.ActorID = res.Commit.GraphCommitID, res.Commit.GraphManifestVersion, res.Commit.ActorID
			}
			return &applied{event: ev}, nil
		}, nil
	}
	age, _ := ParseAge(body.OlderThan)
	return func(ctx context.Context) (*applied, error) {
		res, err := w.g.Cleanup(ctx, engine.CleanupOptions{Keep: body.Keep, OlderThan: age, DryRun: body.DryRun})
		if err != nil {
			return nil, err
		}
		return &applied{event: Event{Kind: "cleanup", Branch: "main", Cleanup: res}}, nil
	}, nil
}
