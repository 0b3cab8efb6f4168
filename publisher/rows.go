// Package publisher owns the __manifest dataset of a graph root: its row schema, snapshot
// reconstruction, and the one-commit publish that makes a graph commit visible, guarded by
// row-level compare-and-swap (an exact Lance commit on the manifest) and ExactGraphHead.
package publisher

import (
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// Stamp: the internal schema version every __manifest carries; any other value is refused.
const (
	StampKey     = "omnigraph:internal_schema_version"
	StampVersion = 6
)

// Object types of __manifest rows. Unknown types are skipped on read, which is how this product
// adds its ingest receipts without breaking the format.
const (
	TypeTable         = "table"
	TypeTableVersion  = "table_version"
	TypeTombstone     = "table_tombstone"
	TypeGraphCommit   = "graph_commit"
	TypeGraphHead     = "graph_head"
	TypeIngestReceipt = "ingest_receipt"
)

// ManifestSchema is the Arrow schema of __manifest, stamped with the internal schema version.
func ManifestSchema() *arrow.Schema {
	pk := arrow.NewMetadata([]string{schema.PrimaryKeyMeta}, []string{"true"})
	u64 := arrow.PrimitiveTypes.Uint64
	str := arrow.BinaryTypes.String
	md := arrow.NewMetadata([]string{StampKey}, []string{fmt.Sprint(StampVersion)})
	return arrow.NewSchema([]arrow.Field{
		{Name: "object_id", Type: str, Metadata: pk},
		{Name: "object_type", Type: str},
		{Name: "location", Type: str, Nullable: true},
		{Name: "metadata", Type: str, Nullable: true},
		{Name: "base_objects", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: str, Nullable: true}), Nullable: true},
		{Name: "table_key", Type: str},
		{Name: "stable_table_id", Type: u64, Nullable: true},
		{Name: "table_incarnation_id", Type: u64, Nullable: true},
		{Name: "table_version", Type: u64, Nullable: true},
		{Name: "table_branch", Type: str, Nullable: true},
		{Name: "row_count", Type: u64, Nullable: true},
	}, &md)
}

// Row is one __manifest row.
type Row struct {
	ObjectID           string
	ObjectType         string
	Location           *string
	Metadata           *string
	TableKey           string
	StableTableID      *uint64
	TableIncarnationID *uint64
	TableVersion       *uint64
	TableBranch        *string
	RowCount           *uint64
}

// TableVersionMetadata is the metadata JSON of a table_version row.
type TableVersionMetadata struct {
	ManifestPath string  `json:"manifest_path"`
	ManifestSize *uint64 `json:"manifest_size"`
	ETag         *string `json:"e_tag"`
	NamingScheme *string `json:"naming_scheme"`
}

// GraphCommitMetadata is the metadata JSON of a graph_commit row.
type GraphCommitMetadata struct {
	ParentCommitID       string `json:"parent_commit_id,omitempty"`
	MergedParentCommitID string `json:"merged_parent_commit_id,omitempty"`
	ActorID              string `json:"actor_id,omitempty"`
	CreatedAt            int64  `json:"created_at"`
}

// GraphHeadMetadata is the metadata JSON of a graph_head row.
type GraphHeadMetadata struct {
	HeadCommitID   string `json:"head_commit_id"`
	ParentCommitID string `json:"parent_commit_id,omitempty"`
}

// Receipt records which queue message a graph commit applied (this product's own object type).
type Receipt struct {
	Stream   string `json:"stream,omitempty"`
	Sequence uint64 `json:"sequence,omitempty"`
	// StreamCreated names the incarnation of Stream the message came from: the stream's
	// creation time (JetStream's StreamInfo.Created) in Unix nanoseconds. A stream deleted and
	// created again (by an operator, or after the broker lost its store) numbers its messages
	// from 1 again under the same name, so the name and sequence alone would meet the receipts
	// of the old stream's messages. Zero in receipts written before it was recorded, and in
	// receipts not made from a stream message.
	StreamCreated int64  `json:"stream_created,omitempty"`
	MsgID         string `json:"msg_id,omitempty"`
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
	GraphCommitID string `json:"graph_commit_id"`
	Branch        string `json:"branch"`
	// ManifestVersion is the manifest version the commit created (filled on read).
	ManifestVersion uint64 `json:"-"`
}

