package main

// `mirrord mirrors`: mirror administration over the Kafka listener, like
// kafka-cluster-mirrors.sh. Each action sends one mirror admin RPC
// (mirrorwire/keys.go) with a franz-go client and prints the answer;
// any failure is one line and a non-zero exit.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/mirrorwire"
	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const mirrorsUsage = `usage: mirrord mirrors --bootstrap-server HOST:PORT [--command-config FILE] ACTION [options]

  --command-config FILE   Java properties of this tool's own connection to the node, as
                          Kafka's tools take them: security.protocol, ssl.*, sasl.*
                          (the security keys of a mirror config)

actions:
  --create    --mirror NAME --mirror-config FILE    create a mirror; FILE is Java properties
                                                      (bootstrap.servers=... and the other mirror configs)
  --start     --mirror NAME --topics LIST [--exclude LIST] [--wait [--wait-timeout D]]
                                                      start mirroring topics (failback for stopped ones);
                                                      --wait: until every partition is caught up (default
                                                      bound 1h), with progress on a terminal
  --stop      --mirror NAME --topics LIST [--exclude LIST] [--dry-run [--json]]
                                                      stop mirroring: the topics become writable with the
                                                      offsets they have (failover); --dry-run stops nothing
                                                      and reports, per partition, the lag in records and
                                                      time a stop now would leave behind, and per consumer
                                                      group the records it would read again here;
                                                      on a terminal the stop shows its progress
  --pause     --mirror NAME --topics LIST           pause fetching; the topics stay read-only
  --resume    --mirror NAME --topics LIST [--wait [--wait-timeout D]]
                                                      resume paused topics
  --recover   --mirror NAME --topics LIST           retry FAILED partitions now
  --delete    --mirror NAME                         delete a mirror
  --list                                            list the mirrors
  --describe  [--mirror NAME] [--json] [--failed]   the state of every mirrored partition, and each
                                                      mirror's consumer group offset sync

LIST is comma-separated: an item made only of topic-name characters
([a-zA-Z0-9._-]) names a topic, any other is a regular expression matched
against whole topic names ('orders,pay-.*'). --exclude items are regular
expressions; they win over --topics.
`

// mirrorsTimeout bounds one `mirrord mirrors` command.
const mirrorsTimeout = 60 * time.Second

// runMirrors is `mirrord mirrors`.
func runMirrors(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return mirrorsCommand(ctx, args, os.Stdout)
}

// mirrorsCommand runs `mirrord mirrors` with args, writing to out. Its
// error is one line.
func mirrorsCommand(ctx context.Context, args []string, out io.Writer) error {
	opts, err := parseMirrorsArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		_, err = io.WriteString(out, mirrorsUsage)
		return err
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, commandTimeout(opts)) // mirrors_wait.go
		defer cancel()
		err = runMirrorsAction(ctx, opts, out)
	}
	if err != nil {
		return errors.New(oneLine("mirrors: " + err.Error()))
	}
	return nil
}

// oneLine joins the lines of s.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}

// mirrorsOptions are the parsed flags.
type mirrorsOptions struct {
	bootstrap     string
	commandConfig string // --command-config: the connection's security properties
	action        string // "create", "start", ...
	mirror        string
	mirrorConfig  string
	topics        string
	exclude       string
	json, failed  bool
	dryRun        bool // --stop --dry-run: report what a stop would leave behind
	wait          bool // --start/--resume --wait: until caught up (mirrors_wait.go)
	waitTimeout   time.Duration
}

// mirrorsActions lists, per action, the options it requires and those it
// allows besides.
var mirrorsActions = map[string]struct{ required, optional []string }{
	"create":   {[]string{"mirror", "mirror-config"}, nil},
	"start":    {[]string{"mirror", "topics"}, []string{"exclude", "wait", "wait-timeout"}},
	"stop":     {[]string{"mirror", "topics"}, []string{"exclude", "dry-run", "json"}},
	"pause":    {[]string{"mirror", "topics"}, nil},
	"resume":   {[]string{"mirror", "topics"}, []string{"wait", "wait-timeout"}},
	"recover":  {[]string{"mirror", "topics"}, nil},
	"delete":   {[]string{"mirror"}, nil},
	"list":     {nil, nil},
	"describe": {nil, []string{"mirror", "json", "failed"}},
}

