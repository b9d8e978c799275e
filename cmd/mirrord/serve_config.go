package main

// `mirrord serve --config server.properties`: the node's settings by
// Kafka's broker config names (broker.Config.ApplyServerProperties has
// the list and refuses the rest by name). The listener keys make the
// node's listeners (serve_listeners.go); log.dirs or log.dir (one
// directory) is --data-dir. A flag
// given on the command line wins over the file: --message-max-bytes over
// message.max.bytes, --transaction-max-timeout-ms over
// transaction.max.timeout.ms, and so on.

import (
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/mirrord/mirrord/engine"
)

// serveFile is what serve takes from its config file.
type serveFile struct {
	props     map[string]string // the broker configs
	listeners []serveListener
	dataDir   string // "" when the file has none
	// mirrorConfigFilesDir is mirror.config.files.dir: the directory the
	// ssl.*.location files of mirror configs must lie in; "" anywhere.
	mirrorConfigFilesDir string
	// logDirReserveBytes is log.dir.reserve.bytes (mirrord's own; 0: the
	// default, broker.Config.LogDirReserveBytes; "0" in the file: none).
	logDirReserveBytes int64
	// openFilesMax and indexCacheBytesMax are log.open.files.max and
	// log.index.cache.max.bytes (mirrord's own; 0: logstore's defaults).
	openFilesMax       int
	indexCacheBytesMax int64
}

// readServeConfig reads a server.properties and overlays the flags set on
// the command line that are broker configs.
func readServeConfig(path string, flags *flag.FlagSet) (serveFile, error) {
	var f serveFile
	props := map[string]string{}
	if path != "" {
		text, err := os.ReadFile(path)
		if err != nil {
			return f, fmt.Errorf("serve: --config: %w", err)
		}
		if props, err = parseProperties(string(text)); err != nil {
			return f, fmt.Errorf("serve: --config %s: %w", path, err)
		}
	}
	for _, key := range []string{"log.dirs", "log.dir"} {
		if dirs, ok := props[key]; ok {
			if strings.Contains(dirs, ",") {
				return f, fmt.Errorf("serve: --config: %s %q: mirrord keeps one data directory", key, dirs)
			}
			f.dataDir = strings.TrimSpace(dirs)
			delete(props, key)
		}
	}
	if dir, ok := props["mirror.config.files.dir"]; ok {
		f.mirrorConfigFilesDir = strings.TrimSpace(dir)
		delete(props, "mirror.config.files.dir")
	}
	if value, ok := props["log.dir.reserve.bytes"]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil || n < 0 {
			return f, fmt.Errorf("serve: --config: log.dir.reserve.bytes %q: want a number of bytes >= 0", value)
		}
		f.logDirReserveBytes = n
		if n == 0 {
			f.logDirReserveBytes = -1 // none
		}
		delete(props, "log.dir.reserve.bytes")
	}
	for key, set := range map[string]func(int64){
		"log.open.files.max":        func(n int64) { f.openFilesMax = int(min(n, math.MaxInt32)) },
		"log.index.cache.max.bytes": func(n int64) { f.indexCacheBytesMax = n },
	} {
		if value, ok := props[key]; ok {
			n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil || n < 1 {
				return f, fmt.Errorf("serve: --config: %s %q: want a number >= 1", key, value)
			}
			set(n)
			delete(props, key)
		}
	}
	names := engine.ServerPropertyNames()
	flags.Visit(func(fl *flag.Flag) {
		if name := strings.ReplaceAll(fl.Name, "-", "."); slices.Contains(names, name) {
			props[name] = fl.Value.String()
		}
	})
	var err error
	if f.listeners, err = takeListeners(props, flags); err != nil {
		return f, err
	}
	f.props = props
	return f, nil
}
