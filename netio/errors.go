package netio

import (
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
)

// errorCode turns a Backend error into a Kafka error code: a kerr error
// keeps its code; anything else is logged and answered with fallback.
func errorCode(log *slog.Logger, err error, fallback *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	var kafkaErr *kerr.Error
	if errors.As(err, &kafkaErr) {
		return kafkaErr.Code
	}
	log.Warn("request failed", "error", err, "answered", fallback.Message)
	return fallback.Code
}
