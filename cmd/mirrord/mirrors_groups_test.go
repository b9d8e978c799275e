package main

// Tests of the consumer group offset sync in `mirrors --describe`, the
// stop dry run and the status page.

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord"
)

// groupSyncFixture is describedFixture with a group sync on east, its last
// round 3 seconds before at (failed: one group's offsets were not
// fetched), and none run yet on west.
func groupSyncFixture(at time.Time) []mirrord.MirrorDescription {
	described := describedFixture()
	described[0].GroupSync = &mirrord.MirrorGroupSync{At: at, Duration: 12 * time.Millisecond, Synced: 2, Skipped: 1, FailedRounds: 4,
		Error:  "fetch the offsets of group c: NOT_COORDINATOR\n(retried)",
		Groups: []mirrord.MirrorGroupSyncGroup{{Group: "app", OffsetLag: 500}, {Group: "b", OffsetLag: 0}, {Group: "live", OffsetLag: -1, Skipped: true}}}
	described[1].GroupSync = &mirrord.MirrorGroupSync{}
	return described
}

func TestMirrorsDescribeGroupSync(t *testing.T) {
	admin, run := newCLI(t)
	at := time.Now().Add(-3 * time.Second).Truncate(time.Millisecond)
	admin.descriptions = groupSyncFixture(at)
	atText := regexp.QuoteMeta(at.UTC().Format(time.RFC3339))

	out, err := run("--describe")
	table := "MIRROR  TOPIC   PARTITION  STATE      SOURCE-HW  LOCAL-LEO  LAG  LAG-TIME  EPOCH  SOURCE-EPOCH  ERROR\n" +
		"east    orders  0          MIRRORING  1200       1150       50   4s        7      7             \n" +
		"east    orders  1          FAILED     -          80         -    -         4      -             source topic deleted (waits for --recover)\n" +
		"east    pay     0          FAILED     10         7          3    250ms     2      3             connection refused (retry 3)\n" +
		"east    pay     1          UNKNOWN    -          -          -    -         -      -             \n"
	groups := `\nConsumer group offset sync:\n` +
		`Mirror east: group offsets synced ` + atText + ` \([0-9]+s ago, took 12ms\): 2 groups synced, 1 skipped \(members on this node\); ` +
		`4 rounds failed; the last round failed: fetch the offsets of group c: NOT_COORDINATOR; \(retried\)\n` +
		`Mirror west: no group offset sync round yet\n` +
		`MIRROR  GROUP  OFFSET-LAG  SYNC\n` +
		`east    app    500         synced\n` +
		`east    b      0           synced\n` +
		`east    live   -           skipped: members on this node\n$`
	if err != nil || !strings.HasPrefix(out, table) || !regexp.MustCompile(groups).MatchString(strings.TrimPrefix(out, table)) {
		t.Errorf("describe: %v\n%s\nwant\n%s%s", err, out, table, groups)
	}

	out, err = run("--describe", "--json", "--mirror", "east")
	var got describeOutput
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || len(got.Mirrors) != 1 || got.Mirrors[0].GroupSync == nil {
		t.Fatalf("describe --json: %v\n%s", err, out)
	}
	sync := *got.Mirrors[0].GroupSync
	if sync.LastSyncAgeMillis < 3000 || sync.LastSyncAgeMillis > 60000 {
		t.Errorf("lastSyncAgeMillis %d, want about 3000", sync.LastSyncAgeMillis)
	}
	sync.LastSyncAgeMillis = 0
	want := describedGroupSync{LastSync: at.UTC().Format(time.RFC3339Nano), DurationMillis: 12, GroupsSynced: 2, GroupsSkipped: 1, FailedRounds: 4,
		Error:  "fetch the offsets of group c: NOT_COORDINATOR\n(retried)",
		Groups: []describedGroup{{Group: "app", OffsetLag: 500}, {Group: "b", OffsetLag: 0}, {Group: "live", OffsetLag: -1, Skipped: true}}}
	if !reflect.DeepEqual(sync, want) {
		t.Errorf("groupSync\n%+v\nwant\n%+v", sync, want)
	}
	// Field names as documented; before the first round, no lastSync.
	out, err = run("--describe", "--json", "--mirror", "west")
	if err != nil || !strings.Contains(strings.Join(strings.Fields(out), ""),
		`"groupSync":{"lastSyncAgeMillis":-1,"durationMillis":0,"groupsSynced":0,"groupsSkipped":0,"failedRounds":0,"groups":[]}`) {
		t.Errorf("describe --json, no round yet: %v\n%s", err, out)
	}
}

