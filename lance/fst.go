package lance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
)

// A finite state transducer in the serialization of the Rust fst crate (format version 3),
// which Lance's INVERTED index uses for its token set (part_<n>_tokens.lance, column
// _token_fst_bytes): a map from token bytes to token id. docs/lance-indices.md describes it.
//
// The layout, as the crate reads it:
//   - a 16-byte header: u64 format version (3), u64 type (0);
//   - the nodes, each written after the nodes it points to, and addressed by the offset of its
//     last byte (its state byte); a node's fields are read backwards from there;
//   - a footer: u64 number of keys, u64 address of the root node, u32 checksum (CRC-32C of
//     everything before it, masked as Snappy's frame format masks it).
//
// Address 0 is the final node without transitions or output, never written. A transition
// address is stored as the distance back from the first byte of the node holding it (0 for
// address 0). A key's value is the sum of the outputs on its path plus its final node's output.

const (
	fstVersion         = 3
	fstEmptyAddr       = 0
	fstNoneAddr        = 1
	fstTransIndexAbove = 32 // a node with more transitions carries a 256-byte input index
)

// fstCommonInputs lists, most frequent first, the input bytes a one-transition node may name
// with a 6-bit index in its state byte (index i+1 names fstCommonInputs[i]). The crate fixes
// this order; a reader needs it to decode nodes that use it.
var fstCommonInputs = func() [256]byte {
	var t [256]byte
	head := "te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHGWUV,YKJZXQ;)(~[]$!'*@"
	n := copy(t[:], head)
	for b := 0; b < 0x20; b++ {
		t[n] = byte(b)
		n++
	}
	n += copy(t[n:], " \"#<>\\^`{|}")
	for b := 0x7f; b <= 0xff; b++ {
		t[n] = byte(b)
		n++
	}
	if n != 256 {
		panic("lance: fst common inputs: " + strconv.Itoa(n))
	}
	return t
}()

// fstCommonIndex is, per byte, its 1-based index in fstCommonInputs when it fits the state
// byte's six bits, else 0.
var fstCommonIndex = func() [256]byte {
	var t [256]byte
	for i, b := range fstCommonInputs {
		if i+1 <= 0x3f {
			t[b] = byte(i + 1)
		}
	}
	return t
}()

var fstCastagnoli = crc32.MakeTable(crc32.Castagnoli)

func fstMaskedChecksum(b []byte) uint32 {
	s := crc32.Checksum(b, fstCastagnoli)
	return (s>>15 | s<<17) + 0xa282ead8
}

type fstTrans struct {
	inp  byte
	out  uint64
	addr int
}

type fstNode struct {
	final    bool
	finalOut uint64
	trans    []fstTrans
}

// key is the node's content for the registry of compiled nodes.
func (n *fstNode) key() string {
	var sb strings.Builder
	if n.final {
		sb.WriteByte('F')
		sb.WriteString(strconv.FormatUint(n.finalOut, 36))
	}
	for _, t := range n.trans {
		sb.WriteByte('|')
		sb.WriteByte(t.inp)
		sb.WriteString(strconv.FormatUint(t.out, 36))
		sb.WriteByte(',')
		sb.WriteString(strconv.Itoa(t.addr))
	}
	return sb.String()
}

type fstUnfinished struct {
	node    fstNode
	hasLast bool
	lastInp byte
	lastOut uint64
}

// fstBuilder builds an FST map from keys added in strictly increasing byte order. Equal
// nodes are written once (every compiled node is remembered), so the result is minimal.
type fstBuilder struct {
	out      []byte
	stack    []*fstUnfinished
	registry map[string]int
	lastKey  []byte
	hasLast  bool
	lastAddr int
	n        uint64
}

func newFSTBuilder() *fstBuilder {
	b := &fstBuilder{registry: map[string]int{}, lastAddr: fstNoneAddr}
	b.out = binary.LittleEndian.AppendUint64(b.out, fstVersion)
	b.out = binary.LittleEndian.AppendUint64(b.out, 0)
	b.stack = []*fstUnfinished{{}}
	return b
}

