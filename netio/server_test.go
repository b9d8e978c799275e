package netio

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProduceAndMetadataWithKgo(t *testing.T) {
	addr := startServer(t, newMemBackend())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	created, err := admin.CreateTopic(ctx, 3, 1, nil, "t")
	if err != nil || created.Err != nil {
		t.Fatalf("create topic: %v %v", err, created.Err)
	}
	for i := range 100 {
		r := &kgo.Record{Value: []byte{byte(i)}, Partition: int32(i % 3)}
		if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	topics, err := admin.Metadata(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(topics.Topics["t"].Partitions); got != 3 {
		t.Fatalf("metadata: %d partitions, want 3", got)
	}
}
