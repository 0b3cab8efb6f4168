package publisher

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/lance/schema"
)

// schemaWithStamp returns the manifest schema with the stamp replaced ("" removes it).
func schemaWithStamp(as *arrow.Schema, stamp string) (*schema.Schema, error) {
	s, err := schema.FromArrow(as)
	if err != nil {
		return nil, err
	}
	if stamp == "" {
		delete(s.Metadata, StampKey)
	} else {
		s.Metadata[StampKey] = []byte(stamp)
	}
	return s, nil
}