// insert adds key with value val; keys must come in strictly increasing order.
func (b *fstBuilder) insert(key []byte, val uint64) error {
	if b.hasLast && bytes.Compare(key, b.lastKey) <= 0 {
		return fmt.Errorf("lance: fst: key %q after %q", key, b.lastKey)
	}
	b.lastKey, b.hasLast = append(b.lastKey[:0], key...), true
	b.n++
	if len(key) == 0 {
		b.stack[0].node.final, b.stack[0].node.finalOut = true, val
		return nil
	}
	// Walk the common prefix, keeping on each shared transition the smallest output and
	// pushing the rest of its old output down into the next node.
	i := 0
	for ; i < len(key) && i < len(b.stack); i++ {
		u := b.stack[i]
		if !u.hasLast || u.lastInp != key[i] {
			break
		}
		common := min(u.lastOut, val)
		rest := u.lastOut - common
		u.lastOut = common
		val -= common
		if rest > 0 && i+1 < len(b.stack) {
			next := b.stack[i+1]
			if next.node.final {
				next.node.finalOut += rest
			}
			for k := range next.node.trans {
				next.node.trans[k].out += rest
			}
			if next.hasLast {
				next.lastOut += rest
			}
		}
	}
	b.compileFrom(i)
	// The suffix: the first new transition carries what is left of the value.
	top := b.stack[len(b.stack)-1]
	top.hasLast, top.lastInp, top.lastOut = true, key[i], val
	for _, c := range key[i+1:] {
		b.stack = append(b.stack, &fstUnfinished{hasLast: true, lastInp: c})
	}
	b.stack = append(b.stack, &fstUnfinished{node: fstNode{final: true}})
	return nil
}

// compileFrom compiles every unfinished node deeper than depth, freezing each one's pending
// transition in its parent.
func (b *fstBuilder) compileFrom(depth int) {
	addr := fstNoneAddr
	for depth+1 < len(b.stack) {
		u := b.stack[len(b.stack)-1]
		b.stack = b.stack[:len(b.stack)-1]
		if addr != fstNoneAddr {
			u.node.trans = append(u.node.trans, fstTrans{inp: u.lastInp, out: u.lastOut, addr: addr})
			u.hasLast = false
		}
		addr = b.compile(&u.node)
	}
	if top := b.stack[len(b.stack)-1]; top.hasLast && addr != fstNoneAddr {
		top.node.trans = append(top.node.trans, fstTrans{inp: top.lastInp, out: top.lastOut, addr: addr})
		top.hasLast = false
	}
}

// finish compiles the root and returns the FST's bytes.
func (b *fstBuilder) finish() []byte {
	b.compileFrom(0)
	root := b.compile(&b.stack[0].node)
	b.out = binary.LittleEndian.AppendUint64(b.out, b.n)
	b.out = binary.LittleEndian.AppendUint64(b.out, uint64(root))
	return binary.LittleEndian.AppendUint32(b.out, fstMaskedChecksum(b.out))
}

func (b *fstBuilder) compile(n *fstNode) int {
	if n.final && len(n.trans) == 0 && n.finalOut == 0 {
		return fstEmptyAddr
	}
	k := n.key()
	if a, ok := b.registry[k]; ok {
		return a
	}
	start := len(b.out)
	switch {
	case len(n.trans) != 1 || n.final:
		b.out = fstAnyTrans(b.out, start, n)
	case n.trans[0].addr == b.lastAddr && n.trans[0].out == 0:
		t := n.trans[0]
		state := byte(0b11_000000)
		if c := fstCommonIndex[t.inp]; c != 0 {
			state |= c
		} else {
			b.out = append(b.out, t.inp)
		}
		b.out = append(b.out, state)
	default:
		t := n.trans[0]
		var osize, tsize int
		if t.out != 0 {
			osize = fstPackSize(t.out)
			b.out = fstPack(b.out, t.out, osize)
		}
		d := fstDelta(start, t.addr)
		tsize = fstPackSize(d)
		b.out = fstPack(b.out, d, tsize)
		b.out = append(b.out, byte(tsize<<4|osize))
		state := byte(0b10_000000)
		if c := fstCommonIndex[t.inp]; c != 0 {
			state |= c
		} else {
			b.out = append(b.out, t.inp)
		}
		b.out = append(b.out, state)
	}
	b.lastAddr = len(b.out) - 1
	b.registry[k] = b.lastAddr
	return b.lastAddr
}

