package file

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// Concatenation by reference. Concat.Append copies every input's pages into the output it
// builds in memory: the input is read whole, its pages copied once more, and the output
// written from memory. Where the storage can copy byte ranges from file to file itself (a
// local disk: copy_file_range(2)), none of that has to pass through this process.
// AppendRange reads only an input's metadata (its tail and the mini-block chunk tables check
// reads), and lays the input's pages out in the output exactly as they lie in the input,
// shifted by where the input's run of pages starts in the output; FinishParts returns the
// output as Parts: ranges of the inputs, padding and the new metadata. The pages' buffers keep
// their alignment (each run is placed at the same offset modulo 64 as in its input), and the
// output's metadata is what Finish would write for them.

// Part is one piece of a file FinishParts describes: Data when Length is zero and Data is not
// nil, else Length bytes at Offset of the input Input (its AppendRange order, from 0).
type Part struct {
	Data   []byte
	Input  int
	Offset uint64
	Length uint64
}

// rangeGap is the most bytes between two page buffers of an input that are copied with them
// so that they stay one range: padding, or whatever a writer left there. (A variable for
// tests.)
var rangeGap uint64 = 4 << 10

// AppendRange is Append for an input read through src, whose pages are referenced rather than
// copied (see above): it refuses what Append refuses, in the same way. A Concat takes inputs
// by Append or by AppendRange, not both, and one built by AppendRange ends with FinishParts.
func (c *Concat) AppendRange(ctx context.Context, src Source, name string) error {
	switch {
	case c.done:
		return errors.New("lance file: AppendRange after Finish")
	case c.files > 0 && !c.ranged:
		return errors.New("lance file: AppendRange after Append")
	}
	r, err := open(ctx, src, name, metadataRead)
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return &CopyError{File: name, Reason: "the file does not parse", Err: err}
		}
		return err
	}
	read := func(off, n uint64) ([]byte, error) { return src.ReadAt(ctx, int64(off), int64(n)) }
	if err := c.check(r, read); err != nil {
		return err
	}
	c.ranged = true
	c.start(r)
	c.referencePages(r, len(c.srcs))
	c.srcs = append(c.srcs, src)
	c.rows += uint64(r.numRows)
	c.files++
	return nil
}

// pageBuffer is one buffer of an input's page, where it lies in the input.
type pageBuffer struct {
	col, page, k int
	off, size    uint64
}

// referencePages places r's page buffers, input number input, after the output's bytes so far:
// in the input's order, in runs of buffers no more than rangeGap apart, each run one Part at
// the output offset congruent to its input offset modulo the buffer alignment.
func (c *Concat) referencePages(r *Reader, input int) {
	var bufs []pageBuffer
	for i := range r.cols {
		for j, p := range r.cols[i].pages {
			for k := range p.offsets {
				bufs = append(bufs, pageBuffer{col: i, page: j, k: k, off: p.offsets[k], size: p.sizes[k]})
			}
		}
	}
	slices.SortStableFunc(bufs, func(a, b pageBuffer) int { return cmp.Compare(a.off, b.off) })
	at := make(map[[3]int]uint64, len(bufs)) // output offset by column, page, buffer
	open := false
	var runIn, runOut, runEnd uint64 // the current run: its input start, output start, input end
	closeRun := func() {
		if open {
			c.parts = append(c.parts, Part{Input: input, Offset: runIn, Length: runEnd - runIn})
			c.size = runOut + runEnd - runIn
			open = false
		}
	}
	for _, b := range bufs {
		switch {
		case b.size == 0:
			// An empty buffer holds nothing to copy: any offset inside the file will do.
			if open {
				at[[3]int{b.col, b.page, b.k}] = runOut
			} else {
				at[[3]int{b.col, b.page, b.k}] = c.size
			}
			continue
		case open && b.off <= runEnd+rangeGap:
			runEnd = max(runEnd, b.off+b.size)
		default:
			closeRun()
			c.pad((b.off%bufferAlign + bufferAlign - c.size%bufferAlign) % bufferAlign)
			open, runIn, runOut, runEnd = true, b.off, c.size, b.off+b.size
		}
		at[[3]int{b.col, b.page, b.k}] = runOut + b.off - runIn
	}
	closeRun()
	for i := range r.cols {
		for j, p := range r.cols[i].pages {
			wp := wpage21{rows: p.rows, priority: p.priority + c.rows, layout: p.encoding,
				offsets: make([]uint64, len(p.offsets)), sizes: slices.Clone(p.sizes)}
			for k := range p.offsets {
				wp.offsets[k] = at[[3]int{i, j, k}]
			}
			c.cols[i] = append(c.cols[i], wp)
		}
	}
}

// pad adds n padding bytes to a ranged output.
func (c *Concat) pad(n uint64) {
	if n == 0 {
		return
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = padByte
	}
	c.parts = append(c.parts, Part{Data: b})
	c.size += n
}

// FinishParts is Finish for a Concat built by AppendRange: the file as parts, the last one its
// metadata. It reads the metadata back through the parts, as Finish does, before it returns
// them. The Concat cannot be used after.
func (c *Concat) FinishParts(ctx context.Context) ([]Part, error) {
	if c.files == 0 || c.done || !c.ranged {
		return nil, errors.New("lance file: FinishParts of no files, of files appended by Append, or twice")
	}
	c.done = true
	c.pad((bufferAlign - c.size%bufferAlign) % bufferAlign)
	gb0 := encodeFileDescriptor(c.want, c.rows)
	tail := appendFileTailAt(nil, c.size, gb0, len(c.cols), func(dst []byte, i int) []byte {
		return appendColumnMetadata21(dst, c.cols[i])
	}, uint16(c.version.Major), uint16(c.version.Minor))
	parts := append(c.parts, Part{Data: tail})
	src := &partsSource{parts: parts, srcs: c.srcs, size: c.size + uint64(len(tail))}
	c.parts, c.cols, c.srcs = nil, nil, nil
	// The first read is exactly the metadata, held in memory: no input is read again.
	r, err := open(ctx, src, "concatenation", int64(len(tail)))
	if err != nil {
		return nil, fmt.Errorf("lance file: concatenated file does not parse: %w", err)
	}
	if err := c.verify(r); err != nil {
		return nil, err
	}
	return parts, nil
}

// PartsSize is the bytes of the file parts make.
func PartsSize(parts []Part) uint64 {
	var n uint64
	for _, p := range parts {
		n += p.size()
	}
	return n
}

func (p Part) size() uint64 {
	if p.Length == 0 {
		return uint64(len(p.Data))
	}
	return p.Length
}

// partsSource reads a file described by parts, its ranges through the inputs' sources.
type partsSource struct {
	parts []Part
	srcs  []Source
	size  uint64
}

func (s *partsSource) Size() int64 { return int64(s.size) }

func (s *partsSource) ReadAt(ctx context.Context, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || uint64(off+n) > s.size {
		return nil, fmt.Errorf("lance file: read [%d, %d) outside the %d-byte concatenation", off, off+n, s.size)
	}
	out := make([]byte, 0, n)
	var pos uint64
	for _, p := range s.parts {
		end := pos + p.size()
		if lo, hi := max(pos, uint64(off)), min(end, uint64(off+n)); lo < hi {
			if p.Length == 0 {
				out = append(out, p.Data[lo-pos:hi-pos]...)
			} else {
				b, err := s.srcs[p.Input].ReadAt(ctx, int64(p.Offset+lo-pos), int64(hi-lo))
				if err != nil {
					return nil, err
				}
				out = append(out, b...)
			}
		}
		pos = end
	}
	return out, nil
}
