// Package framing turns one bounded graph batch — NDJSON in the strict envelope of the
// reference engine (docs/omnigraph-format.md §1) — into logical node and edge
// records. It reads no storage and knows no schema.
//
// One envelope per line, lines split on "\n", a "\r" before the "\n" dropped (CRLF):
//
//	{"type":"<Node>","data":{…}}
//	{"edge":"<Edge>","from":"<id>","to":"<id>","data":{…}}
//
// "data" may be omitted ({}); data.id, when given, must be a string. Blank lines (only
// spaces, tabs, CR or form feeds) are skipped but counted: line numbers are 1-based physical
// lines. The batch is refused as a whole on the first violation, in the reference's order:
//
//  1. batch over MaxBytes → *errs.ResourceLimitExceeded "graph_batch_request_bytes"
//  2. per line: over MaxLineBytes → "graph_batch_line_bytes"; over MaxLines (optional) →
//     *errs.InvalidInput; over MaxStructuralSlots → "graph_batch_json_structural_slots"
//     (line-bound resource errors come wrapped in *errs.LineError)
//  3. not strict JSON (syntax, a second value, invalid UTF-8, unpaired surrogate escape,
//     number overflowing float64, nesting over MaxDepth, a duplicate member at any depth)
//  4. not an object; not exactly one of "type"/"edge"; a reserved or unknown top-level
//     field (smallest name first); "type"/"edge"/"from"/"to" missing or not a string;
//     "data" not an object
//  5. "src"/"dst" in edge data (reserved structural state); a reserved physical field in
//     data (_tombstone, _rowid, _rowaddr, _rowoffset, _row_created_at_version,
//     _row_last_updated_at_version); data.id not a string
//
// Every refusal from step 3 on is an *errs.InvalidInput naming the line, the field and the
// reason, with the reference's message fragment in the reason. Schema checks (unknown
// types and fields, value types, canonical @key ids, endpoints) are the engine's.
package framing

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"runtime"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/parallel"
)

// Parse reads one batch from r (never more than lim.MaxBytes+1 bytes) and parses it with
// ParseBytes' rules. When the batch is too large, Actual is the number of bytes read,
// MaxBytes+1: a lower bound of the real size. A read error is returned wrapped, untyped.
func Parse(r io.Reader, lim Limits) ([]Record, error) {
	lim = lim.normalized()
	body, err := readBounded(r, lim.MaxBytes)
	if err != nil {
		return nil, err
	}
	return parseBody(body, lim, nil)
}

// ParseBytes parses one batch held in memory. body is not modified or retained: records'
// Data values point into one copy of it (a line with insignificant whitespace compacted over
// its own bytes); their Type, From, To and ID strings are not views of it (see Record).
func ParseBytes(body []byte, lim Limits) ([]Record, error) {
	lim = lim.normalized()
	if int64(len(body)) > lim.MaxBytes {
		return nil, &errs.ResourceLimitExceeded{Resource: ResourceRequestBytes, Limit: uint64(lim.MaxBytes), Actual: uint64(len(body))}
	}
	return parseBody(body, lim, nil)
}

// ParseRetained is ParseBytes for a body the caller keeps, unchanged, as long as the records
// live (a consumed message's body, kept for its ack, its receipt hash and any dead letter):
// records' Data values point into body itself rather than into a copy, except those of lines
// with insignificant whitespace inside values' structure, which are compacted into copies of
// their own. body is never written to.
func ParseRetained(body []byte, lim Limits) ([]Record, error) {
	return parseRetained(body, lim, nil)
}

func parseRetained(body []byte, lim Limits, fr *Frame) ([]Record, error) {
	lim = lim.normalized()
	lim.retain = true
	if int64(len(body)) > lim.MaxBytes {
		return nil, &errs.ResourceLimitExceeded{Resource: ResourceRequestBytes, Limit: uint64(lim.MaxBytes), Actual: uint64(len(body))}
	}
	return parseBody(body, lim, fr)
}

