package netio

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCheckAPIVersionsRequest pins the KIP-511 client software rules and
// the KIP-1242 cluster and node checks (the differential test compares
// them with Kafka 4.4).
func TestCheckAPIVersionsRequest(t *testing.T) {
	cluster := ClusterInfo{ClusterID: "c1", NodeID: 3}
	other := "c2"
	for _, c := range []struct {
		name      string
		version   int16
		software  [2]string
		clusterID *string
		node      int32
		want      *kerr.Error
	}{
		{name: "v0 ignores names", version: 0},
		{name: "v3 valid", version: 3, software: [2]string{"apache-kafka-java", "4.4.0"}},
		{name: "v3 empty name", version: 3, software: [2]string{"", "1"}, want: kerr.InvalidRequest},
		{name: "v3 empty version", version: 3, software: [2]string{"a", ""}, want: kerr.InvalidRequest},
		{name: "v3 space", version: 3, software: [2]string{"a b", "1"}, want: kerr.InvalidRequest},
		{name: "v3 trailing dash", version: 3, software: [2]string{"a-", "1"}, want: kerr.InvalidRequest},
		{name: "v3 leading dot", version: 3, software: [2]string{"a", ".1"}, want: kerr.InvalidRequest},
		{name: "v3 one character", version: 3, software: [2]string{"a", "1"}},
		{name: "v5 neither", version: 5, software: [2]string{"a", "1"}, node: -1},
		{name: "v5 this node", version: 5, software: [2]string{"a", "1"}, clusterID: &cluster.ClusterID, node: 3},
		{name: "v5 other cluster", version: 5, software: [2]string{"a", "1"}, clusterID: &other, node: 3, want: kerr.RebootstrapRequired},
		{name: "v5 other node", version: 5, software: [2]string{"a", "1"}, clusterID: &cluster.ClusterID, node: 4, want: kerr.RebootstrapRequired},
		{name: "v5 cluster only", version: 5, software: [2]string{"a", "1"}, clusterID: &cluster.ClusterID, node: -1, want: kerr.InvalidRequest},
		{name: "v5 node only", version: 5, software: [2]string{"a", "1"}, node: 3, want: kerr.InvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version, req.ClusterID, req.NodeID = c.version, c.clusterID, c.node
			req.ClientSoftwareName, req.ClientSoftwareVersion = c.software[0], c.software[1]
			err := checkAPIVersionsRequest(func() ClusterInfo { return cluster }, req)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("got %v, want %v", err, c.want)
			}
		})
	}
}