func parseMirrorsArgs(args []string) (mirrorsOptions, error) {
	var opts mirrorsOptions
	flags := flag.NewFlagSet("mirrors", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	flags.Usage = func() {}
	flags.StringVar(&opts.bootstrap, "bootstrap-server", "", "HOST:PORT[,HOST:PORT...] of the mirrord node")
	flags.StringVar(&opts.commandConfig, "command-config", "", "security properties of the connection to the node")
	flags.StringVar(&opts.mirror, "mirror", "", "mirror name")
	flags.StringVar(&opts.mirrorConfig, "mirror-config", "", "mirror config file (Java properties)")
	flags.StringVar(&opts.topics, "topics", "", "topic names and patterns, comma-separated")
	flags.StringVar(&opts.exclude, "exclude", "", "topic patterns to exclude, comma-separated")
	flags.BoolVar(&opts.json, "json", false, "describe as JSON")
	flags.BoolVar(&opts.failed, "failed", false, "describe only FAILED partitions")
	flags.BoolVar(&opts.dryRun, "dry-run", false, "with --stop: report the lag a stop now would leave behind, stop nothing")
	flags.BoolVar(&opts.wait, "wait", false, "with --start, --resume: wait until every partition is caught up")
	flags.DurationVar(&opts.waitTimeout, "wait-timeout", waitTimeoutDefault, "with --wait: how long to wait at most")
	actions := map[string]*bool{}
	for action := range mirrorsActions {
		actions[action] = flags.Bool(action, false, action)
	}
	if err := flags.Parse(args); err != nil {
		return opts, err
	}
	if flags.NArg() > 0 {
		return opts, fmt.Errorf("unexpected argument %q", flags.Arg(0))
	}
	given := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for action, set := range actions {
		if *set && opts.action != "" {
			return opts, fmt.Errorf("one action at a time: --%s and --%s", min(action, opts.action), max(action, opts.action))
		}
		if *set {
			opts.action = action
		}
	}
	return opts, checkMirrorsOptions(opts, given)
}

// checkMirrorsOptions checks that the action has the options it needs and
// no others.
func checkMirrorsOptions(opts mirrorsOptions, given map[string]bool) error {
	if opts.action == "" {
		return errors.New("no action: give one of --create --start --stop --pause --resume --recover --delete --list --describe (--help for usage)")
	}
	if opts.bootstrap == "" {
		return errors.New("--bootstrap-server is required")
	}
	rules := mirrorsActions[opts.action]
	for _, name := range rules.required {
		if len(splitMirrorsList(optionValue(opts, name))) == 0 {
			return fmt.Errorf("--%s needs --%s", opts.action, name)
		}
	}
	var extra []string
	for name := range given {
		if _, isAction := mirrorsActions[name]; !isAction && name != "bootstrap-server" && name != "command-config" &&
			!slices.Contains(rules.required, name) && !slices.Contains(rules.optional, name) {
			extra = append(extra, "--"+name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("--%s does not take %s", opts.action, strings.Join(extra, " "))
	}
	return nil
}

// optionValue is the value of a string option.
func optionValue(opts mirrorsOptions, name string) string {
	switch name {
	case "mirror":
		return opts.mirror
	case "mirror-config":
		return opts.mirrorConfig
	case "topics":
		return opts.topics
	}
	return opts.exclude
}

// runMirrorsAction connects and performs opts.action.
func runMirrorsAction(ctx context.Context, opts mirrorsOptions, out io.Writer) error {
	security, err := commandConfigOptions(opts.commandConfig)
	if err != nil {
		return err
	}
	client, err := dialMirrors(ctx, opts.bootstrap, security...)
	if err != nil {
		return err
	}
	defer client.Close()
	switch opts.action {
	case "create":
		return createMirror(ctx, client, opts, out)
	case "delete":
		return deleteMirror(ctx, client, opts, out)
	case "stop":
		if opts.dryRun {
			return stopDryRun(ctx, client, opts, out)
		}
		return stopWithProgress(ctx, opts, out, func(out io.Writer) error { return changeMirrorTopics(ctx, client, opts, out) }) // mirrors_wait.go
	case "list":
		return listMirrors(ctx, client, out)
	case "describe":
		return describeMirrors(ctx, client, opts, out)
	}
	if opts.wait {
		return startAndWait(ctx, opts, out, func(out io.Writer) error { return changeMirrorTopics(ctx, client, opts, out) }) // mirrors_wait.go
	}
	return changeMirrorTopics(ctx, client, opts, out)
}

// commandConfigOptions reads --command-config (none: PLAINTEXT) with the
// mirror config's parser of the security keys, and returns the client
// options. The files it names are read from anywhere: the tool runs as
// its user.
func commandConfigOptions(path string) ([]kgo.Opt, error) {
	if path == "" {
		return nil, nil
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	props, err := parseProperties(string(text))
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	security, err := engine.ParseClientSecurity(props)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	opts, err := security.ClientOptions("", mirrorsTimeout, nil)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	return opts, nil
}

// mirrorsClient sends mirror admin requests to one node.
type mirrorsClient struct {
	*kgo.Client
	bootstrap string
	served    map[int16]bool // the mirror keys the node advertises
}

// dialMirrors connects to the node and checks that it serves the mirror
// admin RPCs.
func dialMirrors(ctx context.Context, bootstrap string, security ...kgo.Opt) (*mirrorsClient, error) {
	var seeds []string
	for _, seed := range strings.Split(bootstrap, ",") {
		if seed = strings.TrimSpace(seed); seed != "" {
			seeds = append(seeds, seed)
		}
	}
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MaxVersions(netio.MirrorClientVersions()),
		kgo.ClientID("mirrord-mirrors"), kgo.RequestRetries(2), kgo.DialTimeout(10 * time.Second)}, security...)...)
	if err != nil {
		return nil, fmt.Errorf("--bootstrap-server %q: %w", bootstrap, err)
	}
	resp, err := client.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("%s: %w", bootstrap, err)
	}
	served := map[int16]bool{}
	for _, key := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		if mirrorwire.KeyName(key.ApiKey) != "" {
			served[key.ApiKey] = true
		}
	}
	return &mirrorsClient{Client: client, bootstrap: bootstrap, served: served}, nil
}

