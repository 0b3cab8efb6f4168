package lance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// Feature flags (reader and writer) that a manifest may carry.
const (
	FlagDeletionFiles  = 1
	FlagStableRowIDs   = 2
	flagUseV2Deprecate = 4
	FlagTableConfig    = 8
	FlagBasePaths      = 16
	// FlagDisableTransactionFile (writer only): the transaction is recorded inline only.
	FlagDisableTransactionFile = 32
	flagUnknownFrom            = 64
)

// BasePath is an extra root that data files may live under (branches point at their parent).
type BasePath struct {
	ID            uint32
	Name          *string
	IsDatasetRoot bool
	Path          string
}

// Manifest is one version of a dataset (lance.table.Manifest).
type Manifest struct {
	Schema             *schema.Schema
	Fragments          []Fragment
	Version            uint64
	Timestamp          time.Time
	Tag                string
	ReaderFlags        uint64
	WriterFlags        uint64
	MaxFragmentID      *uint32
	TransactionFile    string
	WriterLibrary      string
	WriterVersion      string
	NextRowID          uint64
	DataFormat         string // file_format, "lance"
	DataVersion        string // "2.0"
	Config             map[string]string
	BasePaths          []BasePath
	TableMetadata      map[string]string
	Branch             *string
	TransactionSection *uint64
	IndexSection       *uint64
	// Indices is the index section the manifest file holds at IndexSection (nil: none). A
	// commit carries it as Lance does (index_carry.go); marshalling lays it out and sets
	// IndexSection.
	Indices []Index
}

// StableRowIDs reports whether the dataset assigns stable row ids.
func (m *Manifest) StableRowIDs() bool { return m.ReaderFlags&FlagStableRowIDs != 0 }

// NumRows is the number of live rows in this version.
func (m *Manifest) NumRows() uint64 {
	var n uint64
	for i := range m.Fragments {
		n += m.Fragments[i].NumRows()
	}
	return n
}

// nextFragmentID is the id the next new fragment receives.
func (m *Manifest) nextFragmentID() uint64 {
	if m.MaxFragmentID == nil {
		return 0
	}
	return uint64(*m.MaxFragmentID) + 1
}

func (m *Manifest) basePath(id uint32) (*BasePath, bool) {
	for i := range m.BasePaths {
		if m.BasePaths[i].ID == id {
			return &m.BasePaths[i], true
		}
	}
	return nil, false
}

// recomputeFlags sets feature flags from content, as lance does on every commit.
func (m *Manifest) recomputeFlags(stable bool) {
	var f uint64
	for i := range m.Fragments {
		if m.Fragments[i].Deletion != nil {
			f |= FlagDeletionFiles
			break
		}
	}
	if stable {
		f |= FlagStableRowIDs
	}
	if len(m.BasePaths) > 0 {
		f |= FlagBasePaths
	}
	m.ReaderFlags = f
	if len(m.Config) > 0 {
		f |= FlagTableConfig
	}
	m.WriterFlags = f
}

func encodeManifest(m *Manifest) []byte {
	b, _ := encodeManifestReusing(m, nil)
	return b
}

// fragmentCodes are the encoded bodies of a manifest's fragments (its field 2 messages), in
// fragment order. A Dataset that a commit produced keeps them, so that its next commit
// re-encodes only the fragments that commit adds or changes: a table of thousands of
// fragments otherwise spent most of every commit encoding the same bytes again (measured:
// 55% of a load's time at 3,000 fragments).
type fragmentCodes [][]byte

