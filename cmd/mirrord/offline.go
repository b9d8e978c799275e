package main

import (
	"fmt"
	"io"

	"github.com/mirrord/mirrord"
)

// describedOffline is one offline partition of --describe: its log could
// not be opened, it answers KAFKA_STORAGE_ERROR. A mirrored one is also
// FAILED in its mirror's rows, and --recover rebuilds it from the source.
type describedOffline struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Error     string `json:"error"`
}

func offlineRows(partitions []mirrord.OfflineLog) []describedOffline {
	var rows []describedOffline
	for _, p := range partitions {
		rows = append(rows, describedOffline{Topic: p.Topic, Partition: p.Partition, Error: p.Error})
	}
	return rows
}

// printOffline prints the offline partitions, before anything else of
// --describe: they are the node's worst news.
func printOffline(out io.Writer, rows []describedOffline) error {
	if len(rows) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(out, "OFFLINE: %d partition(s) whose log cannot be opened answer KAFKA_STORAGE_ERROR "+
		"(a mirrored one: --recover rebuilds it from the source; the broken directory is kept under failed/):\n", len(rows)); err != nil {
		return err
	}
	for _, row := range rows {
		if _, err := fmt.Fprintf(out, "  %s-%d: %s\n", row.Topic, row.Partition, oneLine(row.Error)); err != nil {
			return err
		}
	}
	return nil
}