func readBounded(r io.Reader, max int64) ([]byte, error) {
	bound := max
	if bound < math.MaxInt64 {
		bound++ // one byte more than allowed tells "at the limit" from "over it"
	}
	size := int64(4096)
	if l, ok := r.(interface{ Len() int }); ok {
		size = int64(l.Len()) + 1
	}
	buf := make([]byte, 0, min(size, bound))
	lr := &io.LimitedReader{R: r, N: bound}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("framing: read batch: %w", err)
		}
	}
	if int64(len(buf)) > max {
		return nil, &errs.ResourceLimitExceeded{Resource: ResourceRequestBytes, Limit: uint64(max), Actual: uint64(len(buf))}
	}
	return buf, nil
}

// parallelMinBytes is the size from which a batch is parsed in line-aligned parts at once; a
// smaller one costs more to split than it gains.
const parallelMinBytes = 64 << 10

// maxParts bounds how many parts one batch is parsed in.
const maxParts = 8

// parseBody parses the batch, in up to GOMAXPROCS line-aligned parts at once when it is large.
// Lines carry no state from one to the next, so each part is parsed alone, numbering its lines
// from where it starts, and the first refusal of the first part that has one is the first
// refusal of the batch: the result is exactly the sequential one.
//
// fr, when not nil, takes the memory the records use from the pools Release gives it back to,
// and keeps it.
func parseBody(body []byte, lim Limits, fr *Frame) ([]Record, error) {
	parts := min(runtime.GOMAXPROCS(0), maxParts, len(body)/(parallelMinBytes/2))
	if len(body) < parallelMinBytes {
		parts = 1
	}
	return parseParts(body, lim, parts, fr)
}

// parseParts parses body in up to parts line-aligned parts at once. The parts fill disjoint
// ranges of one records slice, so joining them copies nothing unless blank lines left gaps.
func parseParts(body []byte, lim Limits, parts int, fr *Frame) ([]Record, error) {
	if parts < 2 {
		lines := bytes.Count(body, newline) // a final newline ends the last line, starting none
		if len(body) > 0 && body[len(body)-1] != '\n' {
			lines++
		}
		return parseLines(body, 1, lines, lim, fr)
	}
	type part struct {
		body  []byte
		first int // line number of its first line
		off   int // where its records go
		recs  []Record
		slabs [][]Member // with fr: the member slabs it took
	}
	ps := make([]*part, 0, parts)
	line, total := 1, 0
	for start := 0; start < len(body); {
		end := len(body)
		if len(ps) < parts-1 {
			cut := start + (len(body)-start)/(parts-len(ps))
			if i := bytes.IndexByte(body[cut:], '\n'); i >= 0 {
				end = cut + i + 1
			}
		}
		n := bytes.Count(body[start:end], newline)
		lines := n // its lines exactly: each ends with '\n' but maybe the batch's last
		if body[end-1] != '\n' {
			lines++
		}
		ps = append(ps, &part{body: body[start:end], first: line, off: total})
		total += recordCap(line, lines, end-start, lim)
		line += n
		start = end
	}
	all := fr.records(total)[:total]
	for k, p := range ps {
		end := total
		if k+1 < len(ps) {
			end = ps[k+1].off
		}
		p.recs = all[p.off:p.off:end]
	}
	err := parallel.Each(ps, len(ps), func(p *part) error {
		var err error
		p.recs, err = frameLines(p.body, p.first, p.recs, lim, true, fr.slabList(&p.slabs))
		return err
	})
	for _, p := range ps {
		fr.keep(p.slabs)
	}
	if err != nil {
		return nil, err
	}
	n := 0
	for _, p := range ps {
		if p.off != n {
			copy(all[n:], p.recs)
		}
		n += len(p.recs)
	}
	if n == 0 {
		return nil, nil
	}
	clear(all[n:]) // what moved down is not kept twice
	return all[:n:n], nil
}

