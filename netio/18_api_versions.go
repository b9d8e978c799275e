package netio

// ApiVersions, versions 0-4. Advertises the dispatch table. A request at
// a version above 4 gets a v0 response with UNSUPPORTED_VERSION and the
// table, so the client can retry at a version both sides know (KIP-511).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveAPIVersions(_ context.Context, _ *conn, h RequestHeader, req kmsg.Request) (any, error) {
	resp := req.(*kmsg.ApiVersionsRequest).ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = advertisedKeys()
	return resp, nil
}

func unsupportedAPIVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = advertisedKeys()
	return resp
}
