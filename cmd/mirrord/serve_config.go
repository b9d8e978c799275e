package main

// `mirrord serve --config server.properties`: the node's settings by
// Kafka's broker config names (broker.Config.ApplyServerProperties has
// the list and refuses the rest by name). The listener and data
// directory keys a Kafka file has are used as the flags they match:
// listeners (one PLAINTEXT listener) as --listen, advertised.listeners as
// --advertise, log.dirs or log.dir (one directory) as --data-dir. A flag
// given on the command line wins over the file: --message-max-bytes over
// message.max.bytes, --transaction-max-timeout-ms over
// transaction.max.timeout.ms, and so on.

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/mirrord/mirrord/engine"
)

// serveFile is what serve takes from its config file.
type serveFile struct {
	props                      map[string]string // the broker configs
	listen, advertise, dataDir string            // "" when the file has none
	// mirrorConfigFilesDir is mirror.config.files.dir: the directory the
	// ssl.*.location files of mirror configs must lie in; "" anywhere.
	mirrorConfigFilesDir string
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
	var err error
	if f.listen, err = takeListener(props, "listeners"); err != nil {
		return f, err
	}
	if f.advertise, err = takeListener(props, "advertised.listeners"); err != nil {
		return f, err
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
	names := engine.ServerPropertyNames()
	flags.Visit(func(fl *flag.Flag) {
		if name := strings.ReplaceAll(fl.Name, "-", "."); slices.Contains(names, name) {
			props[name] = fl.Value.String()
		}
	})
	f.props = props
	return f, nil
}

// takeListener takes a listener key of one PLAINTEXT listener and returns
// its HOST:PORT.
func takeListener(props map[string]string, key string) (string, error) {
	value, ok := props[key]
	if !ok {
		return "", nil
	}
	delete(props, key)
	name, address, found := strings.Cut(strings.TrimSpace(value), "://")
	if !found || strings.Contains(address, ",") || name != "PLAINTEXT" {
		return "", fmt.Errorf("serve: --config: %s %q: mirrord serves one PLAINTEXT listener (PLAINTEXT://HOST:PORT)", key, value)
	}
	return address, nil
}
