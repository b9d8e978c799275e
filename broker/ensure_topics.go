package broker

import (
	"context"
	"fmt"
	"slices"

	"github.com/mirrord/mirrord/logstore"
	rb "github.com/mirrord/mirrord/recordbatch"
	kerr "github.com/twmb/franz-go/pkg/kerr"
)

// EnsuredTopic is one topic of EnsureTopics: asked for, a name, the
// source's topic ID and partition count; answered, the topic's
// partitions (Local) or why it could not be made (Err).
type EnsuredTopic struct {
	Name       string
	ID         rb.TopicID
	Partitions int32

	Local []*Partition
	Err   error
}

// EnsureTopics is EnsureTopic for many topics at once, answering each in
// the order of topics: the new partitions of all of them are made by one
// logstore CreateMany, so their syncs overlap and the data directory is
// synced once, not once a topic (a mirror meeting 1,000 new topics of one
// partition made them one after another, three syncs each). When that
// fails, each topic is made alone, so that the failure is the one topic's
// that caused it, as it is for EnsureTopic.
func (n *Node) EnsureTopics(_ context.Context, topics []EnsuredTopic) []EnsuredTopic {
	n.mu.Lock()
	defer n.mu.Unlock()
	answered := slices.Clone(topics)
	ts := make([]*topic, len(answered))
	seen := make(map[string]bool, len(answered))
	for i := range answered {
		e := &answered[i]
		if seen[e.Name] {
			e.Err = fmt.Errorf("broker: topic %s named twice", e.Name)
			continue
		}
		seen[e.Name] = true
		ts[i], e.Err = n.ensureTopicLocked(e.Name, e.ID, e.Partitions)
	}
	var news []logstore.NewPartition
	for i, t := range ts {
		if t != nil {
			news = append(news, newPartitions(t, answered[i].Partitions)...)
		}
	}
	if len(news) > 0 {
		logs, err := n.dir.CreateMany(news)
		if err == nil {
			n.addLogs(news, logs)
		} else {
			for i, t := range ts {
				if t != nil && int32(len(t.partitions)) < answered[i].Partitions {
					answered[i].Err = n.addPartitions(t, answered[i].Partitions, t.settings.log)
				}
			}
		}
	}
	for i, t := range ts {
		if t != nil && answered[i].Err == nil {
			answered[i].Local = slices.Clone(t.partitions)
		}
	}
	return answered
}

// ensureTopicLocked checks name and id against the node's topics and
// registers the topic when it is new (n.mu held). It returns the topic,
// or nil and why it is refused.
func (n *Node) ensureTopicLocked(name string, id rb.TopicID, partitions int32) (*topic, error) {
	if slices.Contains(n.cfg.InternalTopics, name) {
		return nil, errInternalTopic(name)
	}
	t, ok := n.topics[name]
	if !ok {
		if err := validTopicName(name); err != nil {
			return nil, err
		}
		if other, taken := n.byID[id]; taken {
			return nil, fmt.Errorf("%w: the source's topic ID of %s is the local topic %s's", kerr.TopicAlreadyExists, name, other.name)
		}
		t = &topic{name: name, id: id, settings: n.nodeSettings()}
		n.topics[name], n.byID[id] = t, t
		n.log.Info("created topic with a given ID", "topic", name, "id", id.String(), "partitions", partitions)
	}
	if t.id == (rb.TopicID{}) && len(online(t.partitions)) == 0 && n.byID[id] == nil {
		// No partition.metadata of it could be read (all offline): the
		// mirror names the ID, and RebuildPartition writes it.
		t.id, n.byID[id] = id, t
	}
	if t.id != id {
		return nil, fmt.Errorf("%w: local topic %s has topic ID %s, the source's has %s", kerr.TopicAlreadyExists, name, t.id, id)
	}
	return t, nil
}

// newPartitions lists the partitions of t up to count that it lacks.
func newPartitions(t *topic, count int32) []logstore.NewPartition {
	var news []logstore.NewPartition
	for i := int32(len(t.partitions)); i < count; i++ {
		news = append(news, logstore.NewPartition{
			PartitionInfo: logstore.PartitionInfo{TopicPartition: logstore.TopicPartition{Topic: t.name, Partition: i}, TopicID: t.id},
			Config:        t.settings.log,
		})
	}
	return news
}

// addLogs adds the logs CreateMany made for news to their topics, whose
// partitions they extend in order (n.mu held).
func (n *Node) addLogs(news []logstore.NewPartition, logs []*logstore.Log) {
	for i, log := range logs {
		t := n.topics[news[i].Topic]
		if want := int32(len(t.partitions)); news[i].Partition != want {
			panic(fmt.Sprintf("broker: %s made out of order: the topic has %d partitions", news[i].TopicPartition, want))
		}
		t.partitions = append(t.partitions, newPartition(n, news[i].TopicPartition, log, t.settings.limits))
	}
}
