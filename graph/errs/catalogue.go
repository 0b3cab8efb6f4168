package errs

import (
	"errors"
	"sort"
)

// Kinds that error types of other packages declare through ErrorKind (this package does not
// import them). Each means the graph, not the message, needs an operator.
const (
	// KindTableDrift: a table's Lance HEAD moved outside a graph commit (engine.DriftError, and
	// recovery refusing to restore through a foreign or buried effect).
	KindTableDrift = "table_drift"
	// KindManifestStamp: the `__manifest`'s internal schema stamp is missing or not this build's
	// (publisher.StampError).
	KindManifestStamp = "manifest_stamp"
	// KindCorrupt: stored graph data that cannot be decoded or does not hold together. The one
	// marker of every corruption refusal: Lance manifests, transactions and deletion files
	// (lance.FormatError), data files (lance/file.FormatError), __manifest rows
	// (publisher.ManifestError), recovery sidecars (recovery.SidecarError) and tables that
	// contradict their recovery intent (recovery.StateError).
	KindCorrupt = "corrupt"
	// KindDataVersion: stored data at a version this build cannot read or write: a table's
	// Lance data file version (lance.DataVersionError, lance/file.UnsupportedVersionError) or
	// a recovery sidecar's schema_version.
	KindDataVersion = "data_version"
	// KindSchemaUnsupported: a schema migration plan holds a change the migration rules refuse
	// (graph/pg/migrate.UnsupportedError), or a batch targets a branch forked before a schema
	// apply whose table no longer fits (engine.StaleBranchError). Dead-lettered.
	KindSchemaUnsupported = "schema_unsupported"
	// KindSchema: the graph's accepted schema moved under a running writer (another process
	// applied one) to a contract this build cannot load (engine.SchemaChangedError). The
	// writer holds rather than write against the schema it had.
	KindSchema = "schema"
	// KindWaitTimeout: a command that waits for the worker's outcome of the request it
	// published (publish --wait; merge, optimize, cleanup with --graph) got none in time. No
	// worker error has it: the request may still be queued or under way.
	KindWaitTimeout = "wait_timeout"
)

// ReasonMaxDeliver is the dead-letter reason of a message delivered max_deliver times without
// an ack. No error has this kind: the worker (or the server's MAX_DELIVERIES advisory) decides
// it from the delivery count.
const ReasonMaxDeliver = "max_deliver"

// Exit codes of the worker CLI that are not one kind's own.
const (
	ExitOK       = 0
	ExitInternal = 1 // an error of no kind with a code of its own
	ExitUsage    = 2 // a bad command line
	// ExitOperator is shared by every kind that needs an operator: a script that sees it
	// should stop and page someone rather than retry or fix its input.
	ExitOperator = 10
)

// KindInfo is everything the worker and the CLI decide from an error's kind.
type KindInfo struct {
	Kind string
	// Permanent: retrying the same input can never succeed.
	Permanent bool
	// NeedsOperator: the graph, not the message, is at fault, and only an operator can fix it.
	// The worker holds the message (never dead-letters it) and stops consuming until then.
	NeedsOperator bool
	// ExitCode is the CLI's exit status for an error of this kind (0 for ReasonOnly).
	ExitCode int
	// DeadLetter is the reason the worker dead-letters a message under, the suffix of
	// omnigraph.<graph>.dlq.<reason>; "" when it never dead-letters one for this kind.
	DeadLetter string
	// ReasonOnly marks a dead-letter reason that no error carries as its kind (max_deliver).
	ReasonOnly bool
	// Description is one line for docs and help.
	Description string
}

