package mirrord

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A Kafka error code the client does not know keeps its number, and is
// still a *kerr.Error; a known one wraps kerr's error.
func TestClientKafkaError(t *testing.T) {
	if err := kafkaError(-42, nil); err == nil || err.Error() != "error code -42" || !errors.As(err, new(*kerr.Error)) {
		t.Errorf("unknown code: %v", err)
	}
	message := "no mirror named m"
	if err := kafkaError(kerr.ResourceNotFound.Code, &message); !errors.Is(err, kerr.ResourceNotFound) {
		t.Errorf("RESOURCE_NOT_FOUND: %v", err)
	}
	if err := kafkaError(0, nil); err != nil {
		t.Errorf("no error: %v", err)
	}
}
