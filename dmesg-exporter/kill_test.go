package exporter_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/kmsg"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestKillMidStream: the exporter process is killed with SIGKILL while shipping (no
// chance to flush) and started again: every line is in Loki exactly once. Lines
// acknowledged before the kill are not sent again (the position is saved after each
// acknowledgement); a batch in flight at the kill may be sent twice, and Loki drops
// the exact duplicate (same stream, timestamp and line).
func TestKillMidStream(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Loki: true})
	bin := testenv.BuildFaultline(t)
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	boot, err := kmsg.BootTime()
	if err != nil {
		t.Fatal(err)
	}
	k.boot = boot // the process converts with the machine's own boot time
	statePath := filepath.Join(dir, "state.json")
	bootID := bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000d1")
	var msgs []string
	for i := 0; i < 2000; i++ {
		msgs = append(msgs, fmt.Sprintf("NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=python, Graphics Exception #%04d", 1000+i, i))
	}
	k.write(4, msgs[:1000]...)
	run := func() *exec.Cmd {
		cmd := exec.Command(bin, "dmesg-exporter", "--node", "n5", "--kmsg-path", k.path, "--boot-id-path", bootID,
			"--state-file", statePath, "--loki-url", env.LokiURL(), "--listen", "127.0.0.1:0", "--batch-size", "50", "--batch-wait", "50ms")
		cmd.Stderr = &testWriter{t: t, prefix: "exporter: "}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	p := run()
	eventually.True(t, 30*time.Second, "200 records acknowledged", func() bool { return acked(statePath) >= 200 })
	_ = p.Process.Kill()
	_ = p.Wait()
	t.Logf("killed after %d of 1000 lines were acknowledged", acked(statePath))
	k.write(4, msgs[1000:]...)
	p = run()
	defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	got := testenv.WaitLoki(t, env.LokiURL(), `{node="n5"}`, 2000, 60*time.Second)
	time.Sleep(time.Second)
	got = queryLoki(t, env.LokiURL(), `{node="n5"}`)
	seen := map[string]int{}
	for _, e := range got {
		seen[e.Line]++
	}
	for _, m := range msgs {
		if seen[m] != 1 {
			t.Fatalf("%q in Loki %d times (total %d lines)", m, seen[m], len(got))
		}
	}
	if len(got) != 2000 {
		t.Fatalf("Loki holds %d lines, want 2000", len(got))
	}
}

type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	if os.Getenv("FAULTLINE_TEST_VERBOSE") != "" {
		w.t.Log(w.prefix + string(p))
	}
	return len(p), nil
}
