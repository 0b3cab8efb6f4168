package lance

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// OpKind is the operation of a transaction: its field number in lance.table.Transaction.
type OpKind int

const (
	OpAppend           OpKind = 100
	OpDelete           OpKind = 101
	OpOverwrite        OpKind = 102
	OpCreateIndex      OpKind = 103
	OpRewrite          OpKind = 104
	OpMerge            OpKind = 105
	OpRestore          OpKind = 106
	OpReserveFragments OpKind = 107
	OpUpdate           OpKind = 108
	OpProject          OpKind = 109
	OpUpdateConfig     OpKind = 110
	OpDataReplacement  OpKind = 111
	OpUpdateMemWal     OpKind = 112
	OpClone            OpKind = 113
	OpUpdateBases      OpKind = 114
)

var opNames = map[OpKind]string{
	OpAppend: "Append", OpDelete: "Delete", OpOverwrite: "Overwrite", OpCreateIndex: "CreateIndex",
	OpRewrite: "Rewrite", OpMerge: "Merge", OpRestore: "Restore", OpReserveFragments: "ReserveFragments",
	OpUpdate: "Update", OpProject: "Project", OpUpdateConfig: "UpdateConfig",
	OpDataReplacement: "DataReplacement", OpUpdateMemWal: "UpdateMemWalState", OpClone: "Clone",
	OpUpdateBases: "UpdateBases",
}

func (k OpKind) String() string {
	if s, ok := opNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Op(%d)", int(k))
}

// Update modes.
const (
	UpdateRewriteRows    = 0
	UpdateRewriteColumns = 1
)

// Operation is the body of a transaction. Only the fields of its Kind are meaningful.
type Operation struct {
	Kind OpKind

	// Append, Overwrite: the new fragments. Update: new_fragments.
	Fragments []Fragment
	// Overwrite: the new schema and config values.
	Schema       *schema.Schema
	ConfigUpsert map[string]string
	// Delete, Update: fragments whose deletion vector (or files) changed, in full.
	UpdatedFragments []Fragment
	// Delete: deleted_fragment_ids. Update: removed_fragment_ids.
	RemovedFragmentIDs []uint64
	Predicate          string // Delete
	// Update.
	FieldsModified                []uint32
	FieldsForPreservingFragBitmap []uint32
	UpdateMode                    int
	// Restore.
	RestoreVersion uint64
	// Clone.
	Clone *CloneOp
	// Rewrite: each group's new fragments replace its old ones (compaction).
	Groups []RewriteGroup
	// CreateIndex: the indices it adds (replacing any of the same name) and removes (by uuid).
	NewIndices     []Index
	RemovedIndices []Index

	raw []byte // body of an operation this package only carries (never builds)
}

// RewriteGroup is one group of a Rewrite: OldFragments (as the read version had them, in
// manifest order) are replaced by NewFragments, which hold the same live rows (ids 0 until the
// commit assigns them; row ids and row versions carried over on stable-row-id datasets).
type RewriteGroup struct {
	OldFragments []Fragment
	NewFragments []Fragment
}

// CloneOp records a branch creation (a shallow clone of a source version).
type CloneOp struct {
	IsShallow  bool
	RefName    *string
	RefVersion uint64
	RefPath    string
	BranchName *string
}

// Transaction is a Lance transaction (lance.table.Transaction), the record of one commit.
type Transaction struct {
	ReadVersion uint64
	UUID        string
	Tag         string
	Properties  map[string]string
	Op          Operation
}

// FileName is the transaction file name under _transactions/.
func (t *Transaction) FileName() string { return fmt.Sprintf("%d-%s.txn", t.ReadVersion, t.UUID) }

func encodeFragments(e *pb.Encoder, n pb.Number, frags []Fragment) {
	for i := range frags {
		e.Message(n, func(s *pb.Encoder) { encodeFragment(s, &frags[i]) })
	}
}