// request sends req, which the node must serve.
func (c *mirrorsClient) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if !c.served[req.Key()] {
		return nil, fmt.Errorf("%s does not serve %s (API key %d): not a mirrord node, or one without mirroring",
			c.bootstrap, mirrorwire.KeyName(req.Key()), req.Key())
	}
	resp, err := c.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.bootstrap, mirrorwire.KeyName(req.Key()), err)
	}
	return resp, nil
}

// kafkaError is a response's error code and message as an error, nil for
// no error.
func kafkaError(code int16, message *string) error {
	if code == 0 {
		return nil
	}
	name := fmt.Sprintf("error code %d", code)
	if kafkaErr, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && kafkaErr.Code == code {
		name = kafkaErr.Message
	} else if code == netio.ErrClusterMirrorAuthorizationFailed.Code { // KIP-1279's, unknown to kerr
		name = netio.ErrClusterMirrorAuthorizationFailed.Message
	}
	switch {
	case message == nil || *message == "":
		return errors.New(name)
	case strings.HasPrefix(*message, name):
		return errors.New(*message)
	}
	return fmt.Errorf("%s: %s", name, *message)
}

func createMirror(ctx context.Context, client *mirrorsClient, opts mirrorsOptions, out io.Writer) error {
	text, err := os.ReadFile(opts.mirrorConfig)
	if err != nil {
		return fmt.Errorf("--mirror-config: %w", err)
	}
	config, err := parseProperties(string(text))
	if err != nil {
		return fmt.Errorf("--mirror-config %s: %w", opts.mirrorConfig, err)
	}
	req := &mirrorwire.CreateClusterMirrorRequest{MirrorName: opts.mirror}
	for _, key := range sortedPropertyKeys(config) {
		req.Configs = append(req.Configs, mirrorwire.CreateClusterMirrorConfig{Name: key, Value: new(config[key])})
	}
	resp, err := client.request(ctx, req)
	if err != nil {
		return err
	}
	r := resp.(*mirrorwire.CreateClusterMirrorResponse)
	if err := kafkaError(r.ErrorCode, r.ErrorMessage); err != nil {
		return fmt.Errorf("create mirror %q: %w", opts.mirror, err)
	}
	_, err = fmt.Fprintf(out, "Created mirror %s.\n", opts.mirror)
	return err
}

func sortedPropertyKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

func deleteMirror(ctx context.Context, client *mirrorsClient, opts mirrorsOptions, out io.Writer) error {
	resp, err := client.request(ctx, &mirrorwire.DeleteClusterMirrorRequest{MirrorName: opts.mirror})
	if err != nil {
		return err
	}
	r := resp.(*mirrorwire.DeleteClusterMirrorResponse)
	if err := kafkaError(r.ErrorCode, r.ErrorMessage); err != nil {
		return fmt.Errorf("delete mirror %q: %w", opts.mirror, err)
	}
	_, err = fmt.Fprintf(out, "Deleted mirror %s.\n", opts.mirror)
	return err
}

// topicsChanges maps the topic-state actions to their changes.
var topicsChanges = map[string]mirrorwire.TopicsChange{
	"start":   mirrorwire.StartMirroring,
	"stop":    mirrorwire.StopMirroring,
	"pause":   mirrorwire.PauseMirroring,
	"resume":  mirrorwire.ResumeMirroring,
	"recover": mirrorwire.RecoverMirroring,
}

func changeMirrorTopics(ctx context.Context, client *mirrorsClient, opts mirrorsOptions, out io.Writer) error {
	req := &mirrorwire.MirrorTopicsRequest{Change: topicsChanges[opts.action], MirrorName: opts.mirror}
	for _, item := range splitMirrorsList(opts.topics) {
		if isTopicName(item) {
			req.Topics = append(req.Topics, mirrorwire.MirrorTopicsRequestTopic{TopicName: item})
		} else {
			req.IncludePatterns = append(req.IncludePatterns, item)
		}
	}
	req.ExcludePatterns = splitMirrorsList(opts.exclude)
	resp, err := client.request(ctx, req)
	if err != nil {
		return err
	}
	r := resp.(*mirrorwire.MirrorTopicsResponse)
	if err := kafkaError(r.ErrorCode, r.ErrorMessage); err != nil {
		return fmt.Errorf("%s mirror %q: %w", opts.action, opts.mirror, err)
	}
	return printTopicResults(out, opts, r.Topics)
}

// printTopicResults prints one line per topic and fails if any topic did.
func printTopicResults(out io.Writer, opts mirrorsOptions, topics []mirrorwire.MirrorTopicsResponseTopic) error {
	if len(topics) == 0 {
		_, err := fmt.Fprintf(out, "Mirror %s: no topic matched (%s).\n", opts.mirror, opts.action)
		return err
	}
	var failures []string
	for _, topic := range topics {
		status := opts.action + " requested"
		if opts.action == "stop" {
			status = "stopped: writable" // a stop answers once done
		}
		if err := kafkaError(topic.ErrorCode, topic.ErrorMessage); err != nil {
			status = "failed: " + err.Error()
			failures = append(failures, fmt.Sprintf("%s: %v", topic.TopicName, err))
		}
		if _, err := fmt.Fprintf(out, "Mirror %s, topic %s: %s\n", opts.mirror, topic.TopicName, oneLine(status)); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("%s: %d of %d topics failed (first: %s)", opts.action, len(failures), len(topics), failures[0])
	}
	return nil
}

