// Package deploy holds what an operator deploys beside mirrord, checked
// here: the Prometheus alert rules (promtool check rules, and their unit
// tests with promtool test rules), the Grafana dashboard (its structure,
// and every PromQL expression parsed by promtool as a recording rule), the
// systemd unit (systemd-analyze verify where present, and its keys) and
// the sample configs' agreement with the unit.
//
// promtool comes from $MIRRORD_PROMTOOL, .cache/bin/promtool
// (scripts/install-promtool.sh, run by `make tools`) or PATH; without it
// the promtool tests fail under CI=true and skip elsewhere.
//
// e2e/deploy_samples_test.go loads the sample configs into a live node and
// checks that every metric named here is exported.
package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrordtest"
)

// toolWait bounds each run of promtool or systemd-analyze.
const toolWait = 2 * time.Minute

// findPromtool returns the promtool to run: $MIRRORD_PROMTOOL, then
// .cache/bin/promtool (scripts/install-promtool.sh), then PATH.
func findPromtool(t *testing.T) string {
	t.Helper()
	return mirrordtest.Tool(t, "promtool", "MIRRORD_PROMTOOL", "scripts/install-promtool.sh")
}

// run runs a tool bounded in time and returns its combined output; a
// non-zero exit fails the test with that output.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestAlertRulesCheck(t *testing.T) {
	promtool := findPromtool(t)
	out := run(t, "prometheus", promtool, "check", "rules", "mirrord-alerts.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules: %s", out)
	}
}

func TestAlertRulesUnitTests(t *testing.T) {
	promtool := findPromtool(t)
	out := run(t, "prometheus", promtool, "test", "rules", "mirrord-alerts.test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %s", out)
	}
}

// alertRule is an alert of mirrord-alerts.yml as read line by line (the
// standard library has no YAML; promtool checks the syntax).
type alertRule struct {
	name, expr string
	keys       map[string]bool // severity, summary, description, for, ...
}

// readAlertRules reads the alerts of a rules file: each `- alert:` item
// and the keys indented under it.
func readAlertRules(t *testing.T, path string) []alertRule {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []alertRule
	key := regexp.MustCompile(`^\s+([a-z_]+):\s*(.*)$`)
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert:"); ok {
			rules = append(rules, alertRule{name: strings.TrimSpace(name), keys: map[string]bool{}})
			continue
		}
		if len(rules) == 0 || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if m := key.FindStringSubmatch(line); m != nil {
			r := &rules[len(rules)-1]
			r.keys[m[1]] = true
			if m[1] == "expr" {
				r.expr = m[2]
			}
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return rules
}

// Every alert says how bad it is and what to do, names the mirror,
// topic and partition its expression has, and has a unit test.
func TestAlertRulesAnnotated(t *testing.T) {
	rules := readAlertRules(t, filepath.Join("prometheus", "mirrord-alerts.yml"))
	if len(rules) < 6 {
		t.Fatalf("%d alerts, want the six kinds at least", len(rules))
	}
	tests, err := os.ReadFile(filepath.Join("prometheus", "mirrord-alerts.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join("prometheus", "mirrord-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		for _, k := range []string{"expr", "severity", "summary", "description"} {
			if !r.keys[k] {
				t.Errorf("alert %s has no %s", r.name, k)
			}
		}
		if !strings.Contains(string(tests), "alertname: "+r.name+"\n") {
			t.Errorf("alert %s has no unit test in mirrord-alerts.test.yml", r.name)
		}
		block := alertBlock(string(text), r.name)
		for _, label := range []string{"mirror", "topic", "partition"} {
			if strings.Contains(r.expr, "mirrord_mirror_") && label == "mirror" || strings.Contains(r.expr, "mirrord_mirror_lag_") && label != "mirror" {
				if !strings.Contains(block, "{{ $labels."+label+" }}") {
					t.Errorf("alert %s: its annotations do not name the %s", r.name, label)
				}
			}
		}
	}
}

// alertBlock is the text of one alert's item.
func alertBlock(text, name string) string {
	_, rest, _ := strings.Cut(text, "- alert: "+name+"\n")
	block, _, _ := strings.Cut(rest, "- alert: ")
	return block
}

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	ID         int               `json:"id"`
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	Datasource map[string]string `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		RefID      string            `json:"refId"`
		Expr       string            `json:"expr"`
		Datasource map[string]string `json:"datasource"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("grafana", "mirrord.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(text, &d); err != nil {
		t.Fatalf("grafana/mirrord.json: %v", err)
	}
	return d
}

