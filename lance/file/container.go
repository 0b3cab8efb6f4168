package file

import (
	"encoding/binary"

	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"google.golang.org/protobuf/encoding/protowire"
)

// Container layout of a 2.0 file (protos/file2.proto):
//
//	page buffers, each padded to 64 bytes
//	global buffer 0: FileDescriptor{schema=1, length=2}
//	ColumnMetadata 0..C-1, back to back
//	column metadata offset table: C x {u64 position, u64 size}
//	global buffer offset table:   G x {u64 position, u64 size}
//	footer: u64 column_meta_start, u64 cmo_table_start, u64 gbo_table_start,
//	        u32 num_global_buffers, u32 num_columns, u16 major, u16 minor, "LANC"
const (
	footerSize = 40
	magic      = "LANC"
	// A 2.0 file says 0.3 in its footer (the manifest says 2.0); lance's version_to_numbers.
	footerMajor = 0
	footerMinor = 3
	bufferAlign = 64
	// Lance pads buffers with 'H'; the content is irrelevant but matching it keeps files alike.
	padByte = 0x48
)

// pageMeta is a written page, as recorded in its column's metadata.
type pageMeta struct {
	offsets, sizes []uint64
	rows           uint64
	encoding       []byte // ArrayEncoding message
}

// directEncoding wraps an Any{type_url, value} into Encoding{direct{encoding}}.
func directEncoding(url string, value []byte) []byte {
	var any pb.Encoder
	any.String(1, url)
	any.BytesAlways(2, value)
	var direct pb.Encoder
	direct.BytesAlways(1, any.B)
	var enc pb.Encoder
	enc.BytesAlways(2, direct.B)
	return enc.B
}

// columnEncoding is ColumnEncoding{values=Empty}, bytes 0a 00; the reader requires it present.
var columnEncoding = directEncoding(columnEncodingURL, []byte{0x0a, 0x00})

func appendColumnMetadata(dst []byte, pages []pageMeta) []byte {
	e := pb.Encoder{B: dst}
	e.BytesAlways(1, columnEncoding)
	for _, p := range pages {
		var pe pb.Encoder
		pe.PackedUints(1, p.offsets)
		pe.PackedUints(2, p.sizes)
		pe.Uint(3, p.rows)
		pe.BytesAlways(4, directEncoding(arrayEncodingURL, p.encoding))
		e.BytesAlways(2, pe.B)
	}
	return e.B
}

func encodeFileDescriptor(s *schema.Schema, rows uint64) []byte {
	var e pb.Encoder
	e.BytesAlways(1, schema.EncodeSchemaMessage(s))
	e.Uint(2, rows)
	return e.B
}

type footer struct {
	columnMetaStart, cmoStart, gboStart uint64
	numGlobalBuffers, numColumns        uint32
	major, minor                        uint16
}

func appendFooter(dst []byte, f footer) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, f.columnMetaStart)
	dst = binary.LittleEndian.AppendUint64(dst, f.cmoStart)
	dst = binary.LittleEndian.AppendUint64(dst, f.gboStart)
	dst = binary.LittleEndian.AppendUint32(dst, f.numGlobalBuffers)
	dst = binary.LittleEndian.AppendUint32(dst, f.numColumns)
	dst = binary.LittleEndian.AppendUint16(dst, f.major)
	dst = binary.LittleEndian.AppendUint16(dst, f.minor)
	return append(dst, magic...)
}

func parseFooter(b []byte) footer {
	return footer{
		columnMetaStart:  binary.LittleEndian.Uint64(b[0:]),
		cmoStart:         binary.LittleEndian.Uint64(b[8:]),
		gboStart:         binary.LittleEndian.Uint64(b[16:]),
		numGlobalBuffers: binary.LittleEndian.Uint32(b[24:]),
		numColumns:       binary.LittleEndian.Uint32(b[28:]),
		major:            binary.LittleEndian.Uint16(b[32:]),
		minor:            binary.LittleEndian.Uint16(b[34:]),
	}
}

// ---- reading metadata ----

// columnInfo is a column's metadata as the reader keeps it.
type columnInfo struct {
	metaPos int64 // position of its ColumnMetadata, for error messages
	pages   []pageInfo
	rows    uint64 // sum of page lengths
	// What a page copy (Concat) cannot carry over: column buffers, a column encoding other
	// than the plain one, fields this package does not know.
	colBuffers int
	plainEnc   bool
	unknown    bool
}

type pageInfo struct {
	rowStart, rows uint64
	offsets, sizes []uint64 // page buffers, checked to lie inside the file
	encoding       []byte   // ArrayEncoding message (the Any's value), or PageLayout when layout21
	layout21       bool     // a 2.1+ page (lance.encodings21.PageLayout)
	priority       uint64   // the top-level row the page starts at, as 2.1+ writers record it
	unknown        bool     // the Page message has fields this package does not know
}