// ReceiptKey is the receipt's identity: the message id when the producer set one, else the
// stream position, <stream>@<created>:<sequence> (created in Unix nanoseconds) when the
// stream's incarnation is known, so that a re-created stream's message 1 is not the old
// stream's message 1. A producer's id stays the key as it is: it is meant to be unique across
// streams, and one reused for another body is caught by the payload hash (msg_id_reused).
// Without the incarnation (receipts of older builds, loads not read from a stream) the key is
// the legacy <stream>:<sequence>.
func (r *Receipt) ReceiptKey() string {
	switch {
	case r.MsgID != "":
		return r.MsgID
	case r.StreamCreated != 0:
		return fmt.Sprintf("%s@%d:%d", r.Stream, r.StreamCreated, r.Sequence)
	default:
		return r.LegacyKey()
	}
}

// LegacyKey is the key older builds gave a receipt without a message id: <stream>:<sequence>,
// blind to the stream's incarnation. State.ReceiptFor still consults it, under a rule, so that
// a message committed by an older build is recognised when it is redelivered after an upgrade.
func (r *Receipt) LegacyKey() string { return fmt.Sprintf("%s:%d", r.Stream, r.Sequence) }

// ReceiptObjectID is the __manifest object id of a receipt key.
func ReceiptObjectID(key string) string { return TypeIngestReceipt + ":" + key }

func jsonString(v any) *string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled here
	}
	s := string(b)
	return &s
}

func u64p(v uint64) *uint64 { return &v }

// rowsRecord converts rows to one Arrow record of ManifestSchema.
func rowsRecord(rows []Row) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, ManifestSchema())
	defer b.Release()
	str := func(i int, s *string) {
		if s == nil {
			b.Field(i).AppendNull()
		} else {
			b.Field(i).(*array.StringBuilder).Append(*s)
		}
	}
	num := func(i int, v *uint64) {
		if v == nil {
			b.Field(i).AppendNull()
		} else {
			b.Field(i).(*array.Uint64Builder).Append(*v)
		}
	}
	for i := range rows {
		r := &rows[i]
		b.Field(0).(*array.StringBuilder).Append(r.ObjectID)
		b.Field(1).(*array.StringBuilder).Append(r.ObjectType)
		str(2, r.Location)
		str(3, r.Metadata)
		b.Field(4).AppendNull()
		b.Field(5).(*array.StringBuilder).Append(r.TableKey)
		num(6, r.StableTableID)
		num(7, r.TableIncarnationID)
		num(8, r.TableVersion)
		str(9, r.TableBranch)
		num(10, r.RowCount)
	}
	return b.NewRecord()
}

// recordRows converts a scanned record (all columns but base_objects, plus _rowaddr) to rows.
func recordRows(rec arrow.Record) ([]Row, []uint64, error) {
	col := func(name string) (arrow.Array, error) {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) == 0 {
			return nil, &ManifestError{Reason: fmt.Sprintf("scan lacks column %q", name)}
		}
		return rec.Column(idx[0]), nil
	}
	names := []string{"object_id", "object_type", "location", "metadata", "table_key", "stable_table_id",
		"table_incarnation_id", "table_version", "table_branch", "row_count", "_rowaddr"}
	cols := make([]arrow.Array, len(names))
	for i, n := range names {
		c, err := col(n)
		if err != nil {
			return nil, nil, err
		}
		cols[i] = c
	}
	s := func(i, r int) *string {
		a := cols[i].(*array.String)
		if a.IsNull(r) {
			return nil
		}
		v := a.Value(r)
		return &v
	}
	u := func(i, r int) *uint64 {
		a := cols[i].(*array.Uint64)
		if a.IsNull(r) {
			return nil
		}
		v := a.Value(r)
		return &v
	}
	n := int(rec.NumRows())
	rows := make([]Row, n)
	addrs := make([]uint64, n)
	for r := 0; r < n; r++ {
		rows[r] = Row{ObjectID: cols[0].(*array.String).Value(r), ObjectType: cols[1].(*array.String).Value(r),
			Location: s(2, r), Metadata: s(3, r), TableKey: cols[4].(*array.String).Value(r),
			StableTableID: u(5, r), TableIncarnationID: u(6, r), TableVersion: u(7, r), TableBranch: s(8, r), RowCount: u(9, r)}
		addrs[r] = cols[10].(*array.Uint64).Value(r)
	}
	return rows, addrs, nil
}
