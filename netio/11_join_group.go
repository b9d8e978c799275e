package netio

// JoinGroup, versions 0-9 (Kafka 4.4 still advertises v0-1). The group
// coordinator (Backend.Groups) answers it whole; the answer may wait for
// the rest of the group, up to the rebalance timeout, and holds this
// connection meanwhile, as a Kafka broker's does. The member's client
// host is the peer address as Kafka prints it ("/127.0.0.1"). No answer
// (the coordinator closed) is COORDINATOR_NOT_AVAILABLE, generation -1.
// A denial or a failure answers no member ID, as Kafka's
// JoinGroupRequest.getErrorResponse (memberId UNKNOWN_MEMBER_ID, "").

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveJoinGroup(ctx context.Context, c *conn, h RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	client := GroupClient{ID: h.ClientID, Host: "/" + peerHost(c.nc.RemoteAddr())}
	resp, err := unlessDenied(c.authorize(opRead, resourceGroup, req.Group), kerr.GroupAuthorizationFailed, func() (*kmsg.JoinGroupResponse, error) {
		return c.server.backend.Groups().JoinGroup(ctx, client, req)
	})
	if err != nil {
		resp = req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = coordinatorErrorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
		resp.Generation = -1
	}
	return resp, nil
}

// peerHost is the host part of a peer address (the whole address when it
// has no port).
func peerHost(addr net.Addr) string {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}
