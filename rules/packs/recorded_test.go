package packs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/scan"
	"github.com/faultline-dev/faultline/test/packengine"
)

// TestRecordedH200: what two healthy H200s (driver 580.159.04) printed, recorded by
// test/gpu/record.sh, fires no rule at warning or above and raises nothing, not even
// an Event (the driver's load, with the FBHUB interrupt it clears; nvidia-smi and
// nvidia-smi -q before and after load), and
// the Xid 31 a program's illegal address made fires xid-application alone: an Event,
// the job's error, no taint.
func TestRecordedH200(t *testing.T) {
	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	h200 := filepath.Join("..", "..", "active-probes", "checks", "testdata", "recorded", "h200")
	kmsg := filepath.Join("..", "..", "dmesg-exporter", "kmsg", "testdata")
	scanFile := func(path string) []scan.Match {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var out []scan.Match
		if err := scan.New(e, scan.Options{}).Scan(context.Background(), f, func(m scan.Match) error {
			out = append(out, m)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, path := range []string{
		filepath.Join(kmsg, "nvidia-580-open.kmsg"),
		filepath.Join(h200, "nvidia-smi-q.txt"),
		filepath.Join(h200, "nvidia-smi-q-after-dgemm.txt"),
		filepath.Join(h200, "nvidia-smi.txt"),
	} {
		for _, m := range scanFile(path) {
			if m.Severity == rules.SeverityWarning || m.Severity == rules.SeverityCritical || m.Action != rules.ActionNone {
				t.Errorf("%s:%d: healthy line fires %s/%s (%s, %s): %s", filepath.Base(path), m.Line, m.Pack, m.Rule, m.Severity, m.Action, m.Text)
			}
		}
	}
	var fired []string
	for _, m := range scanFile(filepath.Join(kmsg, "nvidia-580-xid31.kmsg")) {
		if m.Severity == rules.SeverityWarning || m.Severity == rules.SeverityCritical || m.Action != rules.ActionNone {
			fired = append(fired, m.Pack+"/"+m.Rule+" "+string(m.Action))
		}
	}
	if len(fired) != 1 || fired[0] != "nvidia-xid/xid-application event" {
		t.Errorf("the recorded Xid 31 fires %q, want nvidia-xid/xid-application event alone", fired)
	}
}
