package controller_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/test/testenv"
)

// xid79Rule is the rule of the default packs that xid79 fires.
const xid79Rule = "xid-gpu-lost"

// startReplica runs the controller binary as replica id, with extra flags.
func startReplica(t *testing.T, cl *cluster, bin, id string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"controller", "--kubeconfig", cl.env.Kubeconfig(), "--loki-url", cl.loki,
		"--namespace", ns, "--identity", id, "--listen", testenv.FreeAddr(t), "--no-storm-hold",
		"--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms", "--initial-lookback", "5m"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// leads reports whether the replica serving base says it leads, on its metrics
// (faultline_controller_leader), as a monitoring system reads it.
func leads(base string) bool {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK && strings.Contains(string(b), "\nfaultline_controller_leader 1\n")
}

// TestKillLeaderMidStream: the leading controller process is killed with SIGKILL (no
// chance to save its last position) while lines keep arriving; a second process takes
// over: every Xid 79 line taints its node, and no fault is decided twice (at most one
// FaultTainted Event per node). Events are sent in the background by client-go's
// recorder, so the Events of the last decisions before the kill may be lost; the taint
// and its NodeFault record are not.
func TestKillLeaderMidStream(t *testing.T) {
	var nodes []string
	for i := 0; i < 16; i++ {
		nodes = append(nodes, fmt.Sprintf("gpu-%02d", i))
	}
	cl := newCluster(t, nodes...)
	bin := testenv.BuildFaultline(t)
	run := func(id string) *exec.Cmd { return startReplica(t, cl, bin, id, "--budget-percent", "100") }
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
		// The record outlives the replica that wrote it, and owns the taint. Its
		// status is written one request after the taint (by the next leader, for a
		// taint the killed one placed): wait for it rather than race it.
		var nf *v1alpha1.NodeFault
		var err error
		cl.waitFor(n+"'s NodeFault with the taint placed", 30*time.Second, func() bool {
			nf, err = cl.record(n, "nvidia-xid", xid79Rule)
			return err == nil && nf.Status.Taint != nil && nf.Status.Taint.State == v1alpha1.TaintPlaced && len(nf.Status.Evidence) > 0
		})
		if nf.Status.Phase != v1alpha1.PhaseTainted || len(nf.Status.Evidence) == 0 ||
			nf.Status.Taint == nil || nf.Status.Taint.State != v1alpha1.TaintPlaced ||
			(nf.Status.Owner != "replica-a" && nf.Status.Owner != "replica-b") {
			t.Errorf("%s: NodeFault status %+v", n, nf.Status)
		}
	}
	t.Logf("%d of %d nodes tainted once each; Events of %d decisions lost with the killed process", len(nodes), len(nodes), lost)
}

// TestHeldFaultSurvivesLeaderKill: with a budget of one node, the second faulty node
// is held, and its NodeFault says so. The leader is killed; the next leader resumes
// the held fault from the record, and taints the node as soon as the budget frees
// (the first node's taint removed by hand) without any new line about it.
func TestHeldFaultSurvivesLeaderKill(t *testing.T) {
	cl := newCluster(t, "gpu-a", "gpu-b", "gpu-c")
	bin := testenv.BuildFaultline(t)
	ctx := context.Background()
	phase := func(node string) v1alpha1.Phase { return cl.phase(node, "nvidia-xid", xid79Rule) }
	a := startReplica(t, cl, bin, "replica-a", "--budget-max", "1", "--budget-percent", "100")
	cl.push("gpu-a", time.Now(), xid79)
	cl.waitFor("gpu-a tainted", 30*time.Second, func() bool { return cl.tainted("gpu-a") })
	cl.push("gpu-b", time.Now(), xid79)
	cl.waitFor("gpu-b held in its NodeFault", 30*time.Second, func() bool { return phase("gpu-b") == v1alpha1.PhaseHeld })
	time.Sleep(3 * time.Second) // the saved read position passes gpu-b's line
	_ = a.Process.Kill()
	_ = a.Wait()

	startReplica(t, cl, bin, "replica-b", "--budget-max", "1", "--budget-percent", "100", "--reconcile-interval", "500ms")
	// Free the budget by hand: remove gpu-a's taint.
	n := cl.node("gpu-a")
	n.Spec.Taints = nil
	if _, err := cl.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.waitFor("gpu-b tainted by the new leader", 60*time.Second, func() bool { return cl.tainted("gpu-b") })
	cl.waitFor("gpu-b's NodeFault Tainted", 20*time.Second, func() bool { return phase("gpu-b") == v1alpha1.PhaseTainted })
	nf, err := cl.record("gpu-b", "nvidia-xid", xid79Rule)
	if err != nil {
		t.Fatal(err)
	}
	if nf.Status.Owner != "replica-b" || len(nf.Status.History) < 2 || nf.Status.History[0].Kind != "hold" {
		t.Errorf("gpu-b's record after the takeover: owner %q, history %+v", nf.Status.Owner, nf.Status.History)
	}
	if cl.tainted("gpu-c") {
		t.Error("gpu-c tainted without a fault")
	}
}

