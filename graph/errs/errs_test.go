package errs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
)

func strp(s string) *string { return &s }

// as finds the first error of err's chain with the dynamic type of want.
func as(err error, want error) (error, bool) {
	switch want.(type) {
	case *KeyConflict:
		var t *KeyConflict
		return t, errors.As(err, &t)
	case *ResourceLimitExceeded:
		var t *ResourceLimitExceeded
		return t, errors.As(err, &t)
	case *RecoveryRequired:
		var t *RecoveryRequired
		return t, errors.As(err, &t)
	case *ReadSetChanged:
		var t *ReadSetChanged
		return t, errors.As(err, &t)
	case *PublishedDatasetVersionMismatch:
		var t *PublishedDatasetVersionMismatch
		return t, errors.As(err, &t)
	case *BranchNotFound:
		var t *BranchNotFound
		return t, errors.As(err, &t)
	case *NotFound:
		var t *NotFound
		return t, errors.As(err, &t)
	case *InvalidInput:
		var t *InvalidInput
		return t, errors.As(err, &t)
	case *MsgIDReused:
		var t *MsgIDReused
		return t, errors.As(err, &t)
	case *StorageRefused:
		var t *StorageRefused
		return t, errors.As(err, &t)
	case *RetryExhausted:
		var t *RetryExhausted
		return t, errors.As(err, &t)
	}
	panic(fmt.Sprintf("unhandled %T", want))
}

