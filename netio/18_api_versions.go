package netio

// ApiVersions, versions 0-5, answered as a Kafka 4.4 broker answers it.
//
// It advertises the dispatch table. A request at a version above 5 gets a
// v0 response with UNSUPPORTED_VERSION and the table, so the client can
// retry at a version both sides know (KIP-511). From v3 the client names
// its software: a name or version that is empty or not of ASCII letters
// and digits, with '.' and '-' only inside, is INVALID_REQUEST with no
// keys (KIP-511). From v5 the client may name the cluster and node it
// means to reach (KIP-1242): both or neither, else INVALID_REQUEST; a
// cluster or node other than this one is REBOOTSTRAP_REQUIRED.
//
// Features (v3+; at v3 a supported feature whose minimum is 0 is left
// out, KAFKA-17011): only those whose semantics this node serves.
//   - metadata.version: mirrord has no metadata log and serves the
//     client-facing APIs of Kafka 4.4 at its latest level, whatever a
//     lower level would hide: supported and finalized at that level only.
//   - transaction.version 2: transactions of KIP-890 part 2 (an epoch bump
//     at every EndTxn v5, partitions added by the first Produce v12+ or
//     TxnOffsetCommit v5+ to them), finalized as on a new Kafka 4.4
//     cluster; the versions below stay served, and the request's version
//     says which applies.
//   - group.version 1: the consumer group protocol (KIP-848,
//     ConsumerGroupHeartbeat), which clients use only when it is finalized.
//   - not reported: kraft.version (no quorum), streams.version and
//     share.version (no streams or share groups),
//     eligible.leader.replicas.version (one replica, no ELR).
// Finalized features never change, so their epoch stays
// finalizedFeaturesEpoch.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// feature is one feature this node reports: the levels it supports and
// the level finalized in its cluster (0: not finalized, left out).
type feature struct {
	name                   string
	minVersion, maxVersion int16
	finalized              int16
}

// metadataVersionKafka44 is Kafka 4.4's latest production metadata.version
// (MetadataVersion.LATEST_PRODUCTION).
const metadataVersionKafka44 = 33

var features = []feature{
	{name: "metadata.version", minVersion: metadataVersionKafka44, maxVersion: metadataVersionKafka44, finalized: metadataVersionKafka44},
	{name: "transaction.version", minVersion: 0, maxVersion: 2, finalized: 2},
	{name: "group.version", minVersion: 0, maxVersion: 1, finalized: 1},
}

const finalizedFeaturesEpoch = 0

func serveAPIVersions(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if err := checkAPIVersionsRequest(c.server.backend.Cluster, req); err != nil {
		resp.ErrorCode = err.(*kerr.Error).Code
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{}
		return resp, nil
	}
	resp.ApiKeys = advertisedKeys()
	if req.Version < 3 {
		return resp, nil
	}
	resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
	for _, f := range features {
		if f.minVersion > 0 || req.Version >= 4 {
			resp.SupportedFeatures = append(resp.SupportedFeatures,
				kmsg.ApiVersionsResponseSupportedFeature{Name: f.name, MinVersion: f.minVersion, MaxVersion: f.maxVersion})
		}
		if f.finalized > 0 {
			resp.FinalizedFeatures = append(resp.FinalizedFeatures,
				kmsg.ApiVersionsResponseFinalizedFeature{Name: f.name, MinVersionLevel: f.finalized, MaxVersionLevel: f.finalized})
		}
	}
	return resp, nil
}

// checkAPIVersionsRequest returns the error code a request gets, or nil;
// it asks for the cluster only when the request names one.
func checkAPIVersionsRequest(clusterInfo func() ClusterInfo, req *kmsg.ApiVersionsRequest) error {
	if req.Version >= 3 && (!validClientSoftware(req.ClientSoftwareName) || !validClientSoftware(req.ClientSoftwareVersion)) {
		return kerr.InvalidRequest
	}
	if req.Version < 5 || req.ClusterID == nil && req.NodeID == -1 {
		return nil
	}
	if req.ClusterID == nil || req.NodeID == -1 {
		return kerr.InvalidRequest
	}
	switch cluster := clusterInfo(); {
	case *req.ClusterID != cluster.ClusterID || req.NodeID != cluster.NodeID:
		return kerr.RebootstrapRequired
	}
	return nil
}

// validClientSoftware reports whether s is a client software name or
// version as KIP-511 allows: ASCII letters and digits, with '.' and '-'
// anywhere but first and last.
func validClientSoftware(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case (b == '.' || b == '-') && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

func unsupportedAPIVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = advertisedKeys()
	return resp
}