func encodeTransaction(t *Transaction) []byte {
	var e pb.Encoder
	e.Uint(1, t.ReadVersion)
	e.String(2, t.UUID)
	e.String(3, t.Tag)
	e.StringMap(4, t.Properties)
	op := &t.Op
	e.Message(pb.Number(op.Kind), func(s *pb.Encoder) {
		switch op.Kind {
		case OpAppend:
			encodeFragments(s, 1, op.Fragments)
		case OpDelete:
			encodeFragments(s, 1, op.UpdatedFragments)
			s.PackedUints(2, op.RemovedFragmentIDs)
			s.String(3, op.Predicate)
		case OpOverwrite:
			encodeFragments(s, 1, op.Fragments)
			schema.AppendFields(s, 2, op.Schema)
			s.BytesMap(3, op.Schema.Metadata)
			s.StringMap(4, op.ConfigUpsert)
		case OpRestore:
			s.Uint(1, op.RestoreVersion)
		case OpUpdate:
			s.PackedUints(1, op.RemovedFragmentIDs)
			encodeFragments(s, 2, op.UpdatedFragments)
			encodeFragments(s, 3, op.Fragments)
			s.PackedUints(4, widen(op.FieldsModified))
			s.PackedUints(6, widen(op.FieldsForPreservingFragBitmap))
			s.Uint(7, uint64(op.UpdateMode))
		case OpRewrite:
			for i := range op.Groups {
				g := &op.Groups[i]
				s.Message(3, func(gs *pb.Encoder) {
					encodeFragments(gs, 1, g.OldFragments)
					encodeFragments(gs, 2, g.NewFragments)
				})
			}
		case OpCreateIndex:
			for i := range op.NewIndices {
				s.Message(1, func(is *pb.Encoder) { encodeIndex(is, &op.NewIndices[i]) })
			}
			for i := range op.RemovedIndices {
				s.Message(2, func(is *pb.Encoder) { encodeIndex(is, &op.RemovedIndices[i]) })
			}
		case OpClone:
			c := op.Clone
			s.Bool(1, c.IsShallow)
			if c.RefName != nil {
				s.StringAlways(2, *c.RefName)
			}
			s.Uint(3, c.RefVersion)
			s.String(4, c.RefPath)
			if c.BranchName != nil {
				s.StringAlways(5, *c.BranchName)
			}
		default:
			s.B = append(s.B, op.raw...)
		}
	})
	return e.B
}

func widen(v []uint32) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = uint64(x)
	}
	return out
}

func narrow(v []uint64) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = uint32(x)
	}
	return out
}

