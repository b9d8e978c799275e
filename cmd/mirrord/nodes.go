package main

// `mirrord nodes`: the nodes of a cluster, read from its etcd, and the
// drain mark an operator sets before maintenance. It reads etcd rather
// than a node, so it answers while nodes are down.
//
//	mirrord nodes --etcd-endpoints HOST:PORT,... [--json]            list the nodes
//	mirrord nodes --etcd-endpoints HOST:PORT,... --drain N [--wait-timeout 60s]
//	mirrord nodes --etcd-endpoints HOST:PORT,... --undrain N

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mirrord/mirrord"
)

func runNodes(args []string) error {
	return nodesCommand(args, os.Stdout)
}

func nodesCommand(args []string, out io.Writer) error {
	flags := flag.NewFlagSet("nodes", flag.ContinueOnError)
	endpoints := flags.String("etcd-endpoints", "", "the cluster's etcd, HOST:PORT,... (required)")
	drain := flags.Int("drain", -1, "mark node N drained: its leaderships move to other in-sync replicas and nothing new is placed on it; waits until it leads nothing")
	undrain := flags.Int("undrain", -1, "clear node N's drain mark")
	waitTimeout := flags.Duration("wait-timeout", time.Minute, "how long --drain waits for the node's leaderships to move")
	asJSON := flags.Bool("json", false, "the listing as JSON")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("nodes: unexpected argument %q", flags.Arg(0))
	}
	var etcd []string
	for _, e := range strings.Split(*endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			etcd = append(etcd, e)
		}
	}
	if len(etcd) == 0 {
		return errors.New("nodes: --etcd-endpoints is required")
	}
	if *drain >= 0 && *undrain >= 0 {
		return errors.New("nodes: --drain and --undrain are one at a time")
	}
	ctx, cancel := context.WithTimeout(context.Background(), mirrorsTimeout+*waitTimeout)
	defer cancel()
	switch {
	case *undrain >= 0:
		if err := mirrord.DrainNode(ctx, etcd, int32(*undrain), false); err != nil {
			return fmt.Errorf("nodes: %w", err)
		}
		_, err := fmt.Fprintf(out, "node %d: drain mark cleared (leaderships do not move back by themselves)\n", *undrain)
		return err
	case *drain >= 0:
		return drainNode(ctx, out, etcd, int32(*drain), *waitTimeout)
	}
	report, err := mirrord.ReadCluster(ctx, etcd)
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	if *asJSON {
		return writeJSON(out, report)
	}
	return printNodes(out, report)
}

// drainNode sets the mark and waits until the node leads nothing.
func drainNode(ctx context.Context, out io.Writer, etcd []string, id int32, wait time.Duration) error {
	if err := mirrord.DrainNode(ctx, etcd, id, true); err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		report, err := mirrord.ReadCluster(ctx, etcd)
		if err != nil {
			return fmt.Errorf("nodes: %w", err)
		}
		leads := 0
		for _, n := range report.Nodes {
			if n.ID == id {
				leads = n.Leaders
			}
		}
		if leads == 0 {
			_, err := fmt.Fprintf(out, "node %d drained: it leads no partition\n", id)
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes: node %d is marked drained but still leads %d partition(s) after %v: "+
				"they have no other live in-sync replica (replication factor 1, or the others are out of the ISR)", id, leads, wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

func printNodes(out io.Writer, r mirrord.ClusterReport) error {
	fmt.Fprintf(out, "Cluster %s: %d offline and %d under-replicated partition(s)\n", r.ClusterID, r.Offline, r.UnderReplicated)
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(table, "NODE\tADDRESS\tRACK\tSTATE\tCONTROLLER\tLEADERS\tREPLICAS")
	for _, n := range r.Nodes {
		address, rack, state, controller := "-", "-", "down", "-"
		if n.Live {
			address, state = fmt.Sprintf("%s:%d", n.Host, n.Port), "live"
		}
		if n.Rack != "" {
			rack = n.Rack
		}
		if n.Drained {
			state += ",drained"
		}
		if n.Controller {
			controller = "yes"
		}
		fmt.Fprintf(table, "%d\t%s\t%s\t%s\t%s\t%d\t%d\n", n.ID, address, rack, state, controller, n.Leaders, n.Replicas)
	}
	return table.Flush()
}
