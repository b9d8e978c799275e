package e2e

// The differential test: one real Kafka 4.4 broker (KRaft, loopback,
// kafkatest) and one mirrord node get the same raw requests at a pinned
// version (one raw connection per request, rawConn), and must answer the
// same once what legitimately differs is normalised: node IDs, cluster
// IDs, hosts and ports, topic IDs, throttle times, error message texts.
// A mismatch prints every differing field with both values, then both
// answers.
//
// Cases live in tables (diff_*_cases_test.go), each registering its set
// with registerDiffCases from an init function; sets run in name order,
// cases in table order, all against the same broker and node, so a set
// uses topic names of its own (diff-<set>-...). The broker is the
// package's shared one (sharedKafkaBroker), which other tests write to
// too: what a case lists (every topic, every transactional ID) it filters
// by its own names. The node starts once for the whole file:
// TestDifferential runs every set as a subtest, and the tests that run
// Kafka's own tools against mirrord are subtests of it too.
//
// Like the interop suite it skips without Java and the Kafka jars, unless
// CI=true or MIRRORD_INTEROP=1 makes that a failure.

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	diffCaseWait    = 30 * time.Second // one case: its setup requests and its request, to both
	diffFieldsShown = 40               // differing fields printed per mismatch
)

// diffCase is one request sent to both Kafka and mirrord.
type diffCase struct {
	name    string
	version int16
	// setup builds requests sent to both before the request (at the
	// versions they set); their answers are compared too. server is the
	// server it is built for.
	setup func(server diffServer) []kmsg.Request
	// request builds the request; its version is set to version.
	request func(server diffServer) kmsg.Request
	// normalise, when set, runs on the answers to the request (not the
	// setup's) after the common normaliser (normaliseResponse), and may
	// log what it hides with t.Logf.
	normalise func(t *testing.T, fromKafka, fromMirrord kmsg.Response)
}

// diffCaseSets holds the registered case tables, by set name.
var diffCaseSets = map[string][]diffCase{}

// registerDiffCases adds a set of cases; call it from an init function.
func registerDiffCases(set string, cases []diffCase) {
	if _, dup := diffCaseSets[set]; dup {
		panic("e2e: diff case set " + set + " registered twice")
	}
	diffCaseSets[set] = cases
}

// diffTargets are the two servers a case is sent to.
type diffTargets struct {
	libs           string
	cluster        *kafkatest.Cluster
	kafka, mirrord diffServer
}

// diffServer is what a request may need to know of the server it goes to.
type diffServer struct {
	addr      string
	node      int32
	clusterID string
}

// diffTools are checks beyond one request (Kafka's command-line tools run
// against both), run after the case sets; registered like the cases.
var diffTools = map[string]func(t *testing.T, targets diffTargets){}

func TestDifferential(t *testing.T) {
	t.Parallel()
	libs := kafkaLibs(t)
	cluster := sharedKafkaBroker(t) // its topics and transactional IDs: diff-*; what it lists it filters by them
	mirror := startServer(t)
	targets := diffTargets{libs: libs, cluster: cluster, kafka: describeDiffServer(t, cluster.Nodes[0].Addr), mirrord: describeDiffServer(t, mirror.addr)}
	sets := make([]string, 0, len(diffCaseSets))
	for set := range diffCaseSets {
		sets = append(sets, set)
	}
	sort.Strings(sets)
	for _, set := range sets {
		t.Run(set, func(t *testing.T) {
			for _, c := range diffCaseSets[set] {
				t.Run(c.name, func(t *testing.T) { targets.check(t, c) })
			}
		})
	}
	tools := make([]string, 0, len(diffTools))
	for name := range diffTools {
		tools = append(tools, name)
	}
	sort.Strings(tools)
	for _, name := range tools {
		t.Run(name, func(t *testing.T) { diffTools[name](t, targets) })
	}
}

// check sends the case's setup requests and its request to both and
// compares the normalised answers.
func (d diffTargets) check(t *testing.T, c diffCase) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), diffCaseWait)
	defer cancel()
	build := func(server diffServer) []kmsg.Request {
		var requests []kmsg.Request
		if c.setup != nil {
			requests = c.setup(server)
		}
		req := c.request(server)
		req.SetVersion(c.version)
		return append(requests, req)
	}
	toKafka, toMirrord := build(d.kafka), build(d.mirrord)
	for i, req := range toKafka {
		last := i == len(toKafka)-1
		what := fmt.Sprintf("%s v%d", kmsg.NameForKey(req.Key()), req.GetVersion())
		if !last {
			what = fmt.Sprintf("setup %d: %s", i, what)
		}
		fromK, err := rawRequest(ctx, d.kafka.addr, req)
		if err != nil {
			t.Fatalf("%s to Kafka: %v", what, err)
		}
		fromM, err := rawRequest(ctx, d.mirrord.addr, toMirrord[i])
		if err != nil {
			t.Fatalf("%s to mirrord: %v", what, err)
		}
		if err := awaitCreatedTopics(ctx, d.kafka.addr, toKafka[i], fromK); err != nil {
			t.Fatalf("%s to Kafka: %v", what, err)
		}
		normaliseResponse(fromK)
		normaliseResponse(fromM)
		if c.normalise != nil && last {
			c.normalise(t, fromK, fromM)
		}
		compareResponses(t, what, fromK, fromM)
	}
}