// The dry run adds, per group, the offsets a consumer moved here would
// read again, their sum and the round's age; before the first round it
// says the figure is unknown.
func TestMirrorsStopDryRunGroups(t *testing.T) {
	admin, run := newCLI(t)
	at := time.Now().Add(-3 * time.Second).Truncate(time.Millisecond)
	admin.descriptions = groupSyncFixture(at)

	out, err := run("--stop", "--dry-run", "--mirror", "east", "--topics", "orders")
	partitions := "TOPIC   PARTITION  STATE      SOURCE-HW  LOCAL-LEO  LAG-RECORDS  LAG-TIME\n" +
		"orders  0          MIRRORING  1200       1150       50           4s\n" +
		"orders  1          FAILED     -          80         -            -\n" +
		"A stop now would leave 50 records behind on the source (largest lag in time 4s). " +
		"1 partitions have no source high watermark yet: their lag is unknown. Nothing was stopped (--dry-run).\n"
	groups := regexp.QuoteMeta("GROUP  OFFSET-LAG\n"+
		"app    500\n"+
		"b      0\n"+
		"live   - (members on this node: not synced)\n"+
		"Consumer groups: as of the last group offset sync round, ") + `[0-9]+s` + regexp.QuoteMeta(" ago, their offsets here trail the source's commits by 500 in total (most: app, 500): "+
		"the records a consumer moved here after the stop reads again (over all of the mirror's MIRRORING topics; commits on the source since that round add to it). "+
		"1 groups have members on this node and are not synced. The last round failed: fetch the offsets of group c: NOT_COORDINATOR; (retried).") + "\n$"
	if err != nil || !strings.HasPrefix(out, partitions) || !regexp.MustCompile(groups).MatchString(strings.TrimPrefix(out, partitions)) {
		t.Errorf("dry run: %v\n%s\nwant\n%s%s", err, out, partitions, groups)
	}

	out, err = run("--stop", "--dry-run", "--json", "--mirror", "east", "--topics", "orders")
	var dry struct {
		GroupSync *describedGroupSync `json:"groupSync"`
	}
	if err != nil || json.Unmarshal([]byte(out), &dry) != nil || dry.GroupSync == nil {
		t.Fatalf("dry run --json: %v\n%s", err, out)
	}
	if g := dry.GroupSync; g.LastSyncAgeMillis < 3000 || len(g.Groups) != 3 || g.Groups[0] != (describedGroup{Group: "app", OffsetLag: 500}) ||
		!g.Groups[2].Skipped || g.Error == "" {
		t.Errorf("dry run --json groupSync %+v", g)
	}

	admin.descriptions[0].GroupSync = &mirrord.MirrorGroupSync{}
	out, err = run("--stop", "--dry-run", "--mirror", "east", "--topics", "orders")
	if err != nil || !strings.HasSuffix(out, "Consumer groups: no group offset sync round yet; how far their offsets here trail the source is unknown.\n") {
		t.Errorf("dry run, no round yet: %v\n%s", err, out)
	}
	// A node that does not report its group sync: nothing about groups.
	admin.descriptions[0].GroupSync = nil
	if out, err = run("--stop", "--dry-run", "--mirror", "east", "--topics", "orders"); err != nil || strings.Contains(out, "group") {
		t.Errorf("dry run, no group sync reported: %v\n%s", err, out)
	}
}