// recordCap is how many records lines lines from line first, size bytes in all, can give at
// most, plus the slot a line is framed into before it is known to be one. Not every line is a
// record: blank lines are not, and a record needs minRecordLine bytes with its delimiter, so
// a body of 32 MiB of newlines sizes no array of 32 million records (3 GiB).
func recordCap(first, lines, size int, lim Limits) int {
	if lim.MaxLines > 0 {
		lines = max(0, min(lines, lim.MaxLines-first+1))
	}
	return min(lines, (size+1)/minRecordLine+1)
}

// minRecordLine is the shortest record line with its delimiter: {"type":""} and "\n" (the
// last line has no delimiter, hence the +1 above).
const minRecordLine = len(`{"type":""}`) + 1

var newline = []byte{'\n'}

// parseLines parses consecutive lines of a batch, the first of which is line number first;
// there are at most lines of them.
func parseLines(body []byte, first, lines int, lim Limits, fr *Frame) ([]Record, error) {
	n := recordCap(first, lines, len(body), lim)
	var slabs [][]Member
	recs, err := frameLines(body, first, fr.records(n)[:0:n], lim, true, fr.slabList(&slabs))
	fr.keep(slabs)
	return recs, err
}

// frameLines is parseLines, with the fast path or the general scanner alone (for tests
// comparing them), appending to records (zero, and with room for every line's record). The
// fast path's member slabs come from the pool and are appended to *slabs when slabs is not
// nil.
func frameLines(body []byte, first int, records []Record, lim Limits, fast bool, slabs *[][]Member) ([]Record, error) {
	// One copy of the part that records point into: a line the fast path takes is used in
	// place, one the general scanner takes is compacted over its own bytes (its compact copy
	// never outgrows it), so the arena never reallocates.
	arena := body
	if !lim.retain {
		arena = make([]byte, len(body))
		copy(arena, body)
	}
	f := getFastScanner(lim.MaxDepth)
	f.slabs = slabs
	defer putFastScanner(f)
	var s *scanner // the general scanner, for lines the fast path leaves to it
	// One record per line at most: sized once, the slice never grows (records are large).
	lines := cap(records)
	line := first - 1
	for off := 0; off < len(body); {
		start := off
		line++
		// The fast path finds the end of the line itself (no IndexByte pass over it), and
		// applies the line's limits after it, which decides as the order below does: a line
		// it takes has nothing else to refuse.
		if fast && body[off] == '{' && (lim.MaxLines == 0 || line <= lim.MaxLines) {
			// The slot is zero (records never outgrow their capacity): extending the slice
			// rather than appending a zero Record saves a bulk write barrier per line.
			records = records[:len(records)+1]
			rec := &records[len(records)-1]
			f.left = lines - (line - first)
			if end, ok := f.record(arena[start:], line, rec); ok {
				end += start
				next := end
				switch {
				case end == len(body):
				case body[end] == '\n':
					next = end + 1
				case body[end] == '\r' && end+1 < len(body) && body[end+1] == '\n':
					next = end + 2
				}
				if next > end || end == len(body) {
					if n := end - start; n > lim.MaxLineBytes || n >= lim.MaxStructuralSlots {
						if err := lineLimits(body[start:end], line, lim); err != nil {
							return nil, err
						}
					}
					off = next
					continue
				}
			}
			*rec = Record{}
			records = records[:len(records)-1]
		}
		raw := body[off:]
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			raw = raw[:i]
			off += i + 1
			if n := len(raw); n > 0 && raw[n-1] == '\r' {
				raw = raw[:n-1]
			}
		} else {
			off = len(body) // the last line has no delimiter, so no CRLF either
		}
		if err := lineBytes(raw, line, lim); err != nil {
			return nil, err
		}
		if lim.MaxLines > 0 && line > lim.MaxLines {
			return nil, &errs.InvalidInput{Line: line, Reason: fmt.Sprintf("graph batch has more than %d lines", lim.MaxLines)}
		}
		if blank(raw) {
			continue
		}
		if err := slots(raw, line, lim); err != nil {
			return nil, err
		}
		records = records[:len(records)+1]
		rec := &records[len(records)-1]
		if s == nil {
			s = newScanner(lim.MaxDepth, 0)
		}
		if lim.retain {
			s.arena = make([]byte, 0, len(raw)) // the body is not the scanner's to compact over
		} else {
			s.arena = arena[:start]
		}
		var err error
		if *rec, err = s.record(raw, line); err != nil {
			return nil, err
		}
	}
	if len(records) == 0 {
		return nil, nil
	}
	return records, nil
}