// maxPageRows bounds a page's (and a file's) row count: Lance row addresses hold the row offset
// in 32 bits. Pages of all nulls have no buffers to check their length against, so this bound
// is what keeps a lying length from asking for an absurd allocation.
const maxPageRows = 1 << 32

// parseColumnMetadata decodes one ColumnMetadata message; fileSize bounds every buffer.
func parseColumnMetadata(b []byte, fileSize uint64) (columnInfo, error) {
	var ci columnInfo
	var colBufOffsets, colBufSizes []uint64
	err := pb.Walk(b, func(f pb.Field) error {
		switch f.Num {
		case 1:
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			url, value, err := parseDirect(f.Bytes)
			if err != nil {
				return err
			}
			if url != columnEncodingURL {
				return errf("column encoding has type %q, want %q", url, columnEncodingURL)
			}
			ci.plainEnc = string(value) == "\x0a\x00"
			return pb.Walk(value, func(g pb.Field) error {
				if g.Num == 2 || g.Num == 3 {
					return errf("column encoding %d (zone index or blob) is not supported", g.Num)
				}
				return nil
			})
		case 2:
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			p, err := parsePage(f.Bytes, fileSize)
			if err != nil {
				return errf("page %d: %v", len(ci.pages), err)
			}
			p.rowStart = ci.rows
			ci.rows += p.rows
			if ci.rows < p.rows {
				return errf("page row counts overflow")
			}
			ci.pages = append(ci.pages, p)
		case 3:
			var err error
			colBufOffsets, err = f.Uints(colBufOffsets)
			return err
		case 4:
			var err error
			colBufSizes, err = f.Uints(colBufSizes)
			return err
		default:
			ci.unknown = true
		}
		return nil
	})
	if err != nil {
		return ci, err
	}
	ci.colBuffers = len(colBufOffsets)
	return ci, checkBuffers(colBufOffsets, colBufSizes, fileSize)
}

func parsePage(b []byte, fileSize uint64) (pageInfo, error) {
	var p pageInfo
	haveEncoding := false
	err := pb.Walk(b, func(f pb.Field) error {
		var err error
		switch f.Num {
		case 1:
			p.offsets, err = f.Uints(p.offsets)
		case 2:
			p.sizes, err = f.Uints(p.sizes)
		case 3:
			if err = f.Want(protowire.VarintType); err == nil {
				p.rows = f.Varint
			}
		case 4:
			if err = f.Want(protowire.BytesType); err != nil {
				return err
			}
			var url string
			url, p.encoding, err = parseDirect(f.Bytes)
			if err != nil {
				return err
			}
			haveEncoding = true
			switch url {
			case arrayEncodingURL:
			case pageLayout21URL:
				p.layout21 = true
			default:
				return errf("page encoding has type %q, want %q", url, arrayEncodingURL)
			}
		case 5:
			if err = f.Want(protowire.VarintType); err == nil {
				p.priority = f.Varint
			}
		default:
			p.unknown = true
		}
		return err
	})
	if err != nil {
		return p, err
	}
	if !haveEncoding {
		return p, errf("page without an encoding")
	}
	if p.rows > maxPageRows {
		return p, errf("page claims %d rows, more than a Lance file can hold", p.rows)
	}
	return p, checkBuffers(p.offsets, p.sizes, fileSize)
}

func checkBuffers(offsets, sizes []uint64, fileSize uint64) error {
	if len(offsets) != len(sizes) {
		return errf("%d buffer offsets but %d buffer sizes", len(offsets), len(sizes))
	}
	for i, off := range offsets {
		if off > fileSize || sizes[i] > fileSize-off {
			return errf("buffer %d at %d+%d lies outside the %d-byte file", i, off, sizes[i], fileSize)
		}
	}
	return nil
}

