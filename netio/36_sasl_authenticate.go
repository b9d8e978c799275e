package netio

// SaslAuthenticate, versions 0-2, outside authentication: ILLEGAL_SASL_STATE
// with Kafka's message, as KafkaApis answers it on a listener without SASL
// or after the connection authenticated (re-authentication, KIP-368, is
// not served). The exchange itself is served before authentication
// (sasl.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveSASLAuthenticate(_ context.Context, _ *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	resp := kreq.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	message := "SaslAuthenticate request received after successful authentication"
	resp.ErrorMessage = &message
	return resp, nil
}
