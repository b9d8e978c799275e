package netio

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
	"github.com/mirrord/mirrord/auth"
)

// BenchmarkFetchSessionIdle serves incremental fetches of a session of
// 1,000 idle partitions (100 topics of 10) to a principal granted READ by
// a prefixed ACL among 10,000 others, with and without an authorizer: the
// per-request cost of authorizing every partition of the session on every
// fetch (Kafka's KafkaApis authorizes fetchContext.foreachPartition).
// Reported per request; partitions/op for scale.
func BenchmarkFetchSessionIdle(b *testing.B) {
	const (
		topics             = 100
		partitionsPerTopic = 10
		otherACLs          = 10_000
	)
	for _, withAuthorizer := range []bool{false, true} {
		b.Run(fmt.Sprintf("authorizer=%v", withAuthorizer), func(b *testing.B) {
			backend := newMemBackend()
			full := kmsg.NewPtrFetchRequest()
			full.Version, full.MaxBytes, full.MaxWaitMillis, full.SessionEpoch = 13, 1<<20, 0, 0
			for i := range topics {
				name := fmt.Sprintf("bench-%03d", i)
				info, err := backend.CreateTopic(context.Background(), name, partitionsPerTopic, nil, false)
				if err != nil {
					b.Fatal(err)
				}
				rt := kmsg.NewFetchRequestTopic()
				rt.TopicID = info.ID
				for p := range int32(partitionsPerTopic) {
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition = p
					rt.Partitions = append(rt.Partitions, rp)
				}
				full.Topics = append(full.Topics, rt)
			}
			cfg := Config{Backend: backend}
			if withAuthorizer {
				authorizer, err := acl.Open(&acl.MemStore{}, acl.Config{})
				if err != nil {
					b.Fatal(err)
				}
				bindings := []acl.Binding{{ResourceType: resourceTopic, ResourceName: "bench-", PatternType: kmsg.ACLResourcePatternTypePrefixed,
					Principal: "User:bob", Host: "*", Operation: opRead, Permission: kmsg.ACLPermissionTypeAllow}}
				for i := range otherACLs {
					bindings = append(bindings, acl.Binding{ResourceType: resourceTopic, ResourceName: fmt.Sprintf("other-%05d", i), PatternType: kmsg.ACLResourcePatternTypeLiteral,
						Principal: fmt.Sprintf("User:u%d", i%100), Host: "*", Operation: opRead, Permission: kmsg.ACLPermissionTypeAllow})
				}
				if _, err := authorizer.Create(bindings); err != nil {
					b.Fatal(err)
				}
				cfg.Authorizer = authorizer
			}
			s := NewServer(cfg)
			c := &conn{server: s, principal: auth.User("bob"), clientHost: "127.0.0.1", requestKey: 1}
			serve := func(req *kmsg.FetchRequest) *fetchReply {
				resp, err := serveFetch(context.Background(), c, RequestHeader{}, req)
				if err != nil {
					b.Fatal(err)
				}
				return resp.(*fetchReply)
			}
			opened := serve(full)
			if opened.sessionID == 0 || len(opened.partitions) != topics*partitionsPerTopic {
				b.Fatalf("full fetch: session %d, %d partitions", opened.sessionID, len(opened.partitions))
			}
			incremental := kmsg.NewPtrFetchRequest()
			incremental.Version, incremental.MaxBytes, incremental.MaxWaitMillis, incremental.SessionID = 13, 1<<20, 0, opened.sessionID
			epoch := int32(1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				incremental.SessionEpoch = epoch
				epoch++
				f := serve(incremental)
				for i := range f.partitions {
					if !f.partitions[i].omit || f.partitions[i].errorCode != 0 {
						b.Fatalf("partition %d answered (error %d), want it quiet", i, f.partitions[i].errorCode)
					}
				}
			}
			b.ReportMetric(float64(topics*partitionsPerTopic), "partitions/op")
		})
	}
}
