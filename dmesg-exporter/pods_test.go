package exporter_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	exporter "github.com/faultline-dev/faultline/dmesg-exporter"
	"github.com/faultline-dev/faultline/dmesg-exporter/podlogs"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/test/testenv"
)

func criLine(stream, tag, msg string) string {
	return fmt.Sprintf("%s %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, msg)
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestPodLogsPartialAndRotation: a training pod's log with partial (P) lines and a
// kubelet-style rotation (rename, new file) arrives in Loki whole and once, with
// the pod's identity as labels; a pod in an excluded namespace is not shipped.
func TestPodLogsPartialAndRotation(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Collector: true})
	dir := t.TempDir()
	k := newKmsgFile(t, dir)
	root := filepath.Join(dir, "pods")
	cdir := filepath.Join(root, "train_llm-0_6f1c2b7e-0000-4000-8000-000000000001", "trainer")
	skip := filepath.Join(root, "kube-system_coredns-1_6f1c2b7e-0000-4000-8000-000000000002", "coredns")
	for _, d := range []string{cdir, skip} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log0 := filepath.Join(cdir, "0.log")
	watchdog := "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE) ran for 600010 milliseconds before timing out."
	appendFile(t, log0, criLine("stdout", "F", "step 1 loss 2.5"))
	// A long line written in three partial pieces.
	appendFile(t, log0, criLine("stderr", "P", watchdog[:40])+criLine("stderr", "P", watchdog[40:90]))
	appendFile(t, filepath.Join(skip, "0.log"), criLine("stdout", "F", "coredns noise"))
	start(t, exporter.Config{Node: "n6", KmsgPath: k.path, BootIDPath: bootIDFile(t, dir, "3f2e1d9c-8b7a-4c5d-9e0f-0000000000e1"), BootTime: k.boot,
		StatePath: filepath.Join(dir, "state.json"), Sender: ship.NewOTLP(env.OTLPEndpoint(), ship.OTLPOptions{Gzip: true}),
		PodLogs: &podlogs.Config{Root: root, PollInterval: 20 * time.Millisecond, RescanInterval: 50 * time.Millisecond,
			ExcludeNamespaces: []string{"kube-system"}}})
	time.Sleep(200 * time.Millisecond)
	appendFile(t, log0, criLine("stderr", "F", watchdog[90:]))
	appendFile(t, log0, criLine("stdout", "F", "line before rotation"))
	// Rotation: the kubelet renames 0.log and the runtime opens a new 0.log.
	if err := os.Rename(log0, log0+".20250101-000000"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, log0+".20250101-000000", criLine("stdout", "F", "late write to the old file"))
	appendFile(t, log0, criLine("stdout", "F", "line after rotation"))
	want := []string{"step 1 loss 2.5", watchdog, "line before rotation", "late write to the old file", "line after rotation"}
	got := testenv.WaitLoki(t, env.LokiURL(), `{node="n6", source="pod"}`, len(want), 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	got = queryLoki(t, env.LokiURL(), `{node="n6", source="pod"}`)
	seen := map[string]int{}
	for _, e := range got {
		seen[e.Line]++
		if e.Labels["k8s_namespace_name"] != "train" || e.Labels["k8s_pod_name"] != "llm-0" || e.Labels["k8s_container_name"] != "trainer" {
			t.Errorf("labels %v", e.Labels)
		}
	}
	for _, w := range want {
		if seen[w] != 1 {
			t.Errorf("%q in Loki %d times", w, seen[w])
		}
	}
	if len(got) != len(want) {
		t.Errorf("Loki holds %d pod lines, want %d: %q", len(got), len(want), strings.Join(linesOf(got), " | "))
	}
}