// catalogue is the one list of kinds, in the order docs and help show them.
var catalogue = []KindInfo{
	{Kind: KindInvalid, Permanent: true, ExitCode: 3, DeadLetter: KindInvalid,
		Description: "the batch or request itself is refused (framing, values, a header or member breaking a rule); the detail names line and field"},
	{Kind: KindKeyConflict, Permanent: true, ExitCode: 4, DeadLetter: KindKeyConflict,
		Description: "a strict insert (append) met an existing id, or one batch carried an id twice"},
	{Kind: KindResourceLimit, Permanent: true, ExitCode: 5, DeadLetter: KindResourceLimit,
		Description: "a bounded input or plan went over its ceiling before any effect"},
	{Kind: KindRecoveryRequired, ExitCode: 6,
		Description: "a pending recovery intent overlaps the write: recover, then the same write again (the worker does both)"},
	{Kind: KindReadSetChanged, ExitCode: 7,
		Description: "the branch's write authority moved between preparation and the write: prepare again and retry"},
	{Kind: KindPublishedDatasetVersionMismatch, ExitCode: 7,
		Description: "a stale view of a table's published version: refresh and retry"},
	{Kind: KindBranchMissing, Permanent: true, ExitCode: 8, DeadLetter: KindBranchMissing,
		Description: "the branch does not exist and no fork base was given"},
	{Kind: KindMergeConflict, Permanent: true, ExitCode: 9, DeadLetter: KindMergeConflict,
		Description: "a branch merge found conflicting changes; nothing was written"},
	{Kind: KindMsgIDReused, Permanent: true, ExitCode: ExitInternal, DeadLetter: KindMsgIDReused,
		Description: "a message id already applied with another body (reused after JetStream's duplicate window)"},
	{Kind: KindStorageRefused, Permanent: true, ExitCode: ExitInternal, DeadLetter: KindStorageRefused,
		Description: "the object store refuses a key of this write for good (a key it does not accept, a name too long, a permission error)"},
	{Kind: KindRetryExhausted, Permanent: true, ExitCode: ExitInternal, DeadLetter: KindRetryExhausted,
		Description: "an unrecognised error kept failing the message for longer than retry_budget"},
	{Kind: KindNotFound, ExitCode: 11,
		Description: "a read (`worker get`) named a type the schema does not declare, or an id no row of that type has"},
	{Kind: KindSchemaUnsupported, Permanent: true, ExitCode: 12, DeadLetter: KindSchemaUnsupported,
		Description: "a schema migration plan holds a change the migration rules refuse (a property type change, a required property added, …), or a batch for a branch forked before a schema change its rows no longer fit; nothing was written"},
	{Kind: KindWaitTimeout, ExitCode: 13,
		Description: "a command waiting for the worker's outcome of its request (publish --wait; merge, optimize or cleanup with --graph) got none within --wait-timeout: it may still be queued or under way, or no worker runs"},
	{Kind: KindTableDrift, NeedsOperator: true, ExitCode: ExitOperator,
		Description: "a table's Lance HEAD moved outside a graph commit (ahead of its published version with no recovery intent, or past what a pending intent accounts for)"},
	{Kind: KindManifestStamp, NeedsOperator: true, ExitCode: ExitOperator,
		Description: "the `__manifest`'s internal schema stamp is missing or not the one this build writes"},
	{Kind: KindCorrupt, NeedsOperator: true, ExitCode: ExitOperator,
		Description: "stored graph data cannot be decoded or does not hold together (a Lance manifest, transaction, deletion or data file, a `__manifest` row, a recovery sidecar, tables contradicting their intent)"},
	{Kind: KindSchema, NeedsOperator: true, ExitCode: ExitOperator,
		Description: "another writer changed the graph's accepted schema into one this build cannot load: the worker holds the message rather than write against the schema it had"},
	{Kind: KindDataVersion, NeedsOperator: true, ExitCode: ExitOperator,
		Description: "stored data at a version this build cannot read or write (a table's Lance data file version, a recovery sidecar's schema_version)"},
	{Kind: ReasonMaxDeliver, ReasonOnly: true, DeadLetter: ReasonMaxDeliver,
		Description: "delivered max_deliver times without an ack (a message that kills the worker); a dead-letter reason, not an error kind"},
	{Kind: KindUnknown, ExitCode: ExitInternal,
		Description: "none of the above (storage, network, …): transient ones retried for as long as it takes, others dead-lettered as retry_exhausted past retry_budget"},
}

var byKind = func() map[string]KindInfo {
	m := make(map[string]KindInfo, len(catalogue))
	for _, k := range catalogue {
		m[k.Kind] = k
	}
	return m
}()

// Catalogue returns every kind (and reason-only dead-letter reason), in display order.
func Catalogue() []KindInfo { return append([]KindInfo(nil), catalogue...) }

// Lookup returns the entry of kind.
func Lookup(kind string) (KindInfo, bool) {
	k, ok := byKind[kind]
	return k, ok
}

// DeadLetterReasons lists every reason a message can be dead-lettered under, in catalogue
// order: the subjects omnigraph.<graph>.dlq.<reason> the worker publishes to.
func DeadLetterReasons() []string {
	var out []string
	for _, k := range catalogue {
		if k.DeadLetter != "" {
			out = append(out, k.DeadLetter)
		}
	}
	return out
}

// ExitCode is the CLI's exit status for err: ExitOK for nil, the catalogue's code of its kind
// otherwise (ExitInternal for an untyped error).
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	return byKind[Kind(err)].ExitCode
}

// NeedsOperator reports whether err means the graph needs an operator before any write can
// succeed; the message that met it is fine.
func NeedsOperator(err error) bool { return err != nil && byKind[Kind(err)].NeedsOperator }

// ExitInfo is one exit status of the CLI and the kinds that end with it.
type ExitInfo struct {
	Code    int
	Meaning string
	Kinds   []string
}

var exitMeanings = map[int]string{
	ExitOK:       "ok",
	ExitInternal: "internal: an error without a code of its own",
	ExitUsage:    "usage: a bad command line",
	3:            "invalid input",
	4:            "key conflict",
	5:            "resource limit",
	6:            "recovery required",
	7:            "authority or version conflict",
	8:            "branch missing",
	9:            "merge conflict",
	ExitOperator: "the graph needs an operator",
	11:           "not found",
	12:           "schema migration unsupported",
	13:           "no outcome of the request within --wait-timeout",
}

// ExitCodes lists every exit status of the CLI, lowest first, with the kinds that end with it.
func ExitCodes() []ExitInfo {
	kinds := map[int][]string{}
	for _, k := range catalogue {
		if !k.ReasonOnly {
			kinds[k.ExitCode] = append(kinds[k.ExitCode], k.Kind)
		}
	}
	out := make([]ExitInfo, 0, len(exitMeanings))
	for code, meaning := range exitMeanings {
		out = append(out, ExitInfo{Code: code, Meaning: meaning, Kinds: kinds[code]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Classified is how an error type of another package declares its kind without this package
// importing it: ErrorKind returns one of the catalogue's kinds. Kind, Detail, Permanent,
// ExitCode and NeedsOperator honour it after this package's own types; a kind the catalogue
// does not hold counts as KindUnknown.
type Classified interface {
	error
	ErrorKind() string
}

// Detailed is optionally implemented by a Classified error to give Detail its fields.
type Detailed interface {
	ErrorDetail() map[string]any
}

// classified finds the first Classified error of err's chain with a catalogued kind.
func classified(err error) (Classified, string, bool) {
	var c Classified
	if !errors.As(err, &c) {
		return nil, "", false
	}
	k, ok := byKind[c.ErrorKind()]
	if !ok || k.ReasonOnly {
		return nil, "", false
	}
	return c, k.Kind, true
}
