package broker

// A topic's overrides on disk: one file per topic that has any,
// <data dir>/topic-configs/<topic>, replaced with logstore.WriteFileAtomic
// (a crash leaves the old or the new file, never a mix):
//
//	1                               format version
//	topic.id <topic ID>             the topic it belongs to
//	origin "<Go-quoted>"            who set them: "" a client, else the writer (a mirror's sync)
//	config <key> "<Go-quoted>"      zero or more, sorted by key
//
// Order against the partitions: CreateTopic writes the file before the
// partitions, DeleteTopic removes it after them, so a file without its
// topic (or naming another topic ID) is a crash's leftover that Open
// removes, and a topic never runs without the overrides it was created
// with.

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/mirrord/mirrord/logstore"
	rb "github.com/mirrord/mirrord/recordbatch"
)

const (
	topicConfigsDir     = "topic-configs"
	topicConfigsVersion = "1"
)

var errTopicConfigsFile = errors.New("broker: corrupt topic configs file")

// storedTopicConfigs is one topic's file.
type storedTopicConfigs struct {
	id        rb.TopicID
	origin    string
	overrides map[string]string
}

func encodeTopicConfigs(c storedTopicConfigs) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\ntopic.id %s\norigin %s\n", topicConfigsVersion, c.id, strconv.Quote(c.origin))
	keys := make([]string, 0, len(c.overrides))
	for key := range c.overrides {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		fmt.Fprintf(&b, "config %s %s\n", key, strconv.Quote(c.overrides[key]))
	}
	return b.Bytes()
}

func decodeTopicConfigs(data []byte) (storedTopicConfigs, error) {
	c := storedTopicConfigs{overrides: map[string]string{}}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 3 || lines[0] != topicConfigsVersion {
		return c, fmt.Errorf("%w: version or header missing", errTopicConfigsFile)
	}
	id, ok := strings.CutPrefix(lines[1], "topic.id ")
	var err error
	if c.id, err = rb.ParseTopicID(id); !ok || err != nil {
		return c, fmt.Errorf("%w: line 2: %q", errTopicConfigsFile, lines[1])
	}
	origin, ok := strings.CutPrefix(lines[2], "origin ")
	if c.origin, err = strconv.Unquote(origin); !ok || err != nil {
		return c, fmt.Errorf("%w: line 3: %q", errTopicConfigsFile, lines[2])
	}
	for i, line := range lines[3:] {
		rest, ok := strings.CutPrefix(line, "config ")
		key, quoted, found := strings.Cut(rest, " ")
		value, err := strconv.Unquote(quoted)
		if !ok || !found || err != nil {
			return c, fmt.Errorf("%w: line %d: %q", errTopicConfigsFile, i+4, line)
		}
		c.overrides[key] = value
	}
	return c, nil
}

// saveTopicConfigs writes a topic's overrides, or removes its file when
// there are none; durable when it returns.
func (n *Node) saveTopicConfigs(name string, c storedTopicConfigs) error {
	dir := path.Join(n.cfg.DataDir, topicConfigsDir)
	if len(c.overrides) == 0 && c.origin == "" {
		return n.removeTopicConfigs(name)
	}
	if err := n.cfg.FS.MkdirAll(dir); err != nil {
		return fmt.Errorf("broker: topic %s: save configs: %w", name, err)
	}
	if err := logstore.WriteFileAtomic(n.cfg.FS, dir, name, encodeTopicConfigs(c)); err != nil {
		return fmt.Errorf("broker: topic %s: save configs: %w", name, err)
	}
	return nil
}

// removeTopicConfigs removes a topic's file, if any, durably.
func (n *Node) removeTopicConfigs(name string) error {
	dir := path.Join(n.cfg.DataDir, topicConfigsDir)
	_, ok, err := logstore.ReadFile(n.cfg.FS, path.Join(dir, name))
	if err != nil || !ok {
		return err
	}
	if err := n.cfg.FS.Remove(path.Join(dir, name)); err != nil {
		return fmt.Errorf("broker: topic %s: remove configs: %w", name, err)
	}
	return n.cfg.FS.SyncDir(dir)
}

// loadTopicConfigs applies the stored overrides to the topics opened,
// and removes the files a crash left without their topic. n.mu need not
// be held: Open runs it before the node is shared.
func (n *Node) loadTopicConfigs() error {
	dir := path.Join(n.cfg.DataDir, topicConfigsDir)
	if err := n.cfg.FS.MkdirAll(dir); err != nil {
		return err
	}
	names, err := n.cfg.FS.List(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".tmp") { // a write that did not finish
			if err := n.cfg.FS.Remove(path.Join(dir, name)); err != nil {
				return err
			}
			continue
		}
		data, _, err := logstore.ReadFile(n.cfg.FS, path.Join(dir, name))
		if err != nil {
			return err
		}
		stored, err := decodeTopicConfigs(data)
		if err != nil {
			return fmt.Errorf("%w (%s)", err, path.Join(dir, name))
		}
		t, ok := n.topics[name]
		if !ok || t.id != stored.id {
			n.log.Info("removed the configs of a topic a crash left unfinished", "topic", name)
			if err := n.removeTopicConfigs(name); err != nil {
				return err
			}
			continue
		}
		overrides, settings, err := n.parseTopicConfigs(stored.overrides)
		if err != nil {
			return fmt.Errorf("broker: topic %s: stored configs: %w", name, err)
		}
		if err := t.apply(overrides, settings, stored.origin); err != nil {
			return err
		}
	}
	return nil
}