// splitMirrorsList splits a comma-separated option into its non-empty items.
func splitMirrorsList(list string) []string {
	var items []string
	for _, item := range strings.Split(list, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// isTopicName reports whether s can only be a topic name: Kafka's legal
// characters and length.
func isTopicName(s string) bool {
	if s == "" || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func listMirrors(ctx context.Context, client *mirrorsClient, out io.Writer) error {
	resp, err := client.request(ctx, &mirrorwire.ListClusterMirrorsRequest{})
	if err != nil {
		return err
	}
	r := resp.(*mirrorwire.ListClusterMirrorsResponse)
	if err := kafkaError(r.ErrorCode, r.ErrorMessage); err != nil {
		return fmt.Errorf("list: %w", err)
	}
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(table, "MIRROR\tSOURCE\tSOURCE-CLUSTER-ID\tTOPICS")
	for _, m := range r.Mirrors {
		fmt.Fprintf(table, "%s\t%s\t%s\t%d\n", m.MirrorName, m.SourceBootstrap, dashIfEmpty(m.SourceClusterID), m.TopicCount)
	}
	return table.Flush()
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// offsetText prints an offset, epoch or lag, "-" when unknown (-1).
func offsetText(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

// lagText prints a lag in records: exact, "at least" for a lower bound
// (lag -1 and lowerBound >= 0), or "-" when unknown.
func lagText(lag, lowerBound int64) string {
	if lag < 0 && lowerBound >= 0 {
		return ">= " + strconv.FormatInt(lowerBound, 10)
	}
	return offsetText(lag)
}

// ageText prints how long ago something was (milliseconds): whole
// seconds from a second on, "-" when unknown (-1).
func ageText(millis int64) string {
	if millis < 0 {
		return "-"
	}
	d := time.Duration(millis) * time.Millisecond
	if d >= time.Second {
		d = d.Round(time.Second)
	}
	return d.String()
}

// unreachableText is "source unreachable since T (D ago): ERROR", or ""
// for a source that answers (sinceMillis -1). now is the reader's clock.
func unreachableText(sinceMillis int64, sourceError string, now time.Time) string {
	if sinceMillis < 0 {
		return ""
	}
	since := time.UnixMilli(sinceMillis)
	text := fmt.Sprintf("source unreachable since %s (%s ago)", since.UTC().Format(time.RFC3339), ageText(max(now.Sub(since).Milliseconds(), 0)))
	if sourceError != "" {
		text += ": " + oneLine(sourceError)
	}
	return text
}

// describedPartition is one row of --describe, and its JSON form. Lag is
// exact or -1; LagAtLeast is what is known: Lag, a lower bound when the
// source high watermark is stale (Lag then -1), or -1 when unknown.
type describedPartition struct {
	Mirror              string `json:"mirror"`
	Topic               string `json:"topic"`
	Partition           int32  `json:"partition"`
	State               string `json:"state"`
	SourceHighWatermark int64  `json:"sourceHighWatermark"`
	// SourceHighWatermarkAgeMillis: how long ago the source told it.
	SourceHighWatermarkAgeMillis int64  `json:"sourceHighWatermarkAgeMillis"`
	LogEndOffset                 int64  `json:"logEndOffset"`
	Lag                          int64  `json:"lag"`
	LagAtLeast                   int64  `json:"lagAtLeast"`
	Error                        string `json:"error,omitempty"`
	RetryCount                   int16  `json:"retryCount"`
	LastMirrorEpoch              int32  `json:"lastMirrorEpoch"`
	LastMirrorOffset             int64  `json:"lastMirrorOffset"`
}

// describedMirror is one mirror of --describe --json; the source fields
// are set while the source does not answer.
type describedMirror struct {
	Mirror                 string `json:"mirror"`
	SourceBootstrap        string `json:"sourceBootstrap"`
	SourceClusterID        string `json:"sourceClusterId"`
	SourceUnreachableSince string `json:"sourceUnreachableSince,omitempty"` // RFC 3339
	SourceError            string `json:"sourceError,omitempty"`
	// GroupSync is the consumer group offset sync's last round.
	GroupSync *describedGroupSync `json:"groupSync,omitempty"`
	// ACLSync is the ACL sync's last round.
	ACLSync *describedACLSync `json:"aclSync,omitempty"`
}

// describeOutput is the --describe --json document: the mirrors, and the
// rows of the table (-1 for what the table prints as "-").
type describeOutput struct {
	Offline    []describedOffline   `json:"offlinePartitions,omitempty"` // offline.go; absent when none
	Mirrors    []describedMirror    `json:"mirrors"`
	Partitions []describedPartition `json:"partitions"`
}

func describeMirrors(ctx context.Context, client *mirrorsClient, opts mirrorsOptions, out io.Writer) error {
	req := &mirrorwire.DescribeClusterMirrorsRequest{FailedOnly: opts.failed}
	if opts.mirror != "" {
		req.MirrorNames = []string{opts.mirror}
	}
	resp, err := client.request(ctx, req)
	if err != nil {
		return err
	}
	r := resp.(*mirrorwire.DescribeClusterMirrorsResponse)
	if err := kafkaError(r.ErrorCode, r.ErrorMessage); err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	described := describeOutput{Offline: offlineRows(r.OfflinePartitions), Mirrors: []describedMirror{}, Partitions: []describedPartition{}}
	var unreachable []string // the text lines above the table
	now := time.Now()
	for _, m := range r.Mirrors {
		if err := kafkaError(m.ErrorCode, m.ErrorMessage); err != nil {
			return fmt.Errorf("describe mirror %q: %w", m.MirrorName, err)
		}
		mirror := describedMirror{Mirror: m.MirrorName, SourceBootstrap: stringOrEmpty(m.SourceBootstrap), SourceClusterID: stringOrEmpty(m.SourceClusterID),
			GroupSync: groupSyncOf(m.GroupSync, now), ACLSync: aclSyncOf(m.ACLSync, now)}
		if m.SourceUnreachableSinceMillis >= 0 {
			mirror.SourceUnreachableSince = time.UnixMilli(m.SourceUnreachableSinceMillis).UTC().Format(time.RFC3339Nano)
			mirror.SourceError = stringOrEmpty(m.SourceError)
			unreachable = append(unreachable, fmt.Sprintf("Mirror %s: %s", m.MirrorName, unreachableText(m.SourceUnreachableSinceMillis, mirror.SourceError, now)))
		}
		described.Mirrors = append(described.Mirrors, mirror)
		described.Partitions = append(described.Partitions, partitionRows(m)...)
	}
	if opts.json {
		encoder := json.NewEncoder(out)
		encoder.SetIndent("", "  ")
		return encoder.Encode(described)
	}
	if err := printOffline(out, described.Offline); err != nil {
		return err
	}
	for _, line := range unreachable {
		if _, err := fmt.Fprintln(out, line); err != nil {
			return err
		}
	}
	if err := printDescribeTable(out, described.Partitions); err != nil {
		return err
	}
	if err := printGroupSyncs(out, described.Mirrors, now); err != nil {
		return err
	}
	return printACLSyncs(out, described.Mirrors, now)
}

func stringOrEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// partitionRows are the rows of one described mirror.
func partitionRows(m mirrorwire.DescribeClusterMirrorsMirror) []describedPartition {
	var rows []describedPartition
	for _, topic := range m.Topics {
		for _, p := range topic.Partitions {
			atLeast := p.Lag
			if p.Lag < 0 {
				atLeast = p.LagLowerBound
			}
			rows = append(rows, describedPartition{
				Mirror: m.MirrorName, Topic: topic.TopicName, Partition: p.PartitionIndex, State: p.StateValue,
				SourceHighWatermark: p.SourceOffset, SourceHighWatermarkAgeMillis: p.SourceOffsetAgeMillis,
				LogEndOffset: p.DestinationOffset, Lag: p.Lag, LagAtLeast: atLeast,
				Error: stringOrEmpty(p.ErrorMessage), RetryCount: p.RetryAttempt,
				LastMirrorEpoch: p.LastMirrorEpoch, LastMirrorOffset: p.LastMirrorOffset,
			})
		}
	}
	return rows
}

// printDescribeTable prints the rows as a table; a FAILED row's ERROR
// says how often it was retried, or that it waits for --recover. A lag
// that is only a lower bound reads "lag >= N (source high watermark D
// ago)".
func printDescribeTable(out io.Writer, rows []describedPartition) error {
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(table, "MIRROR\tTOPIC\tPARTITION\tSTATE\tSOURCE-HW\tLOCAL-LEO\tLAG\tERROR")
	for _, row := range rows {
		problem := ""
		switch {
		case row.Error != "" && row.RetryCount < 0:
			problem = oneLine(row.Error) + " (waits for --recover)"
		case row.Error != "":
			problem = fmt.Sprintf("%s (retry %d)", oneLine(row.Error), row.RetryCount)
		}
		lag := lagText(row.Lag, row.LagAtLeast)
		if row.Lag < 0 && row.LagAtLeast >= 0 {
			lag = fmt.Sprintf("%s (source high watermark %s ago)", lag, ageText(row.SourceHighWatermarkAgeMillis))
		}
		fmt.Fprintf(table, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", row.Mirror, row.Topic, row.Partition, row.State,
			offsetText(row.SourceHighWatermark), offsetText(row.LogEndOffset), lag, problem)
	}
	return table.Flush()
}
