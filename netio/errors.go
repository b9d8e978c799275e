package netio

import (
	"errors"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrStorage marks a Backend error as the log directory's: a write the
// disk refused, or one the node refused itself to keep its reserve of free
// space (log.dir.reserve.bytes). Below netio an error says so by wrapping
// ErrStorage or by carrying the disk's own errno (ENOSPC, EDQUOT, EIO,
// EROFS), as logstore's errors do through vfs; each API answers it with
// the code Kafka gives a storage failure there (errorCode,
// coordinatorErrorCode), never UNKNOWN_SERVER_ERROR.
var ErrStorage = errors.New("netio: log directory storage failed")

// storageErrnos are the disk's errors that make a storage failure.
var storageErrnos = []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS}

// isStorageFailure reports whether err is the log directory's (ErrStorage).
func isStorageFailure(err error) bool {
	if errors.Is(err, ErrStorage) {
		return true
	}
	for _, errno := range storageErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// errorCode turns a Backend error into a Kafka error code: a kerr error
// keeps its code; a storage failure is KAFKA_STORAGE_ERROR, as Kafka
// answers a partition whose log cannot be written or read (Produce,
// DeleteRecords, CreateTopics and CreatePartitions making a partition's
// log, the config, ACL and credential stores, the mirror admin RPCs);
// anything else is logged and answered with fallback.
func errorCode(log *slog.Logger, err error, fallback *kerr.Error) int16 {
	return errorCodeFor(log, err, kerr.KafkaStorageError, fallback)
}

// coordinatorErrorCode is errorCode for the group and transaction
// coordinators' APIs: a storage failure of their log is NOT_COORDINATOR,
// as Kafka's coordinators answer a KAFKA_STORAGE_ERROR of their log append
// (TransactionStateManager.appendTransactionToLog, the group
// coordinator's runtime), so that the client finds the coordinator again
// and retries.
func coordinatorErrorCode(log *slog.Logger, err error, fallback *kerr.Error) int16 {
	return errorCodeFor(log, err, kerr.NotCoordinator, fallback)
}

// errorCodeFor is errorCode answering storage failures with storage. A
// storage failure is not logged here: every request would log it while
// the disk is full; the node logs the disk's state as it changes.
func errorCodeFor(log *slog.Logger, err error, storage, fallback *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	var kafkaErr *kerr.Error
	if errors.As(err, &kafkaErr) {
		return kafkaErr.Code
	}
	if isStorageFailure(err) {
		return storage.Code
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