func fstAnyTrans(out []byte, start int, n *fstNode) []byte {
	tsize, osize := 0, fstPackSize(n.finalOut)
	anyOuts := n.finalOut != 0
	for _, t := range n.trans {
		tsize = max(tsize, fstPackSize(fstDelta(start, t.addr)))
		osize = max(osize, fstPackSize(t.out))
		anyOuts = anyOuts || t.out != 0
	}
	if !anyOuts {
		osize = 0
	}
	if anyOuts {
		if n.final {
			out = fstPack(out, n.finalOut, osize)
		}
		for i := len(n.trans) - 1; i >= 0; i-- {
			out = fstPack(out, n.trans[i].out, osize)
		}
	}
	for i := len(n.trans) - 1; i >= 0; i-- {
		out = fstPack(out, fstDelta(start, n.trans[i].addr), tsize)
	}
	for i := len(n.trans) - 1; i >= 0; i-- {
		out = append(out, n.trans[i].inp)
	}
	if len(n.trans) > fstTransIndexAbove {
		var index [256]byte
		for i := range index {
			index[i] = 255
		}
		for i, t := range n.trans {
			index[t.inp] = byte(i)
		}
		out = append(out, index[:]...)
	}
	out = append(out, byte(tsize<<4|osize))
	state := byte(0)
	if n.final {
		state |= 0b01_000000
	}
	if len(n.trans) <= 0x3f && len(n.trans) > 0 {
		state |= byte(len(n.trans))
	} else if len(n.trans) == 256 {
		out = append(out, 1) // 1 is never written as a count: it stands for 256
	} else {
		out = append(out, byte(len(n.trans)))
	}
	return append(out, state)
}

func fstDelta(nodeStart, addr int) uint64 {
	if addr == fstEmptyAddr {
		return 0
	}
	return uint64(nodeStart - addr)
}

// fstPackSize is the number of bytes (1 to 8) that hold v.
func fstPackSize(v uint64) int {
	n := 1
	for v >>= 8; v > 0; v >>= 8 {
		n++
	}
	return n
}