func TestTypedErrors(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		msg       string
		kind      string
		permanent bool
		detail    string // JSON of Detail(err), keys sorted by encoding/json
	}{
		{
			name:      "key conflict node with id",
			err:       &KeyConflict{TypeKey: "node:Person", EntityID: strp("Alice")},
			msg:       "node type 'Person' already has this id",
			kind:      "key_conflict",
			permanent: true,
			detail:    `{"entity_id":"Alice","type_key":"node:Person"}`,
		},
		{
			name:      "key conflict edge without id",
			err:       &KeyConflict{TypeKey: "edge:Knows"},
			msg:       "edge type 'Knows' already has this id",
			kind:      "key_conflict",
			permanent: true,
			detail:    `{"type_key":"edge:Knows"}`,
		},
		{
			name:      "key conflict other prefix",
			err:       &KeyConflict{TypeKey: "weird"},
			msg:       "dataset 'weird' already has this id",
			kind:      "key_conflict",
			permanent: true,
			detail:    `{"type_key":"weird"}`,
		},
		{
			name:   "not found by id",
			err:    &NotFound{TypeKey: "node:Person", ID: strp("zed")},
			msg:    `node type 'Person' has no row with id "zed"`,
			kind:   "not_found",
			detail: `{"id":"zed","type_key":"node:Person"}`,
		},
		{
			name:   "not found: no such type",
			err:    &NotFound{Name: "Persn"},
			msg:    "no node or edge type 'Persn'",
			kind:   "not_found",
			detail: `{"name":"Persn"}`,
		},
		{
			name:      "resource limit",
			err:       &ResourceLimitExceeded{Resource: "keyed entities for node:Thing", Limit: 8192, Actual: 8193},
			msg:       "resource limit exceeded for keyed entities for node:Thing: actual 8193, limit 8192",
			kind:      "resource_limit",
			permanent: true,
			detail:    `{"actual":8193,"limit":8192,"resource":"keyed entities for node:Thing"}`,
		},
		{
			name:      "resource limit keeps uint64 exact",
			err:       &ResourceLimitExceeded{Resource: "r", Limit: 1<<64 - 1, Actual: 1<<53 + 1},
			msg:       "resource limit exceeded for r: actual 9007199254740993, limit 18446744073709551615",
			kind:      "resource_limit",
			permanent: true,
			detail:    `{"actual":9007199254740993,"limit":18446744073709551615,"resource":"r"}`,
		},
		{
			name:   "recovery required",
			err:    &RecoveryRequired{OperationID: "01J0000000000000000000000A", Reason: "publish failed"},
			msg:    "recovery required for operation 01J0000000000000000000000A: publish failed",
			kind:   "recovery_required",
			detail: `{"operation_id":"01J0000000000000000000000A","reason":"publish failed"}`,
		},
		{
			name:   "read set changed both present",
			err:    &ReadSetChanged{Member: "graph_head:main", Expected: strp("c1"), Actual: strp("c2")},
			msg:    "write authority 'graph_head:main' changed during preparation (expected c1, current c2) — reprepare from the current branch state",
			kind:   "read_set_changed",
			detail: `{"actual":"c2","expected":"c1","member":"graph_head:main"}`,
		},
		{
			name:   "read set changed absent",
			err:    &ReadSetChanged{Member: "graph_head:feature", Actual: strp("c9")},
			msg:    "write authority 'graph_head:feature' changed during preparation (expected <absent>, current c9) — reprepare from the current branch state",
			kind:   "read_set_changed",
			detail: `{"actual":"c9","expected":null,"member":"graph_head:feature"}`,
		},
		{
			name:   "published dataset version mismatch",
			err:    &PublishedDatasetVersionMismatch{TypeKey: "node:Person", ExpectedPublishedDatasetVersion: 3, ActualPublishedDatasetVersion: 0},
			msg:    "stale view of dataset for node type 'Person': expected published dataset version 3 but current is 0 — refresh and retry",
			kind:   "published_dataset_version_mismatch",
			detail: `{"actual_published_dataset_version":0,"expected_published_dataset_version":3,"type_key":"node:Person"}`,
		},
		{
			name:      "branch not found",
			err:       &BranchNotFound{Branch: "feature/x"},
			msg:       "branch 'feature/x' not found",
			kind:      "branch_missing",
			permanent: true,
			detail:    `{"branch":"feature/x"}`,
		},
		{
			name:      "message id reused",
			err:       &MsgIDReused{MsgID: "m-1", PayloadSHA256: "bb", AppliedPayloadSHA256: "aa", GraphCommitID: "C1"},
			msg:       "message id 'm-1' was already applied in commit C1 with another body (sha256 aa, this one bb)",
			kind:      "msg_id_reused",
			permanent: true,
			detail:    `{"applied_payload_sha256":"aa","graph_commit_id":"C1","msg_id":"m-1","payload_sha256":"bb"}`,
		},
		{
			name:      "storage refused",
			err:       &StorageRefused{Op: "put", Key: "data/x.lance", Reason: "permission denied"},
			msg:       "storage refused put of 'data/x.lance': permission denied",
			kind:      "storage_refused",
			permanent: true,
			detail:    `{"key":"data/x.lance","op":"put","reason":"permission denied"}`,
		},
		{
			name:      "retry exhausted",
			err:       &RetryExhausted{Budget: "10m0s", FailingFor: "10m0.2s", Attempts: 31, Last: "boom"},
			msg:       "retry budget 10m0s spent: 31 attempts over 10m0.2s, last: boom",
			kind:      "retry_exhausted",
			permanent: true,
			detail:    `{"attempts":31,"failing_for":"10m0.2s","last_error":"boom","retry_budget":"10m0s"}`,
		},
		{
			name:      "invalid input line and field",
			err:       &InvalidInput{Line: 3, Field: "data.extra.x", Reason: "duplicate JSON member 'x'"},
			msg:       `line 3, field "data.extra.x": duplicate JSON member 'x'`,
			kind:      "invalid",
			permanent: true,
			detail:    `{"field":"data.extra.x","line":3,"reason":"duplicate JSON member 'x'"}`,
		},
		{
			name:      "invalid input whole line",
			err:       &InvalidInput{Line: 7, Reason: "graph batch row must be one JSON object"},
			msg:       "line 7: graph batch row must be one JSON object",
			kind:      "invalid",
			permanent: true,
			detail:    `{"field":"","line":7,"reason":"graph batch row must be one JSON object"}`,
		},
		{
			name:      "invalid input not line specific",
			err:       &InvalidInput{Field: "mode", Reason: "unknown load mode"},
			msg:       `field "mode": unknown load mode`,
			kind:      "invalid",
			permanent: true,
			detail:    `{"field":"mode","line":0,"reason":"unknown load mode"}`,
		},
		{
			name:      "invalid input reason only",
			err:       &InvalidInput{Reason: "empty"},
			msg:       "empty",
			kind:      "invalid",
			permanent: true,
			detail:    `{"field":"","line":0,"reason":"empty"}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.err.Error(); got != c.msg {
				t.Fatalf("Error()\n got %q\nwant %q", got, c.msg)
			}
			wrapped := fmt.Errorf("ingest seq 9: %w", fmt.Errorf("engine load: %w", c.err))
			joined := errors.Join(io.EOF, wrapped)
			located := &LineError{Line: 4, Err: wrapped}
			for _, e := range []error{c.err, wrapped, joined, located} {
				got, ok := as(e, c.err)
				if !ok || got != c.err {
					t.Fatalf("errors.As(%v) = %v, %v; want the original pointer", e, got, ok)
				}
				if k := Kind(e); k != c.kind {
					t.Fatalf("Kind = %q, want %q", k, c.kind)
				}
				if p := Permanent(e); p != c.permanent {
					t.Fatalf("Permanent = %v, want %v", p, c.permanent)
				}
				d, err := json.Marshal(Detail(e))
				if err != nil {
					t.Fatal(err)
				}
				if string(d) != c.detail {
					t.Fatalf("Detail JSON\n got %s\nwant %s", d, c.detail)
				}
			}
			// The struct's own JSON tags agree with Detail (same names, same presence).
			self, err := json.Marshal(c.err)
			if err != nil {
				t.Fatal(err)
			}
			var a, b map[string]any
			if err := json.Unmarshal(self, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(c.detail), &b); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("json.Marshal(err) = %s, Detail = %s", self, c.detail)
			}
		})
	}
}

func TestUntypedAndNil(t *testing.T) {
	if Kind(nil) != "" || Detail(nil) != nil || Permanent(nil) {
		t.Fatal("nil error must have no kind, detail or permanence")
	}
	plain := fmt.Errorf("storage get: %w", io.ErrUnexpectedEOF)
	if Kind(plain) != KindUnknown || Detail(plain) != nil || Permanent(plain) {
		t.Fatalf("untyped error: kind %q detail %v permanent %v", Kind(plain), Detail(plain), Permanent(plain))
	}
}

func TestFirstTypedErrorWins(t *testing.T) {
	// The outermost typed error decides, as errors.As does.
	inner := &ReadSetChanged{Member: "graph_head:main"}
	outer := &RecoveryRequired{OperationID: "op", Reason: inner.Error()}
	err := errors.Join(fmt.Errorf("a: %w", outer), inner)
	if Kind(err) != KindRecoveryRequired {
		t.Fatalf("Kind = %q", Kind(err))
	}
	if Permanent(errors.Join(&ReadSetChanged{}, &KeyConflict{})) {
		t.Fatal("permanence follows the first typed error")
	}
}

func TestLineError(t *testing.T) {
	rle := &ResourceLimitExceeded{Resource: "graph_batch_line_bytes", Limit: 3, Actual: 4}
	err := fmt.Errorf("framing: %w", &LineError{Line: 1, Err: rle})
	if got, want := err.Error(), "framing: line 1: resource limit exceeded for graph_batch_line_bytes: actual 4, limit 3"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	var le *LineError
	if !errors.As(err, &le) || le.Line != 1 {
		t.Fatalf("LineError not found: %v", err)
	}
	if Kind(err) != KindResourceLimit || !Permanent(err) {
		t.Fatalf("LineError must be transparent: kind %q", Kind(err))
	}
	d, _ := json.Marshal(Detail(err))
	if string(d) != `{"actual":4,"limit":3,"resource":"graph_batch_line_bytes"}` {
		t.Fatalf("detail %s", d)
	}
}
