package recordbatch

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// TopicID is a Kafka topic ID (a Uuid on the wire), printed as Kafka prints
// a Uuid: URL-safe base64 without padding, 22 characters. The zero ID means
// "no ID" in Kafka's requests and responses.
type TopicID [16]byte

func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseTopicID reads the form String writes.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("recordbatch: topic id %q is not 16 bytes of URL-safe base64", s)
	}
	copy(id[:], b)
	return id, nil
}

// NewTopicID returns a random topic ID (never the zero ID).
func NewTopicID() TopicID {
	var id TopicID
	for id == (TopicID{}) {
		rand.Read(id[:])
	}
	return id
}