// encodeManifestReusing encodes m taking reuse[i], where present, as the encoded body of
// m.Fragments[i], and returns the encoded bodies of all its fragments.
func encodeManifestReusing(m *Manifest, reuse fragmentCodes) ([]byte, fragmentCodes) {
	size := 4 << 10
	for _, c := range reuse {
		size += len(c) + 8
	}
	e := pb.Encoder{B: make([]byte, 0, size)}
	schema.AppendFields(&e, 1, m.Schema)
	codes := make(fragmentCodes, len(m.Fragments))
	for i := range m.Fragments {
		if i < len(reuse) && reuse[i] != nil {
			codes[i] = reuse[i]
			if checkFragmentCodes {
				var fresh pb.Encoder
				encodeFragment(&fresh, &m.Fragments[i])
				if !bytes.Equal(fresh.B, codes[i]) {
					panic(fmt.Sprintf("lance: reused encoding of fragment %d differs from the fragment", m.Fragments[i].ID))
				}
			}
		} else {
			var sub pb.Encoder
			encodeFragment(&sub, &m.Fragments[i])
			codes[i] = sub.B
		}
		e.BytesAlways(2, codes[i])
	}
	e.Uint(3, m.Version)
	e.BytesMap(5, m.Schema.Metadata)
	if m.IndexSection != nil {
		e.UintAlways(6, *m.IndexSection)
	}
	if !m.Timestamp.IsZero() {
		e.Message(7, func(s *pb.Encoder) {
			s.Int(1, m.Timestamp.Unix())
			s.Int(2, int64(m.Timestamp.Nanosecond()))
		})
	}
	e.String(8, m.Tag)
	e.Uint(9, m.ReaderFlags)
	e.Uint(10, m.WriterFlags)
	if m.MaxFragmentID != nil {
		e.UintAlways(11, uint64(*m.MaxFragmentID))
	}
	e.String(12, m.TransactionFile)
	e.Message(13, func(s *pb.Encoder) { s.String(1, m.WriterLibrary); s.String(2, m.WriterVersion) })
	e.Uint(14, m.NextRowID)
	e.Message(15, func(s *pb.Encoder) { s.String(1, m.DataFormat); s.String(2, m.DataVersion) })
	e.StringMap(16, m.Config)
	for _, bp := range m.BasePaths {
		e.Message(18, func(s *pb.Encoder) {
			s.Uint(1, uint64(bp.ID))
			if bp.Name != nil {
				s.StringAlways(2, *bp.Name)
			}
			s.Bool(3, bp.IsDatasetRoot)
			s.String(4, bp.Path)
		})
	}
	e.StringMap(19, m.TableMetadata)
	if m.Branch != nil {
		e.StringAlways(20, *m.Branch)
	}
	if m.TransactionSection != nil {
		e.UintAlways(21, *m.TransactionSection)
	}
	return e.B, codes
}

func decodeManifest(b []byte) (*Manifest, error) {
	m := &Manifest{}
	var flat []*schema.Field
	var meta map[string][]byte
	err := pb.Walk(b, func(f pb.Field) error {
		switch f.Num {
		case 1:
			fl, err := schema.DecodeField(f.Bytes)
			if err != nil {
				return err
			}
			flat = append(flat, fl)
		case 2:
			fr, err := decodeFragment(f.Bytes)
			if err != nil {
				return err
			}
			m.Fragments = append(m.Fragments, fr)
		case 3:
			m.Version = f.Varint
		case 5:
			k, v, err := pb.MapEntry(f.Bytes)
			if err != nil {
				return err
			}
			if meta == nil {
				meta = map[string][]byte{}
			}
			meta[k] = append([]byte(nil), v...)
		case 6:
			v := f.Varint
			m.IndexSection = &v
		case 7:
			var sec, nsec int64
			if err := pb.Walk(f.Bytes, func(t pb.Field) error {
				switch t.Num {
				case 1:
					sec = int64(t.Varint)
				case 2:
					nsec = int64(int32(t.Varint))
				}
				return nil
			}); err != nil {
				return err
			}
			m.Timestamp = time.Unix(sec, nsec).UTC()
		case 8:
			m.Tag = f.Str()
		case 9:
			m.ReaderFlags = f.Varint
		case 10:
			m.WriterFlags = f.Varint
		case 11:
			v := uint32(f.Varint)
			m.MaxFragmentID = &v
		case 12:
			m.TransactionFile = f.Str()
		case 13:
			return pb.Walk(f.Bytes, func(w pb.Field) error {
				switch w.Num {
				case 1:
					m.WriterLibrary = w.Str()
				case 2:
					m.WriterVersion = w.Str()
				}
				return nil
			})
		case 14:
			m.NextRowID = f.Varint
		case 15:
			return pb.Walk(f.Bytes, func(w pb.Field) error {
				switch w.Num {
				case 1:
					m.DataFormat = w.Str()
				case 2:
					m.DataVersion = w.Str()
				}
				return nil
			})
		case 16, 19:
			k, v, err := pb.MapEntry(f.Bytes)
			if err != nil {
				return err
			}
			target := &m.Config
			if f.Num == 19 {
				target = &m.TableMetadata
			}
			if *target == nil {
				*target = map[string]string{}
			}
			(*target)[k] = string(v)
		case 18:
			var bp BasePath
			if err := pb.Walk(f.Bytes, func(w pb.Field) error {
				switch w.Num {
				case 1:
					bp.ID = uint32(w.Varint)
				case 2:
					s := w.Str()
					bp.Name = &s
				case 3:
					bp.IsDatasetRoot = w.Varint != 0
				case 4:
					bp.Path = w.Str()
				}
				return nil
			}); err != nil {
				return err
			}
			m.BasePaths = append(m.BasePaths, bp)
		case 20:
			s := f.Str()
			m.Branch = &s
		case 21:
			v := f.Varint
			m.TransactionSection = &v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s, err := schema.Build(flat, meta)
	if err != nil {
		return nil, err
	}
	m.Schema = s
	return m, nil
}

// manifestFooter is the 16-byte tail: i64 position, u16 major, u16 minor, "LANC".
const manifestFooterLen = 16

var lanceMagic = []byte("LANC")

// marshalManifestFile lays out a manifest file: the inline transaction section first (as lance 8
// does), then the index section when there are indices, then the length-prefixed manifest,
// then the footer.
func marshalManifestFile(m *Manifest, txn []byte) []byte {
	out, _ := marshalManifestFileReusing(m, txn, nil)
	return out
}

// checkFragmentCodes makes every reused fragment encoding be checked against a fresh one (the
// package's tests turn it on).
var checkFragmentCodes = false

// marshalManifestFileReusing is marshalManifestFile with encodeManifestReusing.
func marshalManifestFileReusing(m *Manifest, txn []byte, reuse fragmentCodes) ([]byte, fragmentCodes) {
	var out []byte
	if txn != nil {
		zero := uint64(0)
		m.TransactionSection = &zero
		out = binary.LittleEndian.AppendUint32(out, uint32(len(txn)))
		out = append(out, txn...)
	} else {
		m.TransactionSection = nil
	}
	m.IndexSection = nil
	if len(m.Indices) > 0 {
		pos := uint64(len(out))
		m.IndexSection = &pos
		sec := encodeIndexSection(m.Indices)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(sec)))
		out = append(out, sec...)
	}
	body, codes := encodeManifestReusing(m, reuse)
	pos := len(out)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(body)))
	out = append(out, body...)
	out = binary.LittleEndian.AppendUint64(out, uint64(pos))
	out = binary.LittleEndian.AppendUint16(out, 0)
	out = binary.LittleEndian.AppendUint16(out, 2)
	return append(out, lanceMagic...), codes
}

