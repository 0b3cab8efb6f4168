// Package benchdata is the schema and the generated batches the benchmarks share (the engine's
// go test benchmarks and `make bench`), so both measure the same graph.
package benchdata

import (
	"fmt"
	"strings"

	"github.com/omnigraph/omnigraph-worker/framing"
)

// Schema is a narrow graph: people keyed by handle, and edges between them.
const Schema = `
node Person {
    handle: String @key
    name: String
    age: I64
    score: F64
}
edge Knows: Person -> Person {
    since: I64?
}
node Event {
    code: String @key
}
`

// GraphBatch is batch k: n new people and n edges among them (a ring), for strict inserts.
func GraphBatch(k, n int) []framing.Record { return parse(string(GraphBody(k, n))) }

// GraphBody is GraphBatch's NDJSON body, as a producer publishes it.
func GraphBody(k, n int) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"type":"Person","data":{"handle":"p%d-%d","name":"name-%d-%d","age":%d,"score":%g}}`+"\n", k, i, k, i, i%90, float64(i)*0.5)
	}
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"edge":"Knows","from":"p%d-%d","to":"p%d-%d","data":{"id":"k%d-%d","since":%d}}`+"\n", k, i, k, (i+1)%n, k, i, i)
	}
	return []byte(b.String())
}

// People is n new Person records keyed m<offset>, m<offset+1>, ….
func People(offset, n int) []framing.Record {
	var b strings.Builder
	for i := offset; i < offset+n; i++ {
		fmt.Fprintf(&b, `{"type":"Person","data":{"handle":"m%d","name":"name-%d","age":%d,"score":%g}}`+"\n", i, i, i%90, float64(i)*0.5)
	}
	return parse(b.String())
}

// parse frames generated lines; they are well formed by construction.
func parse(lines string) []framing.Record {
	recs, err := framing.ParseBytes([]byte(lines), framing.DefaultLimits())
	if err != nil {
		panic(fmt.Sprintf("benchdata: generated batch does not frame: %v", err))
	}
	return recs
}