// lineLimits applies to a line the fast path took the limits of a line, in their order.
func lineLimits(raw []byte, line int, lim Limits) error {
	if err := lineBytes(raw, line, lim); err != nil {
		return err
	}
	return slots(raw, line, lim)
}

// lineBytes refuses a line over MaxLineBytes.
func lineBytes(raw []byte, line int, lim Limits) error {
	if len(raw) > lim.MaxLineBytes {
		return &errs.LineError{Line: line, Err: &errs.ResourceLimitExceeded{
			Resource: ResourceLineBytes, Limit: uint64(lim.MaxLineBytes), Actual: uint64(len(raw))}}
	}
	return nil
}

// slots refuses a line over MaxStructuralSlots.
func slots(raw []byte, line int, lim Limits) error {
	if actual, over := structuralSlots(raw, lim.MaxStructuralSlots); over {
		return &errs.LineError{Line: line, Err: &errs.ResourceLimitExceeded{
			Resource: ResourceStructuralSlots, Limit: uint64(lim.MaxStructuralSlots), Actual: actual}}
	}
	return nil
}

// blank reports a line of ASCII whitespace only (the reference's u8::is_ascii_whitespace:
// space, \t, \n, \f, \r).
func blank(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\f', '\r':
		default:
			return false
		}
	}
	return true
}

// structuralSlots charges a line one slot plus one per '{' '}' '[' ']' ',' ':' outside
// strings, before any decoding, and reports the count at which it first went over limit
// (limit+1), as the reference does. A line shorter than limit cannot go over.
func structuralSlots(raw []byte, limit int) (uint64, bool) {
	if len(raw) < limit {
		return 0, false
	}
	slots := 1
	inString, escaped := false, false
	for _, c := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '}', '[', ']', ',', ':':
			slots++
			if slots > limit {
				return uint64(slots), true
			}
		}
	}
	return 0, false
}

