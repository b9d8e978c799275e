package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/netio"
)

// offlineBackend is cliBackend with offline partitions.
type offlineBackend struct {
	cliBackend
	offline []netio.OfflineLog
}

func (b offlineBackend) OfflineLogs() []netio.OfflineLog { return b.offline }

var offlineFixture = []netio.OfflineLog{
	{Topic: "orders", Partition: 1, Error: "logstore: corrupt: /data/orders-1/partition.metadata: topic id \"junk\""},
	{Topic: "pay", Partition: 0, Error: "broker: pay-0: load producer state: magic 7, want 2"},
}

// Offline partitions come first in --describe, with their errors, in the
// text and in the JSON.
func TestMirrorsDescribeOffline(t *testing.T) {
	admin := &cliAdmin{configs: map[string]map[string]string{}, descriptions: describedFixture()}
	addr := serveCLI(t, offlineBackend{cliBackend{admin: admin}, offlineFixture})
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := mirrorsCommand(context.Background(), append([]string{"--bootstrap-server", addr}, args...), &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	text := run("--describe")
	wantFirst := "OFFLINE: 2 partition(s) whose log cannot be opened answer KAFKA_STORAGE_ERROR " +
		"(a mirrored one: --recover rebuilds it from the source; the broken directory is kept under failed/):\n" +
		"  orders-1: logstore: corrupt: /data/orders-1/partition.metadata: topic id \"junk\"\n" +
		"  pay-0: broker: pay-0: load producer state: magic 7, want 2\n" +
		"MIRROR  TOPIC"
	if !strings.HasPrefix(text, wantFirst) {
		t.Errorf("describe:\n%s\nwant it to begin\n%s", text, wantFirst)
	}
	var got describeOutput
	if err := json.Unmarshal([]byte(run("--describe", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	want := []describedOffline{{"orders", 1, offlineFixture[0].Error}, {"pay", 0, offlineFixture[1].Error}}
	if !reflect.DeepEqual(got.Offline, want) {
		t.Errorf("json offlinePartitions %+v, want %+v", got.Offline, want)
	}
}
