package controller_test

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/test/testenv"
)

// TestKillLeaderMidStream: the leading controller process is killed with SIGKILL (no
// chance to save its last position) while lines keep arriving; a second process takes
// over: every Xid 79 line taints its node, and no fault is decided twice (at most one
// FaultTainted Event per node). Events are sent in the background by client-go's
// recorder, so the Events of the last decisions before the kill may be lost; the taint
// and its evidence annotation are not.
func TestKillLeaderMidStream(t *testing.T) {
	var nodes []string
	for i := 0; i < 16; i++ {
		nodes = append(nodes, fmt.Sprintf("gpu-%02d", i))
	}
	cl := newCluster(t, nodes...)
	bin := testenv.BuildFaultline(t)
	run := func(id string) *exec.Cmd {
		cmd := exec.Command(bin, "controller", "--kubeconfig", cl.env.Kubeconfig(), "--loki-url", cl.loki,
			"--namespace", ns, "--identity", id, "--listen", freeAddr(t), "--budget-percent", "100", "--no-storm-hold",
			"--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms", "--initial-lookback", "5m")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	a := run("replica-a")
	allTainted := func(ns []string) func() bool {
		return func() bool {
			for _, n := range ns {
				if !cl.tainted(n) {
					return false
				}
			}
			return true
		}
	}
	for _, n := range nodes[:6] {
		cl.push(n, time.Now(), xid79)
	}
	cl.waitFor("first six tainted", 30*time.Second, allTainted(nodes[:6]))
	// Kill the leader while more lines arrive.
	for _, n := range nodes[6:10] {
		cl.push(n, time.Now(), xid79)
	}
	_ = a.Process.Kill()
	_ = a.Wait()
	for _, n := range nodes[10:] {
		cl.push(n, time.Now(), xid79)
	}
	run("replica-b")
	cl.waitFor("all sixteen tainted", 60*time.Second, allTainted(nodes))
	time.Sleep(2 * time.Second)
	lost := 0
	for _, n := range nodes {
		total := int32(0)
		for _, e := range cl.events(n, "FaultTainted") {
			total += max(e.Count, 1)
		}
		if total > 1 {
			t.Errorf("%s: %d FaultTainted events: decided twice", n, total)
		}
		if total == 0 {
			lost++
		}
		if cl.node(n).Annotations["faultline.io/evidence"] == "" {
			t.Errorf("%s: tainted without evidence", n)
		}
	}
	t.Logf("%d of %d nodes tainted once each; Events of %d decisions lost with the killed process", len(nodes), len(nodes), lost)
}
