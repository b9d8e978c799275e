// Command mirrord is the mirrord daemon and CLI, built on the embedding
// API (the module root, package mirrord). See README.md.
//
//	mirrord demo [--seconds N] [--log-format text|json]   live mirroring demo ending in a failover
//	mirrord serve --data-dir DIR --listen HOST:PORT [--http-listen HOST:PORT] [--log-format text|json]
//	mirrord mirrors --bootstrap-server HOST:PORT ACTION [options]   mirror administration
//	mirrord nodes --etcd-endpoints HOST:PORT,... [--drain N | --undrain N] [--json]   a cluster's nodes
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `usage: mirrord <command> [options]

commands:
  demo      a source node, a load generator and a mirror node in one process, mirroring live,
            ending with a failover (the mirror takes the writes)
  serve     the Kafka-protocol node: --data-dir DIR --listen HOST:PORT [--http-listen HOST:PORT] [--advertise HOST:PORT]
            [--config server.properties] [--log-format text|json] (mirrord serve --help)
  mirrors   mirror administration: --bootstrap-server HOST:PORT and one of --create --start --stop
            --pause --resume --recover --delete --list --describe (mirrord mirrors --help)
  nodes     a cluster's nodes, read from its etcd: --etcd-endpoints HOST:PORT,... [--json];
            --drain N moves node N's leaderships away before maintenance, --undrain N clears the mark
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch command, args := os.Args[1], os.Args[2:]; command {
	case "demo":
		err = runMirrorDemo(args)
	case "serve":
		err = runServe(args)
	case "mirrors":
		err = runMirrors(args)
	case "nodes":
		err = runNodes(args)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		err = fmt.Errorf("unknown command %q\n%s", command, usage)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // the command's flags were printed
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mirrord: %v\n", err)
		os.Exit(1)
	}
}
