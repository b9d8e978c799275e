package netio

import (
	"errors"
	"fmt"
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

// Error is a Kafka error code with the message a client is told (the
// ErrorMessage fields of Produce v8+, CreateTopics, DeleteTopics,
// CreatePartitions, ...): errors.As finds Code, Error is Message alone.
type Error struct {
	Code    *kerr.Error
	Message string
}

// Errorf returns an Error of code with a formatted message.
func Errorf(code *kerr.Error, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Code }