// dashboardPanels are the dashboard's panels, those of collapsed rows
// included, rows aside.
func (d dashboard) panels() []dashboardPanel {
	var out []dashboardPanel
	for _, p := range d.Panels {
		if p.Type == "row" {
			out = append(out, p.Panels...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// The dashboard's variables are the data source and the mirror (and the
// node); every panel queries through $datasource, has targets, fits the
// 24-column grid and has an ID of its own.
func TestDashboardStructure(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Fatalf("dashboard title %q uid %q", d.Title, d.UID)
	}
	variables := map[string]string{}
	for _, v := range d.Templating.List {
		variables[v.Name] = v.Type
	}
	if variables["datasource"] != "datasource" || variables["mirror"] != "query" {
		t.Fatalf("variables %v: want datasource (type datasource) and mirror (type query)", variables)
	}
	ids := map[int]string{}
	panels := d.panels()
	if len(panels) < 15 {
		t.Fatalf("%d panels", len(panels))
	}
	for _, p := range panels {
		if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q have ID %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: no title or no targets", p.ID, p.Title)
		}
		if p.Datasource["uid"] != "${datasource}" {
			t.Errorf("panel %q: data source %v, want ${datasource}", p.Title, p.Datasource)
		}
		if p.GridPos.W < 1 || p.GridPos.H < 1 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		refs := map[string]bool{}
		for _, target := range p.Targets {
			if target.Expr == "" || target.RefID == "" || refs[target.RefID] {
				t.Errorf("panel %q: target %q with expr %q: empty or repeated", p.Title, target.RefID, target.Expr)
			}
			refs[target.RefID] = true
		}
	}
	if _, ok := d.Templating.List[0].Query.(string); !ok {
		t.Errorf("the datasource variable's query %v, want the plugin name", d.Templating.List[0].Query)
	}
}

// grafanaVariables stand for Grafana's variables where promtool parses
// an expression.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"$instance", ".*", "$mirror", ".*")

// Every expression of the dashboard (and of its variables' queries,
// label_values aside) parses as PromQL: promtool checks them as the
// recording rules of a temporary rules file.
func TestDashboardExpressionsParse(t *testing.T) {
	promtool := findPromtool(t)
	d := readDashboard(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range d.panels() {
		for _, target := range p.Targets {
			expr := grafanaVariables.Replace(target.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q target %s: a variable the test does not know: %s", p.Title, target.RefID, target.Expr)
			}
			quoted, _ := json.Marshal(expr) // a JSON string is a YAML double-quoted scalar
			fmt.Fprintf(&rules, "      - record: dashboard:panel_%d_%s\n        expr: %s\n", p.ID, target.RefID, quoted)
			n++
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, "", promtool, "check", "rules", path)
	if want := fmt.Sprintf("SUCCESS: %d rules found", n); !strings.Contains(out, want) {
		t.Fatalf("promtool check rules on the dashboard's %d expressions: %s", n, out)
	}
}

// A broken expression is refused: the check above can fail.
func TestDashboardExpressionCheckRefusesBadPromQL(t *testing.T) {
	promtool := findPromtool(t)
	path := filepath.Join(t.TempDir(), "bad.yml")
	bad := `groups:
  - name: dashboard
    rules:
      - record: dashboard:bad
        expr: "sum by (mirror (mirrord_mirror_lag_seconds)"
`
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), toolWait)
	defer cancel()
	if out, err := exec.CommandContext(ctx, promtool, "check", "rules", path).CombinedOutput(); err == nil {
		t.Fatalf("promtool check rules passed an expression that does not parse: %s", out)
	}
}

// unit is a systemd unit file: section -> key -> values (a key may repeat).
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	for i, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.TrimSpace(key) == "" {
				t.Fatalf("%s:%d: %q is not KEY=VALUE in a section", path, i+1, line)
			}
			u[section][strings.TrimSpace(key)] = append(u[section][strings.TrimSpace(key)], strings.TrimSpace(value))
		}
	}
	return u
}