// DecodeTransaction parses a serialized lance.table.Transaction (a .txn file or inline section).
func DecodeTransaction(b []byte) (*Transaction, error) {
	t := &Transaction{}
	err := pb.Walk(b, func(f pb.Field) error {
		switch {
		case f.Num == 1:
			t.ReadVersion = f.Varint
		case f.Num == 2:
			t.UUID = f.Str()
		case f.Num == 3:
			t.Tag = f.Str()
		case f.Num == 4:
			k, v, err := pb.MapEntry(f.Bytes)
			if err != nil {
				return err
			}
			if t.Properties == nil {
				t.Properties = map[string]string{}
			}
			t.Properties[k] = string(v)
		case f.Num >= 100 && f.Num < 200:
			if err := f.Want(2); err != nil {
				return err
			}
			op, err := decodeOperation(OpKind(f.Num), f.Bytes)
			if err != nil {
				return fmt.Errorf("%s: %w", OpKind(f.Num), err)
			}
			t.Op = op
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t.Op.Kind == 0 {
		return nil, fmt.Errorf("%w: transaction has no operation", pb.ErrMalformed)
	}
	return t, nil
}

func decodeOperation(kind OpKind, b []byte) (Operation, error) {
	op := Operation{Kind: kind}
	var flat []*schema.Field
	var meta map[string][]byte
	frag := func(dst *[]Fragment, f pb.Field) error {
		fr, err := decodeFragment(f.Bytes)
		if err == nil {
			*dst = append(*dst, fr)
		}
		return err
	}
	var err error
	switch kind {
	case OpAppend:
		err = pb.Walk(b, func(f pb.Field) error {
			if f.Num == 1 {
				return frag(&op.Fragments, f)
			}
			return nil
		})
	case OpDelete:
		err = pb.Walk(b, func(f pb.Field) error {
			var err error
			switch f.Num {
			case 1:
				err = frag(&op.UpdatedFragments, f)
			case 2:
				op.RemovedFragmentIDs, err = f.Uints(op.RemovedFragmentIDs)
			case 3:
				op.Predicate = f.Str()
			}
			return err
		})
	case OpOverwrite:
		err = pb.Walk(b, func(f pb.Field) error {
			switch f.Num {
			case 1:
				return frag(&op.Fragments, f)
			case 2:
				fl, err := schema.DecodeField(f.Bytes)
				flat = append(flat, fl)
				return err
			case 3:
				k, v, err := pb.MapEntry(f.Bytes)
				if meta == nil {
					meta = map[string][]byte{}
				}
				meta[k] = append([]byte(nil), v...)
				return err
			case 4:
				k, v, err := pb.MapEntry(f.Bytes)
				if op.ConfigUpsert == nil {
					op.ConfigUpsert = map[string]string{}
				}
				op.ConfigUpsert[k] = string(v)
				return err
			}
			return nil
		})
		if err == nil {
			op.Schema, err = schema.Build(flat, meta)
		}
	case OpRestore:
		err = pb.Walk(b, func(f pb.Field) error {
			if f.Num == 1 {
				op.RestoreVersion = f.Varint
			}
			return nil
		})
	case OpCreateIndex:
		err = pb.Walk(b, func(f pb.Field) error {
			if f.Num != 1 && f.Num != 2 {
				return nil
			}
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			x, err := decodeIndex(f.Bytes)
			if err != nil {
				return err
			}
			if f.Num == 1 {
				op.NewIndices = append(op.NewIndices, x)
			} else {
				op.RemovedIndices = append(op.RemovedIndices, x)
			}
			return nil
		})
	case OpUpdate:
		err = pb.Walk(b, func(f pb.Field) error {
			var err error
			var u []uint64
			switch f.Num {
			case 1:
				op.RemovedFragmentIDs, err = f.Uints(op.RemovedFragmentIDs)
			case 2:
				err = frag(&op.UpdatedFragments, f)
			case 3:
				err = frag(&op.Fragments, f)
			case 4:
				u, err = f.Uints(nil)
				op.FieldsModified = append(op.FieldsModified, narrow(u)...)
			case 6:
				u, err = f.Uints(nil)
				op.FieldsForPreservingFragBitmap = append(op.FieldsForPreservingFragBitmap, narrow(u)...)
			case 7:
				op.UpdateMode = int(f.Varint)
			}
			return err
		})
	case OpRewrite:
		// groups=3; the deprecated top-level old_fragments=1 / new_fragments=2 are one group.
		var legacy RewriteGroup
		err = pb.Walk(b, func(f pb.Field) error {
			switch f.Num {
			case 1:
				return frag(&legacy.OldFragments, f)
			case 2:
				return frag(&legacy.NewFragments, f)
			case 3:
				if err := f.Want(2); err != nil {
					return err
				}
				var g RewriteGroup
				if err := pb.Walk(f.Bytes, func(gf pb.Field) error {
					switch gf.Num {
					case 1:
						return frag(&g.OldFragments, gf)
					case 2:
						return frag(&g.NewFragments, gf)
					}
					return nil
				}); err != nil {
					return err
				}
				op.Groups = append(op.Groups, g)
			}
			return nil
		})
		if len(op.Groups) == 0 && (len(legacy.OldFragments) > 0 || len(legacy.NewFragments) > 0) {
			op.Groups = []RewriteGroup{legacy}
		}
	case OpClone:
		c := &CloneOp{}
		err = pb.Walk(b, func(f pb.Field) error {
			switch f.Num {
			case 1:
				c.IsShallow = f.Varint != 0
			case 2:
				s := f.Str()
				c.RefName = &s
			case 3:
				c.RefVersion = f.Varint
			case 4:
				c.RefPath = f.Str()
			case 5:
				s := f.Str()
				c.BranchName = &s
			}
			return nil
		})
		op.Clone = c
	default:
		op.raw = append([]byte(nil), b...)
	}
	return op, err
}
