package controller_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestControllerRSSAtScale runs the controller binary against 5,000 Node objects and
// 2,000 candidate lines per second (lines that pass the LogQL filter and reach the
// matcher) for 20 seconds, and reports its peak resident memory and how far it fell
// behind. Memory is checked against a loose bound that catches leaks, not speed.
func TestControllerRSSAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("performance measurement: run without -short")
	}
	const nodes, rate, seconds, lineNodes = 5000, 2000, 20, 2000
	cl := newCluster(t)
	t0 := time.Now()
	cl.createNodes(nodes, func(i int) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("node-%04d", i), Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
	})
	t.Logf("created %d nodes in %s", nodes, time.Since(t0).Round(time.Millisecond))

	bin := testenv.BuildFaultline(t)
	addr := testenv.FreeAddr(t)
	cmd := exec.Command(bin, "controller", "--kubeconfig", cl.env.Kubeconfig(), "--loki-url", cl.loki, "--namespace", ns,
		"--identity", "scale", "--listen", addr, "--initial-lookback", "1m", "--log-format", "text")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	eventually.True(t, 30*time.Second, "the controller leads", func() bool { return strings.Contains(stderr.String(), "leading") })
	idle := testenv.RSS(cmd.Process.Pid)

	// 2,000 candidate lines per second, in 10 pushes of 200, spread over 2,000 nodes:
	// corrected AER errors (an info rule, and a storm threshold no node reaches) and
	// link-ups (the companion of the link-flap rule, kept as pending state per stream).
	var peak int64
	sent := 0
	start := time.Now()
	for tick := 0; tick < seconds*10; tick++ {
		var streams []push.Stream
		now := time.Now()
		for i := 0; i < rate/10; i++ {
			n := (sent + i) % lineNodes
			line := fmt.Sprintf("pcieport 0000:00:02.0: AER: Corrected error received: 0000:00:02.%d", i%8)
			if i%2 == 1 {
				line = fmt.Sprintf("mlx5_core 0000:b5:00.0 ens6f%d: Link up", i%4)
			}
			streams = append(streams, push.Stream{Labels: fmt.Sprintf(`{node="node-%04d", source="kernel"}`, n),
				Entries: []push.Entry{{Timestamp: now.Add(time.Duration(i)), Line: line}}})
		}
		sent += rate / 10
		pushStreams(t, cl.loki, streams)
		if rss := testenv.RSS(cmd.Process.Pid); rss > peak {
			peak = rss
		}
		if d := time.Until(start.Add(time.Duration(tick+1) * 100 * time.Millisecond)); d > 0 {
			time.Sleep(d)
		}
	}
	elapsed := time.Since(start)
	// All candidate lines reach the matcher, and soon after they were pushed.
	var read float64
	caughtUp := time.Now().Add(30 * time.Second)
	for read = scrape(t, addr, "faultline_controller_lines_total"); read < float64(sent) && time.Now().Before(caughtUp); {
		time.Sleep(100 * time.Millisecond)
		read = scrape(t, addr, "faultline_controller_lines_total")
	}
	behind := time.Since(start) - elapsed
	if rss := testenv.RSS(cmd.Process.Pid); rss > peak {
		peak = rss
	}
	if read < float64(sent) {
		t.Errorf("controller read %.0f of %d lines; its log ends:\n%s", read, sent, tail(stderr.String(), 15))
	}
	t.Logf("all %.0f lines read %s after the last push", read, behind.Round(time.Millisecond))
	t.Logf("controller with %d Node objects, %d candidate lines in %s (%.0f lines/s) over %d nodes: RSS idle %.1f MiB, peak %.1f MiB",
		nodes, sent, elapsed.Round(time.Millisecond), float64(sent)/elapsed.Seconds(), lineNodes, mib(idle), mib(peak))
	if peak > 1<<30 {
		t.Errorf("peak RSS %.0f MiB: memory is not bounded", mib(peak))
	}
	if strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("controller logged errors:\n%s", tail(stderr.String(), 20))
	}
}

// scrape sums a metric's samples from the controller's /metrics.
func scrape(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	total := 0.0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += v
		}
	}
	return total
}

func pushStreams(t *testing.T, loki string, streams []push.Stream) {
	t.Helper()
	raw, err := (&push.PushRequest{Streams: streams}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(loki+"/loki/api/v1/push", "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("push: %s", resp.Status)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
