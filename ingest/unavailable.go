package ingest

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream's answers that say it cannot do what was asked now, though it may later: the
// codes of nats-server's error catalogue (errors.json).
const (
	codeClusterNotAvailable jetstream.ErrorCode = 10008 // JetStream system temporarily unavailable
	codeClusterNotLeader    jetstream.ErrorCode = 10009 // JetStream cluster can not handle request
	codeNotEnabledAccount   jetstream.ErrorCode = 10039 // JetStream not enabled for account
	codeStorageExceeded     jetstream.ErrorCode = 10047 // insufficient storage resources available
	codeNotEnabled          jetstream.ErrorCode = 10076 // JetStream not enabled
	codeStreamStoreFailed   jetstream.ErrorCode = 10077 // the stream's store failed
)

// unavailable reports whether err is JetStream not answering a request (a timeout, no
// responders, a connection moving to another server) or answering that it cannot serve it
// now (a cluster electing its meta leader, JetStream off while a server restarts, a full
// store an operator can free): what waiting may mend. A context that ended is not: the
// caller's own deadline is its caller's to judge. Anything else JetStream refused (a
// placement it cannot honour, a stream configuration that conflicts with one it has) is
// refused again on every try.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range []error{context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders, nats.ErrDisconnected,
		nats.ErrConnectionReconnecting, jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled,
		jetstream.ErrJetStreamNotEnabledForAccount} {
		if errors.Is(err, e) {
			return true
		}
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case codeClusterNotAvailable, codeClusterNotLeader, codeNotEnabledAccount, codeStorageExceeded, codeNotEnabled, codeStreamStoreFailed:
			return true
		}
	}
	return false
}
