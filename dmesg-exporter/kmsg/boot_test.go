package kmsg

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestBootTimeFromStat(t *testing.T) {
	got, err := BootTimeFromStat(filepath.Join("testdata", "proc-stat"))
	if err != nil || !got.Equal(time.Unix(1062191376, 0)) {
		t.Errorf("BootTimeFromStat = %v, %v", got, err)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"none": "cpu 1 2 3\n", "bad": "btime soon\n", "negative": "btime -5\n"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := BootTimeFromStat(p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := BootTimeFromStat(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestBootTime(t *testing.T) {
	got, err := BootTime()
	if err != nil {
		t.Fatal(err)
	}
	if got.After(time.Now()) {
		t.Errorf("boot time %v is in the future", got)
	}
	if got != got.Round(0) {
		t.Error("boot time carries a monotonic reading")
	}
	// The kernel's own btime is whole seconds of the same quantity.
	stat, err := BootTimeFromStat(DefaultStatPath)
	if err != nil {
		t.Skipf("no %s: %v", DefaultStatPath, err)
	}
	if d := got.Sub(stat); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("BootTime %v differs from btime %v by %v", got, stat, d)
	}
}

func TestReadBootID(t *testing.T) {
	id, err := ReadBootID(filepath.Join("testdata", "boot_id"))
	if err != nil || id != "6f0d6e5c-1f4b-4a8e-9d2b-8a3c1e2f4d5a" {
		t.Errorf("ReadBootID = %q, %v", id, err)
	}
	if _, err := ReadBootID(filepath.Join("testdata", "boot_id.bad")); err == nil {
		t.Error("a malformed boot id was accepted")
	}
	if _, err := ReadBootID(filepath.Join("testdata", "missing")); err == nil {
		t.Error("a missing file was accepted")
	}
	if _, err := os.Stat(DefaultBootIDPath); err != nil {
		t.Skipf("no %s", DefaultBootIDPath)
	}
	a, err := ReadBootID("")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ReadBootID(DefaultBootIDPath)
	if a != b {
		t.Errorf("default path: %q vs %q", a, b)
	}
}
