package file

import (
	"encoding/binary"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/omnigraph/omnigraph-worker/lance/internal/pb"
)

// General compression (CompressiveEncoding.general, 2.2): a mini-block chunk's value buffer
// stored as the u64 little-endian length of the plain buffer, then one zstd frame of it. This
// is what Lance 12 writes for a column whose field asks for "lance-encoding:compression" =
// "zstd", and all three engines read it in 2.2 files. The writer uses it for every mini-block
// page of strings, binaries and scalars (not booleans, not vectors) of a 2.2 file; the engines
// themselves write general compression into mini-blocks only from 2.2 on, so 2.1 files stay
// plain. Chunks are cut on their plain size, as the engines cut them.

const compressionZstd = 2 // CompressionScheme.COMPRESSION_ALGORITHM_ZSTD

var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true))
	if err != nil {
		panic("lance file: zstd encoder: " + err.Error()) // fixed options: cannot fail
	}
	return e
})

// appendZstd appends raw as a general-compressed buffer to dst.
func appendZstd(dst, raw []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(raw)))
	return zstdEncoder().EncodeAll(raw, dst)
}

// compGeneralZstd is CompressiveEncoding{general{compression{scheme zstd}, values}}.
func compGeneralZstd(values []byte) []byte {
	var bc pb.Encoder
	bc.Uint(1, compressionZstd)
	var g pb.Encoder
	g.BytesAlways(1, bc.B)
	g.BytesAlways(3, values)
	var e pb.Encoder
	e.BytesAlways(10, g.B)
	return e.B
}
