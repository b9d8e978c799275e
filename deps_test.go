// The dependency direction of STYLE.md, enforced:
//
//	cmd -> mirrord (the module root: the embedding API) -> engine -> broker -> {netio, logstore} -> epoch -> recordbatch
//
// engine is the replication engine (mirrors, __mirror_state, the machine's
// owner); broker is the Kafka node it writes into, which knows nothing of
// mirrors (it imports neither engine, engine/mirrorstate nor mirrorwire)
// beyond a read-only mark on a partition.
//
// plus the leaf packages (recordbatch, recordbatch/records, vfs, and
// mirrorwire, whose only imports outside the standard library are kbin and
// kmsg, and broker/group, the group coordinator, which adds kerr). netio knows nothing of
// logstore, engine or vfs; epoch and engine/mirrorstate (the partition
// state machine) do no I/O; nothing imports cmd/ or bench/.
package mirrord_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/mirrord/mirrord"

// allowed lists, per package (relative to the module), the module packages
// it may import directly. A package missing here may not exist.
var allowed = map[string][]string{
	"":                    {"auth", "cluster", "console", "engine", "engine/mirrorstate", "logstore", "mirrorwire", "netio", "recordbatch/records", "vfs"}, // the embedding API
	"recordbatch":         {},
	"recordbatch/records": {"recordbatch"},
	"vfs":                 {},
	"epoch":               {"recordbatch"},
	"logstore":            {"epoch", "recordbatch", "recordbatch/records", "vfs"},
	"mirrorwire":          {},
	"acl":                 {"auth"}, // Kafka's ACLs and the authorizer; its Store does the I/O
	"auth":                {"vfs"},  // principals, PEM stores, SASL mechanisms and their credentials
	"netio":               {"acl", "auth", "epoch", "recordbatch", "mirrorwire"},
	"engine/mirrorstate":  {"recordbatch"},
	"engine/fetchwire":    {}, // reads Fetch responses in place: kbin, no I/O
	"broker/group":        {}, // the classic group coordinator: kmsg in, kmsg out, a Store it declares
	"broker":              {"acl", "auth", "broker/group", "netio", "logstore", "epoch", "recordbatch", "recordbatch/records", "vfs"},
	"engine":              {"acl", "auth", "broker", "cluster", "engine/fetchwire", "engine/mirrorstate", "netio", "logstore", "epoch", "recordbatch", "recordbatch/records", "vfs", "mirrorwire"},
	"bench":               {"acl", "auth", "engine", "netio", "logstore", "epoch", "recordbatch", "recordbatch/records", "vfs", "kafkatest", "mirrordtest", "mirrorwire"},
	"cluster":             {},                                                  // the control plane on etcd: registry, controller election, placement, metadata cache
	"cluster/etcdtest":    {},                                                  // starts an embedded etcd cluster in a test process
	"console":             {"broker", "engine", "engine/mirrorstate", "netio"}, // the web console: reads a node, changes nothing
	"cmd/mirrord":         {""},                                                // the daemon and CLI, built on the embedding API alone (its tests may use more)
	"kafkatest":           {},                                                  // starts real Kafka brokers for e2e and bench; imports nothing of the module
	"mirrordtest":         {},                                                  // runs mirrord as a process for e2e and bench; imports nothing of the module

	"mirrordtest/faultproxy": {},                                                     // a Kafka-framing TCP proxy that injects faults; imports nothing of the module
	"e2e":                    {"kafkatest", "mirrordtest", "mirrordtest/faultproxy"}, // test-only: drives mirrord as a process
	"deploy":                 {"mirrordtest"},                                        // test-only: checks deploy/ with promtool and systemd-analyze
}

// noIO lists packages that must not touch files or the network.
var noIO = map[string][]string{
	"epoch":               {"os", "net", "syscall", "io/fs", "golang.org/x/sys/unix"},
	"recordbatch":         {"os", "net", "syscall", "io/fs", "golang.org/x/sys/unix"},
	"recordbatch/records": {"os", "net", "syscall", "io/fs", "golang.org/x/sys/unix"},
	"mirrorwire":          {"os", "net", "syscall", "io/fs", "golang.org/x/sys/unix"},
	"engine/mirrorstate":  {"os", "net", "syscall", "io/fs", "golang.org/x/sys/unix"},
	"engine/fetchwire":    {"os", "net", "syscall", "io/fs", "golang.org/x/sys/unix"},
	"broker/group":        {"os", "net", "syscall", "io/fs", "golang.org/x/sys/unix"}, // its Store does the I/O
}

// externalOnly lists, per package, the only packages outside the standard
// library it may import.
var externalOnly = map[string][]string{
	"mirrorwire":         {"github.com/twmb/franz-go/pkg/kbin", "github.com/twmb/franz-go/pkg/kmsg"},
	"engine/mirrorstate": {}, // the standard library alone
	"engine/fetchwire":   {"github.com/twmb/franz-go/pkg/kbin"},
	"broker/group":       {"github.com/twmb/franz-go/pkg/kbin", "github.com/twmb/franz-go/pkg/kerr", "github.com/twmb/franz-go/pkg/kmsg"},
}

type goPackage struct {
	ImportPath string
	Imports    []string
}

func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	decoder := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p goPackage
		if err := decoder.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		seen++
		rules, ok := allowed[name]
		if !ok {
			t.Errorf("package %s has no entry in the dependency rules of deps_test.go", name)
			continue
		}
		for _, imported := range p.Imports {
			for _, banned := range noIO[name] {
				if imported == banned {
					t.Errorf("%s imports %s: it must do no I/O", name, imported)
				}
			}
			target, internal := strings.CutPrefix(imported, module+"/")
			if imported == module {
				target, internal = "", true
			}
			if only, ok := externalOnly[name]; ok && !internal && strings.Contains(strings.Split(imported, "/")[0], ".") && !contains(only, imported) {
				t.Errorf("%s imports %s: it may import only the standard library and %v", name, imported, only)
			}
			if !internal {
				continue
			}
			if !contains(rules, target) {
				t.Errorf("%s imports %s: not allowed by the dependency direction (allowed: %v)", name, target, rules)
			}
		}
	}
	if seen < len(allowed) {
		t.Errorf("go list showed %d module packages, the rules name %d", seen, len(allowed))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