// parseDirect unwraps Encoding{direct{encoding: Any{type_url, value}}}.
func parseDirect(b []byte) (url string, value []byte, err error) {
	var direct []byte
	found := false
	err = pb.Walk(b, func(f pb.Field) error {
		switch f.Num {
		case 1:
			return errf("indirect (deferred) encodings are not supported")
		case 2:
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			direct, found = f.Bytes, true
		case 3:
			return errf("encoding location 'none' is not supported")
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	if !found {
		return "", nil, errf("encoding is not direct")
	}
	var any []byte
	err = pb.Walk(direct, func(f pb.Field) error {
		if f.Num == 1 {
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			any = f.Bytes
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	err = pb.Walk(any, func(f pb.Field) error {
		if f.Num != 1 && f.Num != 2 {
			return nil
		}
		if err := f.Want(protowire.BytesType); err != nil {
			return err
		}
		if f.Num == 1 {
			url = f.Str()
		} else {
			value = f.Bytes
		}
		return nil
	})
	return url, value, err
}

// parseFileDescriptor decodes global buffer 0.
func parseFileDescriptor(b []byte) (*schema.Schema, uint64, error) {
	var schemaMsg []byte
	haveSchema := false
	var rows uint64
	err := pb.Walk(b, func(f pb.Field) error {
		switch f.Num {
		case 1:
			if err := f.Want(protowire.BytesType); err != nil {
				return err
			}
			schemaMsg, haveSchema = f.Bytes, true
		case 2:
			if err := f.Want(protowire.VarintType); err != nil {
				return err
			}
			rows = f.Varint
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if !haveSchema {
		return nil, 0, errf("file descriptor has no schema")
	}
	s, err := schema.DecodeSchemaMessage(schemaMsg)
	if err != nil {
		return nil, 0, errf("%v", err)
	}
	if err := checkSchemaTree(s); err != nil {
		return nil, 0, err
	}
	return s, rows, nil
}

// checkSchemaTree bounds the nesting of a decoded schema: every walk of the tree (Flatten,
// ArrowType) recurses once per level, and a hostile file could nest fields without limit.
func checkSchemaTree(s *schema.Schema) error {
	var walk func(fs []*schema.Field, depth int) error
	walk = func(fs []*schema.Field, depth int) error {
		if depth > 64 {
			return errf("schema nested deeper than 64 levels")
		}
		for _, f := range fs {
			if err := walk(f.Children, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(s.Fields, 0)
}

// appendFileTail appends what follows the page buffers of every file version: the file
// descriptor (global buffer 0), each column's metadata (meta appends column i's), the column
// metadata and global buffer offset tables, and the footer naming version major.minor.
func appendFileTail(dst, gb0 []byte, columns int, meta func(dst []byte, i int) []byte, major, minor uint16) []byte {
	return appendFileTailAt(dst, 0, gb0, columns, meta, major, minor)
}

// globalBufferAlign is the alignment of the extra global buffers a Writer appends, as Lance
// aligns the buffers it writes.
const globalBufferAlign = 64

// appendFileTailGlobals is appendFileTail for a file with global buffers beside the file
// descriptor: each of extra is written, 64-byte aligned, before the descriptor (aligned too),
// and listed after it in the global buffer table (extra[i] is global buffer i+1).
func appendFileTailGlobals(dst, gb0 []byte, extra [][]byte, columns int, meta func(dst []byte, i int) []byte, major, minor uint16) []byte {
	if len(extra) == 0 {
		return appendFileTail(dst, gb0, columns, meta, major, minor)
	}
	pos := make([][2]uint64, len(extra))
	for i, b := range extra {
		for len(dst)%globalBufferAlign != 0 {
			dst = append(dst, 0)
		}
		pos[i] = [2]uint64{uint64(len(dst)), uint64(len(b))}
		dst = append(dst, b...)
	}
	for len(dst)%globalBufferAlign != 0 { // Lance 2.1 readers refuse an unaligned descriptor here
		dst = append(dst, 0)
	}
	out := appendFileTail(dst, gb0, columns, meta, major, minor)
	// The tail lists one global buffer: rewrite its table with the extra ones after it. The
	// table is the last thing before the footer, so it moves the footer by 16 bytes a buffer.
	foot := parseFooter(out[len(out)-footerSize:])
	out = out[:len(out)-footerSize]
	for _, p := range pos {
		out = appendU64(appendU64(out, p[0]), p[1])
	}
	foot.numGlobalBuffers += uint32(len(extra))
	return appendFooter(out, foot)
}

// appendFileTailAt is appendFileTail for a dst whose first byte is the file's byte at: the
// pages before dst are written elsewhere (Concat.AppendRange).
func appendFileTailAt(dst []byte, at uint64, gb0 []byte, columns int, meta func(dst []byte, i int) []byte, major, minor uint16) []byte {
	pos := func() uint64 { return at + uint64(len(dst)) }
	gb0Pos := pos()
	dst = append(dst, gb0...)
	colMetaStart := pos()
	positions := make([]uint64, 0, 2*columns)
	for i := range columns {
		start := pos()
		dst = meta(dst, i)
		positions = append(positions, start, pos()-start)
	}
	cmoStart := pos()
	for _, p := range positions {
		dst = appendU64(dst, p)
	}
	gboStart := pos()
	dst = appendU64(appendU64(dst, gb0Pos), uint64(len(gb0)))
	return appendFooter(dst, footer{
		columnMetaStart: colMetaStart, cmoStart: cmoStart, gboStart: gboStart,
		numGlobalBuffers: 1, numColumns: uint32(columns), major: major, minor: minor,
	})
}

func appendU64(dst []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(dst, v) }
