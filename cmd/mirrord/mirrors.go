package main

// `mirrord mirrors`: mirror administration over the Kafka listener, like
// kafka-cluster-mirrors.sh. Each action is a call on the node's mirror
// administration through mirrord.Client (admin_client.go: the mirror admin
// RPCs of mirrorwire/keys.go), and prints the answer, as text or --json;
// any failure is one line and a non-zero exit.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/mirrord/mirrord"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

const mirrorsUsage = `usage: mirrord mirrors --bootstrap-server HOST:PORT [--command-config FILE] ACTION [options]

  --command-config FILE   Java properties of this tool's own connection to the node, as
                          Kafka's tools take them: security.protocol, ssl.*, sasl.*
                          (the security keys of a mirror config)

actions:
  --create    --mirror NAME --mirror-config FILE    create a mirror; FILE is Java properties
                                                      (bootstrap.servers=... and the other mirror configs)
  --start     --mirror NAME --topics LIST [--exclude LIST] [--json | --wait [--wait-timeout D]]
                                                      start mirroring topics (failback for stopped ones);
                                                      --wait: until every partition is caught up (default
                                                      bound 1h), with progress on a terminal
  --stop      --mirror NAME --topics LIST [--exclude LIST] [--json] [--dry-run]
                                                      stop mirroring: the topics become writable with the
                                                      offsets they have (failover); --dry-run stops nothing
                                                      and reports, per partition, the lag in records and
                                                      time a stop now would leave behind, and per consumer
                                                      group the records it would read again here;
                                                      on a terminal the stop shows its progress
  --pause     --mirror NAME --topics LIST [--json]  pause fetching; the topics stay read-only
  --resume    --mirror NAME --topics LIST [--json | --wait [--wait-timeout D]]
                                                      resume paused topics
  --recover   --mirror NAME --topics LIST [--json]  retry FAILED partitions now
  --delete    --mirror NAME                         delete a mirror
  --list      [--json]                              list the mirrors
  --describe  [--mirror NAME] [--json] [--failed] [--watch [--interval DURATION] [--count N]]
                                                      the state of every mirrored partition: offsets, lag
                                                      in records and in time (LAG-TIME: how long it has
                                                      been behind the source, as mirrord_mirror_lag_seconds),
                                                      leader epochs (EPOCH: the local log's latest,
                                                      SOURCE-EPOCH: the source leader's as last learned),
                                                      on a cluster each partition's LEADER and ISR,
                                                      and each mirror's consumer group offset and ACL sync;
                                                      --watch repeats it every --interval (default 2s) until
                                                      interrupted, or --count times: on a terminal it
                                                      redraws, piped it prints each snapshot after a
                                                      "# TIME" line and a blank line between snapshots

LIST is comma-separated: an item made only of topic-name characters
([a-zA-Z0-9._-]) names a topic, any other is a regular expression matched
against whole topic names ('orders,pay-.*'). --exclude items are regular
expressions; they win over --topics.

--json prints one JSON document (with --watch, one per snapshot), its
field names stable; -1 stands for what the text prints as "-" (unknown):
  --list            {"mirrors": [{"mirror", "sourceBootstrap", "sourceClusterId",
                     "topicCount", "topics": [NAME]}]}
  --start ... --recover
                    {"mirror", "action", "topics": [{"topic", "status", "error"}]};
                    status is "requested", "stopped" (--stop: writable now) or "failed"
  --describe        {"offlinePartitions": [{"topic", "partition", "error"}] (absent when none),
                     "mirrors": [{"mirror", "sourceBootstrap", "sourceClusterId",
                       "sourceUnreachableSince", "sourceError" (while the source does not answer),
                       "groupSync": {"lastSync", "lastSyncAgeMillis", "durationMillis",
                         "groupsSynced", "groupsSkipped", "failedRounds", "error",
                         "groups": [{"group", "offsetLag", "skipped"}]},
                       "aclSync": {"lastSync", "lastSyncAgeMillis", "durationMillis",
                         "aclsSynced", "failedRounds", "error"}}],
                     "partitions": [{"mirror", "topic", "partition", "state",
                       "sourceHighWatermark", "sourceHighWatermarkAgeMillis", "logEndOffset",
                       "lag" (-1 also when only a lower bound is known), "lagAtLeast",
                       "lagMillis" (lag in time), "leaderEpoch", "sourceLeaderEpoch",
                       "error", "retryCount" (-1: waits for --recover),
                       "lastMirrorEpoch", "lastMirrorOffset",
                       "leader" (-1: none), "isr" (both on a cluster only)}]}
  --stop --dry-run  {"mirror", "sourceUnreachableSince", "sourceError",
                     "partitions": [{"topic", "partition", "state", "sourceHighWatermark",
                       "logEndOffset", "lagRecords", "lagRecordsAtLeast", "lagMillis",
                       "sourceHighWatermarkAgeMillis"}],
                     "groupSync": {as in --describe}}
Times ("lastSync", "sourceUnreachableSince") are RFC 3339; "error",
"lastSync", "sourceUnreachableSince", "sourceError" and "skipped" are
absent when empty. With --watch piped, JSON snapshots have no "# TIME"
line (each document carries its own ages).
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
		// A watch runs until interrupted (each snapshot has its own
		// timeout); a --wait gets its own bound on top (mirrors_wait.go).
		if !opts.watch {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, commandTimeout(opts))
			defer cancel()
		}
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
	// --describe --watch: a snapshot every interval, count of them (0:
	// until interrupted).
	watch       bool
	interval    time.Duration
	count       int
	wait        bool // --start/--resume --wait: until caught up (mirrors_wait.go)
	waitTimeout time.Duration
}

// mirrorsActions lists, per action, the options it requires and those it
// allows besides.
var mirrorsActions = map[string]struct{ required, optional []string }{
	"create":   {[]string{"mirror", "mirror-config"}, nil},
	"start":    {[]string{"mirror", "topics"}, []string{"exclude", "json", "wait", "wait-timeout"}},
	"stop":     {[]string{"mirror", "topics"}, []string{"exclude", "dry-run", "json"}},
	"pause":    {[]string{"mirror", "topics"}, []string{"json"}},
	"resume":   {[]string{"mirror", "topics"}, []string{"json", "wait", "wait-timeout"}},
	"recover":  {[]string{"mirror", "topics"}, []string{"json"}},
	"delete":   {[]string{"mirror"}, nil},
	"list":     {nil, []string{"json"}},
	"describe": {nil, []string{"mirror", "json", "failed", "watch", "interval", "count"}},
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
	flags.BoolVar(&opts.json, "json", false, "print JSON")
	flags.BoolVar(&opts.failed, "failed", false, "describe only FAILED partitions")
	flags.BoolVar(&opts.dryRun, "dry-run", false, "with --stop: report the lag a stop now would leave behind, stop nothing")
	flags.BoolVar(&opts.watch, "watch", false, "with --describe: repeat it until interrupted")
	flags.DurationVar(&opts.interval, "interval", 2*time.Second, "with --watch: the time between snapshots")
	flags.IntVar(&opts.count, "count", 0, "with --watch: stop after this many snapshots (0: never)")
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
	switch {
	case opts.json && opts.wait:
		return errors.New("--json and --wait do not go together: --wait prints how the wait ended as text")
	case !opts.watch && (given["interval"] || given["count"]):
		return errors.New("--interval and --count go with --watch")
	case opts.interval <= 0:
		return fmt.Errorf("--interval %v: must be positive", opts.interval)
	case opts.count < 0:
		return fmt.Errorf("--count %d: must be at least 0 (0: until interrupted)", opts.count)
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
	security, err := commandConfigProperties(opts.commandConfig)
	if err != nil {
		return err
	}
	dialCtx, cancel := context.WithTimeout(ctx, mirrorsTimeout) // --watch has no overall timeout
	client, err := mirrord.Dial(dialCtx, opts.bootstrap, security)
	cancel()
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
		return listMirrors(ctx, client, opts, out)
	case "describe":
		if opts.watch {
			return watchMirrors(ctx, client, opts, out)
		}
		return describeMirrors(ctx, client, opts, out)
	}
	if opts.wait {
		return startAndWait(ctx, opts, out, func(out io.Writer) error { return changeMirrorTopics(ctx, client, opts, out) }) // mirrors_wait.go
	}
	return changeMirrorTopics(ctx, client, opts, out)
}

// commandConfigProperties reads --command-config (none: nil, PLAINTEXT):
// the security properties mirrord.Dial takes.
func commandConfigProperties(path string) (map[string]string, error) {
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
	return props, nil
}

func createMirror(ctx context.Context, admin mirrord.Admin, opts mirrorsOptions, out io.Writer) error {
	text, err := os.ReadFile(opts.mirrorConfig)
	if err != nil {
		return fmt.Errorf("--mirror-config: %w", err)
	}
	config, err := parseProperties(string(text))
	if err != nil {
		return fmt.Errorf("--mirror-config %s: %w", opts.mirrorConfig, err)
	}
	if err := admin.CreateMirror(ctx, opts.mirror, config); err != nil {
		return fmt.Errorf("create mirror %q: %w", opts.mirror, err)
	}
	_, err = fmt.Fprintf(out, "Created mirror %s.\n", opts.mirror)
	return err
}

func deleteMirror(ctx context.Context, admin mirrord.Admin, opts mirrorsOptions, out io.Writer) error {
	if err := admin.DeleteMirror(ctx, opts.mirror); err != nil {
		return fmt.Errorf("delete mirror %q: %w", opts.mirror, err)
	}
	_, err := fmt.Fprintf(out, "Deleted mirror %s.\n", opts.mirror)
	return err
}

// topicsChanges maps the topic-state actions to their changes.
var topicsChanges = map[string]mirrord.TopicsChange{
	"start":   mirrord.StartMirroring,
	"stop":    mirrord.StopMirroring,
	"pause":   mirrord.PauseMirroring,
	"resume":  mirrord.ResumeMirroring,
	"recover": mirrord.RecoverMirroring,
}

// topicSelection is the selection --topics and --exclude make: items
// that can only be topic names are names, the others patterns.
func topicSelection(opts mirrorsOptions) mirrord.TopicSelection {
	var selection mirrord.TopicSelection
	for _, item := range splitMirrorsList(opts.topics) {
		if isTopicName(item) {
			selection.Names = append(selection.Names, item)
		} else {
			selection.Include = append(selection.Include, item)
		}
	}
	selection.Exclude = splitMirrorsList(opts.exclude)
	return selection
}

func changeMirrorTopics(ctx context.Context, admin mirrord.Admin, opts mirrorsOptions, out io.Writer) error {
	results, err := admin.SetTopicsDesiredState(ctx, opts.mirror, topicsChanges[opts.action], topicSelection(opts))
	if err != nil {
		return fmt.Errorf("%s mirror %q: %w", opts.action, opts.mirror, err)
	}
	return printTopicResults(out, opts, results)
}

// topicsOutput is the --json document of a topic-state action.
type topicsOutput struct {
	Mirror string `json:"mirror"`
	Action string `json:"action"` // start, stop, pause, resume or recover
	// Topics are the topics named or matched, sorted by name; empty when
	// none matched.
	Topics []topicOutcome `json:"topics"`
}

// topicOutcome is one topic of a topic-state action.
type topicOutcome struct {
	Topic string `json:"topic"`
	// Status is "requested" (the desired state is stored; the partitions
	// walk to it), "stopped" (a stop answers once the topic is writable)
	// or "failed".
	Status string `json:"status"`
	Error  string `json:"error,omitempty"` // when failed
}

// printTopicResults prints one line per topic, or the --json document,
// and fails if any topic did.
func printTopicResults(out io.Writer, opts mirrorsOptions, results []mirrord.TopicResult) error {
	doc := topicsOutput{Mirror: opts.mirror, Action: opts.action, Topics: []topicOutcome{}}
	var failures []string
	for _, result := range results {
		outcome := topicOutcome{Topic: result.Topic, Status: "requested"}
		if opts.action == "stop" {
			outcome.Status = "stopped"
		}
		if result.Err != nil {
			outcome.Status, outcome.Error = "failed", oneLine(result.Err.Error())
			failures = append(failures, fmt.Sprintf("%s: %v", result.Topic, result.Err))
		}
		doc.Topics = append(doc.Topics, outcome)
	}
	if err := writeTopicResults(out, opts, doc); err != nil {
		return err
	}
	if len(failures) > 0 {
		return fmt.Errorf("%s: %d of %d topics failed (first: %s)", opts.action, len(failures), len(results), failures[0])
	}
	return nil
}

func writeTopicResults(out io.Writer, opts mirrorsOptions, doc topicsOutput) error {
	if opts.json {
		return writeJSON(out, doc)
	}
	if len(doc.Topics) == 0 {
		_, err := fmt.Fprintf(out, "Mirror %s: no topic matched (%s).\n", opts.mirror, opts.action)
		return err
	}
	for _, topic := range doc.Topics {
		status := opts.action + " requested"
		switch {
		case topic.Status == "failed":
			status = "failed: " + topic.Error
		case topic.Status == "stopped":
			status = "stopped: writable"
		}
		if _, err := fmt.Fprintf(out, "Mirror %s, topic %s: %s\n", opts.mirror, topic.Topic, status); err != nil {
			return err
		}
	}
	return nil
}

// writeJSON writes v as an indented JSON document.
func writeJSON(out io.Writer, v any) error {
	encoder := json.NewEncoder(out)
	encoder.SetIndent("", "  ")
	return encoder.Encode(v)
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

// listedMirror is one mirror of --list --json.
type listedMirror struct {
	Mirror          string   `json:"mirror"`
	SourceBootstrap string   `json:"sourceBootstrap"`
	SourceClusterID string   `json:"sourceClusterId"` // "" until the source has been reached
	TopicCount      int      `json:"topicCount"`
	Topics          []string `json:"topics"` // sorted
}

func listMirrors(ctx context.Context, admin mirrord.Admin, opts mirrorsOptions, out io.Writer) error {
	listings, err := admin.ListMirrors(ctx)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if opts.json {
		doc := struct {
			Mirrors []listedMirror `json:"mirrors"`
		}{[]listedMirror{}}
		for _, m := range listings {
			doc.Mirrors = append(doc.Mirrors, listedMirror{Mirror: m.Name, SourceBootstrap: m.SourceBootstrap, SourceClusterID: m.SourceClusterID,
				TopicCount: len(m.Topics), Topics: append([]string{}, m.Topics...)})
		}
		return writeJSON(out, doc)
	}
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(table, "MIRROR\tSOURCE\tSOURCE-CLUSTER-ID\tTOPICS")
	for _, m := range listings {
		fmt.Fprintf(table, "%s\t%s\t%s\t%d\n", m.Name, m.SourceBootstrap, dashIfEmpty(m.SourceClusterID), len(m.Topics))
	}
	return table.Flush()
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
