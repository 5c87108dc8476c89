package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/internal/cli"
)

func run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newRoot()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestScanJSONL checks the exact jsonl contract: these fields and no others, 1-based
// line numbers, the raw line as text, and the xid capture.
func TestScanJSONL(t *testing.T) {
	input := strings.Join([]string{
		"[  120.1] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
		"[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"Jul 06 20:02:59 gaming kernel: NVRM: Xid (PCI:0000:01:00): 13, pid=1773, name=x, Graphics Exception",
	}, "\n")
	out, err := run(t, input, "scan", "--format", "jsonl", "--year", "2025")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 matches, got %d:\n%s", len(lines), out)
	}
	var objs []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := []string{"action", "captures", "file", "line", "mode", "node", "pack", "rule", "severity", "text"}
		if _, ok := m["time"]; ok { // only lines with a calendar time have one
			want = []string{"action", "captures", "file", "line", "mode", "node", "pack", "rule", "severity", "text", "time"}
		}
		if !reflect.DeepEqual(keys, want) {
			t.Fatalf("fields %v, want %v", keys, want)
		}
		objs = append(objs, m)
	}
	a, b := objs[0], objs[1]
	if a["line"].(float64) != 2 || a["action"] != "taint" || a["severity"] != "critical" || a["pack"] != "nvidia-xid" || a["mode"] != "enforce" {
		t.Errorf("first match = %v", a)
	}
	if a["captures"].(map[string]any)["xid"] != "79" || !strings.HasPrefix(a["text"].(string), "[74889.644138] NVRM") {
		t.Errorf("first match = %v", a)
	}
	if b["line"].(float64) != 3 || b["action"] != "event" || b["captures"].(map[string]any)["xid"] != "13" {
		t.Errorf("second match = %v", b)
	}
	// The dmesg line names no host and has no calendar time; the syslog line has both.
	if a["node"] != "" || a["file"] != "-" || a["time"] != nil {
		t.Errorf("first match node/file/time = %v/%v/%v", a["node"], a["file"], a["time"])
	}
	if b["node"] != "gaming" || b["time"] != "2025-07-06T20:02:59Z" {
		t.Errorf("second match node/time = %v/%v", b["node"], b["time"])
	}
}

func TestScanTextAndErrors(t *testing.T) {
	f := filepath.Join(t.TempDir(), "kern.log")
	if err := os.WriteFile(f, []byte("NVRM: Xid (PCI:0000:3b:00): 48, DBE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "", "scan", f)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LINE", "nvidia-xid/xid-gpu-reset-required", "scanned 1 lines (1 without a time of their own); 1 rules matched", "MATCHES"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if _, err := run(t, "", "scan", filepath.Join(t.TempDir(), "missing.log")); err == nil {
		t.Error("missing file: no error")
	}
	if _, err := run(t, "", "scan", "--format", "xml"); err == nil {
		t.Error("bad format: no error")
	}
	if _, err := run(t, "", "scan", "--packs", "../../rules/testdata/bad/bad-regex.yaml"); err == nil || !strings.Contains(err.Error(), "bad-regex.yaml:13:16") {
		t.Errorf("bad pack: err = %v", err)
	}
}

func TestRulesTestAndLint(t *testing.T) {
	out, err := run(t, "", "rules", "test", "../../rules/packs")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, " passed, 0 failed") {
		t.Errorf("output: %s", out)
	}
	// A pack whose inline test is wrong must fail the run with exit status 1.
	dir := t.TempDir()
	pack := `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: wrong}
spec:
  rules:
    - id: r
      match: {regex: 'Link (?P<state>down)'}
      severity: warning
      action: event
      tests:
        - line: "eth0: Link down"
          expect: {captures: {state: up}}
`
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(pack), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "", "rules", "test", dir)
	var ee cli.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(out, `capture state: want "up", got "down"`) {
		t.Errorf("err = %v, out = %s", err, out)
	}
	out, err = run(t, "", "rules", "lint", "../../rules/packs")
	if err != nil || !strings.Contains(out, "rules enabled") {
		t.Errorf("lint: %v\n%s", err, out)
	}
}

// TestScanFailOnExitCodes: the exit status a prolog or epilogue reads.
func TestScanFailOnExitCodes(t *testing.T) {
	xid79 := "[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
	xid13 := "Jul 06 20:02:59 gaming kernel: NVRM: Xid (PCI:0000:01:00): 13, pid=1773, name=x, Graphics Exception\n"
	quiet := "[  120.1] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
	cases := []struct {
		input, failOn string
		want          int
	}{
		{xid79, "taint", 2},
		{xid13, "taint", 0},
		{xid13, "event", 2},
		{xid13, "warning", 2}, // application Xid: a warning event
		{quiet, "warning", 0},
		{xid79, "", 0},
	}
	for _, c := range cases {
		args := []string{"scan", "--format", "jsonl"}
		if c.failOn != "" {
			args = append(args, "--fail-on", c.failOn)
		}
		_, err := run(t, c.input, args...)
		code := 0
		var ee cli.ExitError
		if errors.As(err, &ee) {
			code = ee.Code
		} else if err != nil {
			t.Fatalf("%s: %v", c.failOn, err)
		}
		if code != c.want {
			t.Errorf("--fail-on %q on %q: exit %d, want %d", c.failOn, c.input, code, c.want)
		}
	}
	for _, bad := range [][]string{{"--fail-on", "always"}, {"--node-from", "ip"}} {
		if _, err := run(t, "", append([]string{"scan"}, bad...)...); err == nil || errors.As(err, new(cli.ExitError)) {
			t.Errorf("scan %v: err = %v, want a usage error (exit 1)", bad, err)
		}
	}
}

// TestScanShowsMode: the text table has a MODE column with each rule's mode as its
// pack sets it: the Xid rule enforces, the training-pods pack starts in annotate.
func TestScanShowsMode(t *testing.T) {
	input := strings.Join([]string{
		"[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"[rank5]: RuntimeError: CUDA error: uncorrectable ECC error encountered",
	}, "\n")
	out, err := run(t, input, "scan")
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) < 3 || !strings.Contains(rows[0], "ACTION  MODE  ") {
		t.Fatalf("no MODE column after ACTION:\n%s", out)
	}
	want := map[string]string{"nvidia-xid/xid-gpu-lost": "enforce", "training-pods/cuda-ecc-uncorrectable": "annotate"}
	for rule, mode := range want {
		found := false
		for _, r := range rows[1:] {
			f := strings.Fields(r)
			if len(f) > 5 && f[5] == rule {
				found = true
				if f[4] != mode {
					t.Errorf("%s: mode %s, want %s:\n%s", rule, f[4], mode, r)
				}
			}
		}
		if !found {
			t.Errorf("no row for %s:\n%s", rule, out)
		}
	}
}