// parseManifestFile decodes a whole manifest file and, when present, its inline transaction.
func parseManifestFile(name string, b []byte) (*Manifest, []byte, error) {
	bad := func(off int64, format string, args ...any) error {
		return &FormatError{File: name, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	n := int64(len(b))
	if n < manifestFooterLen+4 {
		return nil, nil, bad(-1, "file is %d bytes, too short for a manifest", n)
	}
	if string(b[n-4:]) != string(lanceMagic) {
		return nil, nil, bad(n-4, "bad magic %q, want LANC", b[n-4:])
	}
	pos := int64(binary.LittleEndian.Uint64(b[n-16:]))
	if pos < 0 || pos > n-manifestFooterLen-4 {
		return nil, nil, bad(n-16, "manifest position %d outside the file", pos)
	}
	length := int64(binary.LittleEndian.Uint32(b[pos:]))
	if length != n-manifestFooterLen-(pos+4) {
		return nil, nil, bad(pos, "manifest length %d does not end at the footer (%d bytes available)", length, n-manifestFooterLen-(pos+4))
	}
	m, err := decodeManifest(b[pos+4 : pos+4+length])
	if err != nil {
		return nil, nil, bad(pos+4, "manifest protobuf: %v", err)
	}
	var txn []byte
	if m.TransactionSection != nil {
		tp := int64(*m.TransactionSection)
		if tp < 0 || tp+4 > pos {
			return nil, nil, bad(tp, "transaction section position %d outside the file", tp)
		}
		tl := int64(binary.LittleEndian.Uint32(b[tp:]))
		if tp+4+tl > pos {
			return nil, nil, bad(tp, "transaction section length %d runs past the manifest", tl)
		}
		txn = b[tp+4 : tp+4+tl]
	}
	if m.IndexSection != nil {
		ip := int64(*m.IndexSection)
		end := n - manifestFooterLen
		if ip < 0 || ip+4 > end {
			return nil, nil, bad(ip, "index section position %d outside the file", ip)
		}
		il := int64(binary.LittleEndian.Uint32(b[ip:]))
		if ip+4+il > end || (ip < pos && ip+4+il > pos) {
			return nil, nil, bad(ip, "index section length %d runs past its end", il)
		}
		xs, err := decodeIndexSection(b[ip+4 : ip+4+il])
		if err != nil {
			return nil, nil, bad(ip+4, "index section: %v", err)
		}
		m.Indices = xs
	}
	return m, txn, nil
}
