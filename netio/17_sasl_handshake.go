package netio

// SaslHandshake, versions 0-1, outside authentication: on a listener
// without SASL, or again after a SASL listener authenticated the
// connection, Kafka's KafkaApis answers ILLEGAL_SASL_STATE. The handshake
// itself is served before authentication (sasl.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveSASLHandshake(_ context.Context, _ *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	resp := kreq.(*kmsg.SASLHandshakeRequest).ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return resp, nil
}