// TestHeldAndConfirmingSurviveLeaderKill: the leader process is killed with SIGKILL
// while gpu-d's fault is held (a budget of 1, taken by gpu-c) and gpu-a's confirming
// probe is running (its agent never answers). The next leader reports the same held
// fault (its NodeFault in phase Held, with its reason), runs gpu-a's confirmation again against gpu-a's real
// agent, whose PCIe bandwidth check fails, and holds gpu-a for the budget beside
// gpu-d: the confirmation completed, nothing lost, nothing tainted past the budget.
func TestHeldAndConfirmingSurviveLeaderKill(t *testing.T) {
	s := newProbeSetup(t)
	cl := s.cl
	bin := testenv.BuildFaultline(t)
	hang, asked := hangingAgent(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(s.token), 0o600); err != nil {
		t.Fatal(err)
	}
	replica := func(id string, agents map[string]string) (string, *exec.Cmd) {
		addr := testenv.FreeAddr(t)
		args := []string{"--listen", addr, "--budget-max", "1", "--budget-percent", "100", "--reconcile-interval", "500ms",
			"--probe-agent-port", "0", "--probe-token-file", tokenFile, "--probe-confirm-timeout", "1m", "--pvc-probe=false"}
		for node, u := range agents {
			args = append(args, "--probe-agent", node+"="+u)
		}
		return "http://" + addr, startReplica(t, cl, bin, id, args...)
	}

	urlA, a := replica("replica-a", map[string]string{"gpu-a": hang, "gpu-b": hang})
	cl.push("gpu-c", time.Now(), xid79)
	cl.waitFor("gpu-c tainted", 30*time.Second, func() bool { return cl.tainted("gpu-c") })
	cl.push("gpu-d", time.Now(), xid79)
	var before []string
	cl.waitFor("gpu-d held on replica-a", 30*time.Second, func() bool {
		before = cl.heldFaults()
		return len(before) == 1 && cl.phase("gpu-d", "nvidia-xid", xid79Rule) == v1alpha1.PhaseHeld && leads(urlA)
	})
	cl.push("gpu-a", time.Now(), aerNonFatal)
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("no confirming probe reached gpu-a's agent")
	}
	cl.waitFor("gpu-a Confirming in its NodeFault", 10*time.Second, func() bool {
		return cl.phase("gpu-a", "pcie-aer", aerRule) == v1alpha1.PhaseConfirming
	})
	time.Sleep(3 * time.Second) // the saved read position passes the lines
	_ = a.Process.Signal(syscall.SIGKILL)
	_ = a.Wait()

	urlB, _ := replica("replica-b", s.agents)
	// The same held fault (gpu-a's may have joined it already: its probe is quick).
	cl.waitFor("replica-b leads and reports gpu-d held", 30*time.Second, func() bool {
		if !leads(urlB) {
			return false
		}
		now := cl.heldFaults()
		for _, h := range before {
			if !slices.Contains(now, h) {
				return false
			}
		}
		return true
	})
	cl.waitFor("gpu-a's confirmation completed by replica-b", 90*time.Second, func() bool {
		return cl.confirmFailedThenHeld("gpu-a", "replica-b")
	})
	want := []string{"gpu-a pcie-aer/" + aerRule + " budget", "gpu-d nvidia-xid/" + xid79Rule + " budget"}
	cl.waitFor("replica-b reports gpu-a and gpu-d held", 20*time.Second, func() bool {
		return slices.Equal(cl.heldFaults(), want)
	})
	if cl.tainted("gpu-a") || cl.tainted("gpu-d") || !cl.tainted("gpu-c") {
		t.Errorf("after the takeover: gpu-a tainted %v, gpu-d tainted %v, gpu-c tainted %v",
			cl.tainted("gpu-a"), cl.tainted("gpu-d"), cl.tainted("gpu-c"))
	}
}