// awaitCreatedTopics waits, after a CreateTopics answer, until addr's
// Metadata lists every topic it created with a leader for each partition:
// a Kafka broker learns of a topic from the controller a little after the
// controller answered.
func awaitCreatedTopics(ctx context.Context, addr string, req kmsg.Request, resp kmsg.Response) error {
	created, ok := resp.(*kmsg.CreateTopicsResponse)
	if !ok || req.(*kmsg.CreateTopicsRequest).ValidateOnly {
		return nil
	}
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 12
	for _, topic := range created.Topics {
		if topic.ErrorCode == 0 {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic.Topic)
			metadata.Topics = append(metadata.Topics, rt)
		}
	}
	if len(metadata.Topics) == 0 {
		return nil
	}
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for {
		resp, err := rawRequest(ctx, addr, metadata)
		if err != nil {
			return err
		}
		if allLed(resp.(*kmsg.MetadataResponse)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("created topics not in metadata: %w", ctx.Err())
		case <-ticker.C:
		}
	}
}

func allLed(resp *kmsg.MetadataResponse) bool {
	for _, topic := range resp.Topics {
		if topic.ErrorCode != 0 || len(topic.Partitions) == 0 {
			return false
		}
		for _, p := range topic.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

// describeDiffServer asks addr's Metadata for the node ID and cluster ID
// it answers.
func describeDiffServer(t *testing.T, addr string) diffServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), diffCaseWait)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp, err := rawRequest(ctx, addr, req)
	if err != nil {
		t.Fatalf("metadata of %s: %v", addr, err)
	}
	metadata := resp.(*kmsg.MetadataResponse)
	if len(metadata.Brokers) != 1 || metadata.ClusterID == nil {
		t.Fatalf("metadata of %s: %d brokers (want 1), cluster ID %v", addr, len(metadata.Brokers), metadata.ClusterID)
	}
	return diffServer{addr: addr, node: metadata.Brokers[0].NodeID, clusterID: *metadata.ClusterID}
}

// rawRequest sends one request on a connection of its own.
func rawRequest(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	c, err := dialRaw(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.close()
	return c.request(ctx, req)
}

// compareResponses fails the test when the answers differ, listing every
// differing field and then both answers.
func compareResponses(t *testing.T, what string, fromK, fromM kmsg.Response) {
	t.Helper()
	if diff := describeDifferences(what, fromK, fromM); diff != "" {
		t.Error(diff)
	}
}

// describeDifferences lists every differing field of two answers and then
// both answers; "" when they are the same.
func describeDifferences(what string, fromK, fromM any) string {
	var diffs []string
	diffValues("", reflect.ValueOf(fromK), reflect.ValueOf(fromM), &diffs)
	if len(diffs) == 0 {
		return ""
	}
	shown := diffs
	if len(shown) > diffFieldsShown {
		shown = shown[:diffFieldsShown]
	}
	return fmt.Sprintf("%s: %d fields differ (Kafka | mirrord):\n  %s\nKafka:   %s\nmirrord: %s",
		what, len(diffs), strings.Join(shown, "\n  "), asJSON(fromK), asJSON(fromM))
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}

// diffValues appends "path: a | b" for every exported field that differs.
func diffValues(path string, a, b reflect.Value, diffs *[]string) {
	if !a.IsValid() || !b.IsValid() || a.Type() != b.Type() { // no answer, or answers of two kinds
		*diffs = append(*diffs, fmt.Sprintf("%s: %v | %v", path, a, b))
		return
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		switch {
		case a.IsNil() && b.IsNil():
		case a.IsNil() || b.IsNil():
			*diffs = append(*diffs, fmt.Sprintf("%s: %s | %s", path, show(a), show(b)))
		default:
			diffValues(path, a.Elem(), b.Elem(), diffs)
		}
	case reflect.Struct:
		for i := range a.NumField() {
			field := a.Type().Field(i)
			if !field.IsExported() {
				continue
			}
			diffValues(path+"."+field.Name, a.Field(i), b.Field(i), diffs)
		}
	case reflect.Slice:
		// Both answers were decoded by the same code, so null against
		// an empty array is a difference on the wire.
		if a.IsNil() != b.IsNil() {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s | %s", path, show(a), show(b)))
			return
		}
		fallthrough
	case reflect.Array:
		if a.Len() != b.Len() {
			*diffs = append(*diffs, fmt.Sprintf("%s: %d elements | %d elements: %s | %s", path, a.Len(), b.Len(), show(a), show(b)))
			return
		}
		for i := range a.Len() {
			diffValues(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i), diffs)
		}
	case reflect.Map:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s | %s", path, show(a), show(b)))
		}
	default:
		if a.Interface() != b.Interface() {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s | %s", path, show(a), show(b)))
		}
	}
}

func show(v reflect.Value) string {
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice || v.Kind() == reflect.Interface) && v.IsNil() {
		return "null"
	}
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() == reflect.String {
		return fmt.Sprintf("%q", v.String())
	}
	return asJSON(v.Interface())
}
