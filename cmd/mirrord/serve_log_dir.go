package main

import (
	"fmt"

	"github.com/mirrord/mirrord"
)

// logDirLine is the status page's line on the data directory's space.
func logDirLine(space mirrord.LogDirSpace) string {
	switch {
	case !space.Known:
		return "log dir: free space unknown"
	case space.Low:
		return fmt.Sprintf("log dir: LOW SPACE, %d bytes free, below log.dir.reserve.bytes %d: Produce, CreateTopics, CreatePartitions and mirror appends are refused (KAFKA_STORAGE_ERROR) until space returns",
			space.FreeBytes, space.ReserveBytes)
	}
	return fmt.Sprintf("log dir: %d bytes free, log.dir.reserve.bytes %d", space.FreeBytes, space.ReserveBytes)
}