func fstPack(b []byte, v uint64, n int) []byte {
	for i := 0; i < n; i++ {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// buildFST encodes the map (keys need not be sorted) as an FST.
func buildFST(m map[string]uint64) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := newFSTBuilder()
	for _, k := range keys {
		if err := b.insert([]byte(k), m[k]); err != nil {
			panic(err) // sorted distinct keys cannot fail
		}
	}
	return b.finish()
}

// readFST decodes every (key, value) of an FST map, in key order. It checks every offset it
// reads against the data, the checksum, and the key count, and refuses maps of more than
// maxKeys keys, so hostile bytes fail with a *FormatError rather than a panic or a long walk.
func readFST(data []byte, maxKeys uint64) ([]string, []uint64, error) {
	bad := func(format string, args ...any) error {
		return &FormatError{File: "fst", Offset: -1, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) < 36 {
		return nil, nil, bad("%d bytes", len(data))
	}
	if v := binary.LittleEndian.Uint64(data); v != fstVersion {
		return nil, nil, bad("format version %d, want %d", v, fstVersion)
	}
	end := len(data) - 4
	if sum := binary.LittleEndian.Uint32(data[end:]); sum != fstMaskedChecksum(data[:end]) {
		return nil, nil, bad("checksum mismatch")
	}
	n := binary.LittleEndian.Uint64(data[end-16:])
	root := binary.LittleEndian.Uint64(data[end-8:])
	nodes := data[:end-16]
	if root != fstEmptyAddr && (root < 16 || root >= uint64(len(nodes))) {
		return nil, nil, bad("root address %d outside the nodes", root)
	}
	if n > maxKeys {
		return nil, nil, bad("%d keys, more than %d", n, maxKeys)
	}
	var keys []string
	var vals []uint64
	// A real map visits each prefix of its keys once; a hostile one may share nodes so that
	// paths multiply, so the visits are bounded too.
	visits, maxVisits := uint64(0), (n+1)*(FTSMaxTokenBytes+256)
	var walk func(addr int, prefix []byte, acc uint64, depth int) error
	walk = func(addr int, prefix []byte, acc uint64, depth int) error {
		if depth > len(nodes) {
			return bad("path longer than the data")
		}
		if visits++; visits > maxVisits {
			return bad("more than %d nodes on the paths of %d keys", maxVisits, n)
		}
		nd, err := fstDecodeNode(nodes, addr)
		if err != nil {
			return err
		}
		if nd.final {
			if uint64(len(keys)) >= n {
				return bad("more keys than the %d recorded", n)
			}
			keys = append(keys, string(prefix))
			vals = append(vals, acc+nd.finalOut)
		}
		for _, t := range nd.trans {
			if t.addr != fstEmptyAddr && t.addr >= addr {
				return bad("node %d points forward to %d", addr, t.addr)
			}
			if err := walk(t.addr, append(prefix, t.inp), acc+t.out, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(int(root), nil, 0, 0); err != nil {
		return nil, nil, err
	}
	if uint64(len(keys)) != n {
		return nil, nil, bad("%d keys, the footer records %d", len(keys), n)
	}
	return keys, vals, nil
}

// fstDecodeNode reads the node whose state byte is at addr.
func fstDecodeNode(d []byte, addr int) (fstNode, error) {
	if addr == fstEmptyAddr {
		return fstNode{final: true}, nil
	}
	bad := func(what string) (fstNode, error) {
		return fstNode{}, &FormatError{File: "fst", Offset: int64(addr), Reason: what + " outside the data"}
	}
	at := func(i int) (byte, bool) {
		if i < 16 || i > addr {
			return 0, false
		}
		return d[i], true
	}
	uint := func(i, size int) (uint64, bool) {
		if size == 0 {
			return 0, true
		}
		if size > 8 || i < 16 || i+size > addr {
			return 0, false
		}
		var v uint64
		for k := 0; k < size; k++ {
			v |= uint64(d[i+k]) << (8 * k)
		}
		return v, true
	}
	target := func(start int, delta uint64) int {
		if delta == 0 {
			return fstEmptyAddr
		}
		return start - int(delta)
	}
	if addr < 16 || addr >= len(d) {
		return bad("state")
	}
	state := d[addr]
	switch state >> 6 {
	case 0b11, 0b10:
		pos := addr - 1 // next byte back
		inp := byte(0)
		if c := state & 0x3f; c != 0 {
			inp = fstCommonInputs[c-1]
		} else {
			b, ok := at(pos)
			if !ok {
				return bad("input")
			}
			inp, pos = b, pos-1
		}
		if state>>6 == 0b11 {
			return fstNode{trans: []fstTrans{{inp: inp, addr: pos}}}, nil
		}
		sizes, ok := at(pos)
		if !ok {
			return bad("pack sizes")
		}
		tsize, osize := int(sizes>>4), int(sizes&0x0f)
		pos -= tsize
		delta, ok := uint(pos, tsize)
		if !ok {
			return bad("transition")
		}
		pos -= osize
		out, ok := uint(pos, osize)
		if !ok {
			return bad("output")
		}
		return fstNode{trans: []fstTrans{{inp: inp, out: out, addr: target(pos, delta)}}}, nil
	}
	final := state&0b01_000000 != 0
	pos := addr - 1
	ntrans := int(state & 0x3f)
	if ntrans == 0 {
		b, ok := at(pos)
		if !ok {
			return bad("transition count")
		}
		ntrans, pos = int(b), pos-1
		if ntrans == 1 {
			ntrans = 256
		}
	}
	sizes, ok := at(pos)
	if !ok {
		return bad("pack sizes")
	}
	tsize, osize := int(sizes>>4), int(sizes&0x0f)
	if tsize > 8 || osize > 8 {
		return bad("pack sizes")
	}
	index := 0
	if ntrans > fstTransIndexAbove {
		index = 256
	}
	inputs := pos - index - ntrans // first input byte (inputs are stored last to first)
	addrs := inputs - ntrans*tsize
	outs := addrs - ntrans*osize
	finalOsize := 0
	if final {
		finalOsize = osize
	}
	start := outs - finalOsize
	if start < 16 {
		return bad("transitions")
	}
	nd := fstNode{final: final}
	if final && osize > 0 {
		nd.finalOut, _ = uint(start, osize)
	}
	nd.trans = make([]fstTrans, ntrans)
	for i := 0; i < ntrans; i++ {
		j := ntrans - 1 - i // stored in reverse
		t := &nd.trans[i]
		t.inp = d[inputs+j]
		delta, _ := uint(addrs+j*tsize, tsize)
		t.addr = target(start, delta)
		if osize > 0 {
			t.out, _ = uint(outs+j*osize, osize)
		}
		if i > 0 && t.inp <= nd.trans[i-1].inp {
			return fstNode{}, &FormatError{File: "fst", Offset: int64(addr), Reason: "inputs out of order"}
		}
	}
	return nd, nil
}
