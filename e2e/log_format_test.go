package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// `mirrord serve --log-format json` logs one JSON object a line, every
// line of its run (start, each listener, the memory ceiling, a clean
// stop); an unknown format is refused, naming it.
func TestServeLogFormatJSON(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--log-format", "json")
	s.stop()
	text, err := os.ReadFile(s.proc.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	messages := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if strings.HasPrefix(line, "=== mirrordtest: ") {
			continue // the harness's line at each start
		}
		var event map[string]any
		if err := json.Unmarshal([]byte(line), &event); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", line, err)
		}
		msg, _ := event["msg"].(string)
		messages[msg] = event
	}
	for _, want := range []string{"node open", "memory ceiling", "serving", "stopped"} {
		if messages[want] == nil {
			t.Errorf("no %q line in the log:\n%s", want, text)
		}
	}
	if serving := messages["serving"]; serving != nil && (serving["listener"] != "PLAINTEXT" || serving["protocol"] != "PLAINTEXT" || serving["listen"] != s.proc.Addr()) {
		t.Errorf("serving line %v, want listener and protocol PLAINTEXT on %s", serving, s.proc.Addr())
	}

	out, err := exec.Command(mirrordBinary, "serve", "--data-dir", t.TempDir(), "--log-format", "xml").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `log format "xml"`) {
		t.Fatalf("--log-format xml: %v, %s", err, out)
	}
}