func (u unit) get(section, key string) string {
	values := u[section][key]
	if len(values) == 0 {
		return ""
	}
	return values[len(values)-1]
}

// readProperties reads the key=value lines of a Java properties sample
// (no continuation lines in the samples).
func readProperties(t *testing.T, path string) map[string]string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{}
	for _, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		key, value, _ := strings.Cut(line, "=")
		props[strings.TrimSpace(key)] = strings.TrimSpace(value)
	}
	return props
}

// The unit runs serve on the sample's path, restarts on failure, runs as
// its own user with a state directory that is the sample's log.dirs,
// gives the file cache its descriptors and a clean close its time.
func TestSystemdUnit(t *testing.T) {
	path := filepath.Join("systemd", "mirrord.service")
	u := parseUnit(t, path)
	for _, section := range []string{"Unit", "Service", "Install"} {
		if u[section] == nil {
			t.Fatalf("no [%s] section", section)
		}
	}
	exec := u.get("Service", "ExecStart")
	if !strings.Contains(exec, "/mirrord serve --config /etc/mirrord/server.properties") || !strings.HasPrefix(exec, "/") {
		t.Errorf("ExecStart=%s", exec)
	}
	if got := u.get("Service", "Restart"); got != "on-failure" {
		t.Errorf("Restart=%s", got)
	}
	if u.get("Service", "User") == "" && u.get("Service", "DynamicUser") != "yes" {
		t.Error("no User= nor DynamicUser=yes: the unit would run as root")
	}
	server := readProperties(t, "server.properties")
	if state := u.get("Service", "StateDirectory"); state == "" || server["log.dirs"] != "/var/lib/"+state {
		t.Errorf("StateDirectory=%s, server.properties log.dirs=%s: want /var/lib/<StateDirectory>", state, server["log.dirs"])
	}
	// log.open.files.max defaults to half of RLIMIT_NOFILE: the sample's
	// value fits in half, leaving the rest to connections and active segments.
	files, err := strconv.Atoi(u.get("Service", "LimitNOFILE"))
	openMax, err2 := strconv.Atoi(server["log.open.files.max"])
	if err != nil || err2 != nil || files < 2*openMax || files < 2048 {
		t.Errorf("LimitNOFILE=%s with log.open.files.max=%s: want at least twice it and 2048", u.get("Service", "LimitNOFILE"), server["log.open.files.max"])
	}
	stop, err := time.ParseDuration(strings.TrimSuffix(u.get("Service", "TimeoutStopSec"), "s") + "s")
	if err != nil || stop < time.Minute {
		t.Errorf("TimeoutStopSec=%s: want a minute at least for a clean close", u.get("Service", "TimeoutStopSec"))
	}
	for _, key := range []string{"NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp"} {
		if u.get("Service", key) == "" || u.get("Service", key) == "no" {
			t.Errorf("%s is not set: the unit is not hardened", key)
		}
	}
	if u.get("Install", "WantedBy") == "" {
		t.Error("no WantedBy=: systemctl enable would do nothing")
	}
}

// systemd-analyze verify, where present, on a copy whose ExecStart names
// an executable that exists here (verify checks it).
func TestSystemdUnitVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found: TestSystemdUnit checked the unit's keys")
	}
	text, err := os.ReadFile(filepath.Join("systemd", "mirrord.service"))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copied := strings.ReplaceAll(string(text), "/usr/local/bin/mirrord ", self+" ")
	if copied == string(text) {
		t.Fatal("ExecStart does not run /usr/local/bin/mirrord")
	}
	path := filepath.Join(t.TempDir(), "mirrord.service")
	if err := os.WriteFile(path, []byte(copied), 0o644); err != nil {
		t.Fatal(err)
	}
	// Its warnings about this unit fail the test; those about the
	// machine's own units (a container's odd targets) do not.
	for line := range strings.SplitSeq(run(t, "", analyze, "verify", path), "\n") {
		if strings.Contains(line, "mirrord.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}