// record scans one non-blank line and applies the envelope rules.
func (s *scanner) record(raw []byte, line int) (Record, error) {
	if err := s.scanLine(raw, line); err != nil {
		return Record{}, err
	}
	if !s.isObject {
		return Record{}, invalid(line, "", "graph batch row must be one JSON object")
	}
	var typ, edge, from, to, data *member
	for i := range s.top {
		switch m := &s.top[i]; m.name {
		case "type":
			typ = m
		case "edge":
			edge = m
		case "from":
			from = m
		case "to":
			to = m
		case "data":
			data = m
		}
	}
	if (typ == nil) == (edge == nil) {
		return Record{}, invalid(line, "type", "graph batch row must contain exactly one of 'type' or 'edge'")
	}
	rec := Record{Line: line, Kind: NodeRecord}
	if edge != nil {
		rec.Kind = EdgeRecord
	}
	if err := s.checkTopLevel(line, rec.Kind); err != nil {
		return Record{}, err
	}
	var err error
	if rec.Kind == NodeRecord {
		if rec.Type, err = s.requiredString(line, typ, "type", true); err != nil {
			return Record{}, err
		}
	} else {
		if rec.Type, err = s.requiredString(line, edge, "edge", true); err != nil {
			return Record{}, err
		}
		if rec.From, err = s.requiredString(line, from, "from", false); err != nil {
			return Record{}, err
		}
		if rec.To, err = s.requiredString(line, to, "to", false); err != nil {
			return Record{}, err
		}
	}
	if data != nil && s.arena[data.start] != '{' {
		return Record{}, invalid(line, "data", "graph batch field 'data' must be an object, got "+s.shown(data))
	}
	if err := s.fillData(line, &rec); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// checkTopLevel refuses a top-level member the envelope does not allow, reporting the
// smallest such name so the answer does not depend on member order.
func (s *scanner) checkTopLevel(line int, kind RecordKind) error {
	bad, found := "", false
	for _, m := range s.top {
		ok := m.name == "data"
		if kind == NodeRecord {
			ok = ok || m.name == "type"
		} else {
			ok = ok || m.name == "edge" || m.name == "from" || m.name == "to"
		}
		if !ok && (!found || m.name < bad) {
			bad, found = m.name, true
		}
	}
	switch {
	case !found:
		return nil
	case reservedPhysical(bad):
		return invalid(line, bad, "top-level field '"+bad+"' is reserved physical state")
	default:
		return invalid(line, truncate(bad, maxShown), "unknown top-level graph batch field '"+show(bad)+"'")
	}
}

func (s *scanner) requiredString(line int, m *member, field string, intern bool) (string, error) {
	if m == nil {
		return "", invalid(line, field, "graph batch row requires field '"+field+"'")
	}
	v := s.arena[m.start:m.end]
	if v[0] != '"' {
		return "", invalid(line, field, "graph batch field '"+field+"' must be a string, got "+s.shown(m))
	}
	if intern && bytes.IndexByte(v, '\\') < 0 {
		return s.name(v[1 : len(v)-1]), nil
	}
	return stringValue(v), nil
}

// fillData applies the data rules and fills rec.Data and rec.ID.
func (s *scanner) fillData(line int, rec *Record) error {
	var id *member
	reserved, found := "", false
	for i := range s.data {
		m := &s.data[i]
		if rec.Kind == EdgeRecord && (m.name == "src" || m.name == "dst") {
			// The reference checks "src" before "dst".
			name := "src"
			if m.name == "dst" && !s.hasData("src") {
				name = "dst"
			}
			return invalid(line, "data."+name, "edge data field '"+name+"' is reserved structural state")
		}
		if reservedPhysical(m.name) && (!found || m.name < reserved) {
			reserved, found = m.name, true
		}
		if m.name == "id" {
			id = m
		}
	}
	if found {
		return invalid(line, "data."+reserved, "input field '"+reserved+"' is reserved physical state")
	}
	if id != nil {
		v := s.arena[id.start:id.end]
		if v[0] != '"' {
			return invalid(line, "data.id", "field 'id' must be a string, got "+s.shown(id))
		}
		idv := stringValue(v)
		rec.ID = &idv
	}
	n := len(s.data)
	if id != nil {
		n--
	}
	if n == 0 {
		return nil
	}
	// Every record's members are carved out of one slab, so a batch costs a few allocations
	// rather than one per record.
	if cap(s.members)-len(s.members) < n {
		s.members = make([]Member, 0, max(n, memberSlab))
	}
	start := len(s.members)
	for _, m := range s.data {
		if m.name != "id" {
			s.members = append(s.members, Member{Name: m.name, Value: s.arena[m.start:m.end:m.end]})
		}
	}
	rec.Data = s.members[start:len(s.members):len(s.members)]
	return nil
}

// memberSlab is how many members one slab allocation holds.
const memberSlab = 4096

func (s *scanner) hasData(name string) bool {
	for _, m := range s.data {
		if m.name == name {
			return true
		}
	}
	return false
}

// shown renders a member's compact JSON value for a message.
func (s *scanner) shown(m *member) string { return show(string(s.arena[m.start:m.end])) }

func invalid(line int, field, reason string) error {
	return &errs.InvalidInput{Line: line, Field: field, Reason: reason}
}
