package ship_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/test/testenv"

	"github.com/faultline-dev/faultline/test/eventually"
)

// These tests run the real Grafana Loki and OpenTelemetry Collector through the
// project's harness. testenv.Start skips them in -short mode only.

const bootID = "6a1c2e4f-0b3d-4e5f-8a9b-c0d1e2f3a4b5"

// sendAll ships recs with Retry, failing the test on error.
func sendAll(t *testing.T, s ship.Sender, recs []ship.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := ship.Retry(ctx, s, recs, ship.Backoff{Initial: 100 * time.Millisecond, Max: time.Second},
		func(attempt int, err error, wait time.Duration) {
			t.Logf("%s: attempt %d failed (%v), retrying in %v", s.Name(), attempt, err, wait)
		})
	if err != nil {
		t.Fatalf("%s: %v", s.Name(), err)
	}
}

// checkSubset reports keys of want missing from got or different there;
// Loki adds labels of its own (service_name, detected_level, ...).
func checkSubset(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: %s = %q (present %v), want %q; all: %v", what, k, g, ok, v, got)
		}
	}
}

// checkAbsent reports keys that must not be in got.
func checkAbsent(t *testing.T, what string, got map[string]string, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v, ok := got[k]; ok {
			t.Errorf("%s: unexpected %s=%q; all: %v", what, k, v, got)
		}
	}
}

func byLine(es []testenv.LokiEntry) map[string]testenv.LokiEntry {
	m := make(map[string]testenv.LokiEntry, len(es))
	for _, e := range es {
		m[e.Line] = e
	}
	return m
}

func TestIntegrationOTLPThroughCollectorToLoki(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Collector: true})
	const node = "gpu-otlp-1"
	now := time.Now()
	recs := []ship.Record{
		{Time: now.Add(-3 * time.Second), Source: ship.SourceKernel, Node: node, Seq: 101, BootID: bootID, Level: 3,
			Body: "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
		{Time: now.Add(-2 * time.Second), Source: ship.SourceKernel, Node: node, Seq: 102, BootID: bootID, Level: 4,
			Body: "mlx5_core 0000:5e:00.0: Port: 1 Link DOWN"},
		{Time: now.Add(-2*time.Second + 1), Source: ship.SourceKernel, Node: node, Seq: 103, BootID: bootID, Level: 0, Facility: 0,
			Body: "Kernel panic - not syncing: raw byte \xff here"},
		{Time: now.Add(-1 * time.Second), Source: ship.SourcePod, Node: node, Namespace: "train", Pod: "llm-0", Container: "trainer",
			Stream: "stderr", Body: "NCCL WARN NET/IB : Got completion with error 12"},
		{Time: now.Add(-500 * time.Millisecond), Source: ship.SourcePod, Node: node, Namespace: "train", Pod: "llm-0", Container: "trainer",
			Stream: "stdout", Body: "step 1200 loss 2.31"},
	}
	sendAll(t, ship.NewOTLP(env.OTLPEndpoint(), ship.OTLPOptions{Gzip: true}), recs)

	// The node label comes from the resource attribute "node", which the harness's
	// Loki promotes; k8s.node.name becomes k8s_node_name.
	got := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{node=%q}`, node), len(recs), 30*time.Second)
	if len(got) != len(recs) {
		t.Fatalf("got %d entries, want %d: %+v", len(got), len(recs), got)
	}
	for i, r := range recs {
		e := got[i]
		wantLine := strings.ToValidUTF8(r.Body, "\uFFFD")
		if e.Line != wantLine {
			t.Errorf("entry %d: line %q, want %q", i, e.Line, wantLine)
		}
		if e.Time.UnixNano() != r.Time.UnixNano() {
			t.Errorf("%q: timestamp %d, want %d", r.Body, e.Time.UnixNano(), r.Time.UnixNano())
		}
		// source is a resource attribute the harness's Loki promotes, like node.
		checkSubset(t, r.Body+" labels", e.Labels, map[string]string{"node": node, "k8s_node_name": node, "source": r.Source})
		switch r.Source {
		case ship.SourceKernel:
			sev := ship.KernelSeverity(r.Level)
			checkSubset(t, r.Body+" metadata", e.Metadata, map[string]string{
				"log_source": "kernel",
				"kmsg_seq":   strconv.FormatUint(r.Seq, 10), "boot_id": bootID,
				"kmsg_facility": strconv.Itoa(r.Facility), "kmsg_level": strconv.Itoa(r.Level),
				"host_name": node, "scope_name": ship.ScopeName,
				"severity_text": sev.Text, "severity_number": strconv.Itoa(int(sev.Number)),
			})
			checkAbsent(t, r.Body, e.Labels, "k8s_pod_name", "k8s_namespace_name", "k8s_container_name")
		case ship.SourcePod:
			checkSubset(t, r.Body+" metadata", e.Metadata, map[string]string{
				"log_source": "pod", "log_iostream": r.Stream,
			})
			// Loki indexes these resource attributes by default.
			checkSubset(t, r.Body+" labels", e.Labels, map[string]string{
				"k8s_namespace_name": r.Namespace, "k8s_pod_name": r.Pod, "k8s_container_name": r.Container,
			})
			checkAbsent(t, r.Body+" metadata", e.Metadata, "severity_text", "kmsg_seq")
		}
	}
	t.Logf("kernel entry as Loki returns it: labels %v, metadata %v", got[0].Labels, got[0].Metadata)
	t.Logf("pod entry as Loki returns it: labels %v, metadata %v", got[3].Labels, got[3].Metadata)

	// The controller's kind of query: by the promoted node label, filtered on
	// structured metadata and a line filter.
	xid := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{k8s_node_name=%q} | source="kernel" |= "Xid"`, node), 1, 10*time.Second)
	if len(xid) != 1 || xid[0].Line != recs[0].Body {
		t.Errorf("Xid query: %+v", xid)
	}
	stderr := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{node=%q, k8s_container_name="trainer"} | log_iostream="stderr"`, node), 1, 10*time.Second)
	if len(stderr) != 1 || stderr[0].Line != recs[3].Body {
		t.Errorf("stderr query: %+v", stderr)
	}
}

func TestIntegrationLokiPush(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Loki: true})
	const node = "n1"
	// Not a valid Kubernetes name, but a value that needs escaping in {k="v"} form.
	const oddContainer = `we"ird\cont ainer ✓`
	now := time.Now()
	kernel := []ship.Record{
		{Time: now.Add(-5 * time.Second), Seq: 500, Level: 6, Body: "nvidia-nvlink: Nvlink Core is being initialized"},
		{Time: now.Add(-4 * time.Second), Seq: 501, Level: 3, Body: "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
		{Time: now.Add(-4 * time.Second), Seq: 502, Level: 3, Body: "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."},
		{Time: now.Add(-3 * time.Second), Seq: 503, Level: 4, Body: "NVRM: Xid (PCI:0000:86:00): 48, pid=1234, name=python, An uncorrectable double bit error"},
		{Time: now.Add(-2 * time.Second), Seq: 504, Level: 2, Facility: 0, Body: "NVRM: Xid (PCI:0000:86:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"},
	}
	for i := range kernel {
		kernel[i].Source, kernel[i].Node, kernel[i].BootID = ship.SourceKernel, node, bootID
	}
	pods := []ship.Record{
		{Time: now.Add(-3500 * time.Millisecond), Stream: "stderr", Container: "trainer", Body: "NCCL WARN Cuda failure 'unspecified launch failure'"},
		{Time: now.Add(-2500 * time.Millisecond), Stream: "stdout", Container: oddContainer, Body: "odd container line"},
	}
	for i := range pods {
		pods[i].Source, pods[i].Node, pods[i].Namespace, pods[i].Pod = ship.SourcePod, node, "train", "llm-0"
	}
	// Out of order on purpose: the sender sorts each stream by time.
	batch := append([]ship.Record{kernel[3], kernel[4], pods[1]}, kernel[0], kernel[1], kernel[2], pods[0])
	sendAll(t, ship.NewLoki(env.LokiURL(), ship.LokiOptions{Tenant: "ignored-without-auth"}), batch)

	got := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{node=%q, source="kernel"} |= "Xid"`, node), 3, 20*time.Second)
	wantXid := []ship.Record{kernel[1], kernel[3], kernel[4]}
	if len(got) != len(wantXid) {
		t.Fatalf("Xid query: %d entries, want %d: %+v", len(got), len(wantXid), got)
	}
	for i, r := range wantXid {
		e := got[i]
		if e.Line != r.Body || e.Time.UnixNano() != r.Time.UnixNano() {
			t.Errorf("Xid entry %d: %d %q, want %d %q", i, e.Time.UnixNano(), e.Line, r.Time.UnixNano(), r.Body)
		}
		checkSubset(t, r.Body+" labels", e.Labels, map[string]string{"node": node, "source": "kernel"})
		checkAbsent(t, r.Body+" labels", e.Labels, "seq", "boot_id", "namespace", "pod", "container")
		checkSubset(t, r.Body+" metadata", e.Metadata, map[string]string{
			"seq": strconv.FormatUint(r.Seq, 10), "boot_id": bootID, "level": ship.LevelName(r.Level), "facility": "0",
		})
	}
	t.Logf("kernel entry as Loki returns it: labels %v, metadata %v", got[0].Labels, got[0].Metadata)

	// All kernel lines, in sequence order (two share a timestamp).
	all := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{node=%q, source="kernel"}`, node), len(kernel), 10*time.Second)
	for i, r := range kernel {
		if i < len(all) && all[i].Metadata["seq"] != strconv.FormatUint(r.Seq, 10) {
			t.Errorf("kernel entry %d: seq %s, want %d", i, all[i].Metadata["seq"], r.Seq)
		}
	}
	// Structured metadata filters work on what the sender attached.
	crit := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{node=%q} | level="crit"`, node), 1, 10*time.Second)
	if len(crit) != 1 || crit[0].Line != kernel[4].Body {
		t.Errorf("level=crit: %+v", crit)
	}

	podGot := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{node=%q, source="pod"}`, node), len(pods), 10*time.Second)
	lines := byLine(podGot)
	for _, r := range pods {
		e, ok := lines[r.Body]
		if !ok {
			t.Errorf("pod line %q missing: %+v", r.Body, podGot)
			continue
		}
		checkSubset(t, r.Body+" labels", e.Labels, map[string]string{
			"node": node, "source": "pod", "namespace": "train", "pod": "llm-0", "container": r.Container,
		})
		checkSubset(t, r.Body+" metadata", e.Metadata, map[string]string{"stream": r.Stream})
		checkAbsent(t, r.Body+" metadata", e.Metadata, "seq", "boot_id", "level")
	}
	// The escaped label value selects its stream.
	odd := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{container=%s}`, strconv.Quote(oddContainer)), 1, 10*time.Second)
	if len(odd) != 1 || odd[0].Line != "odd container line" {
		t.Errorf("query by escaped container label: %+v", odd)
	}
}

func TestIntegrationLokiRefusesEntryFromTheFuture(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Loki: true})
	s := ship.NewLoki(env.LokiURL(), ship.LokiOptions{})
	calls := 0
	// Loki refuses entries newer than now + creation_grace_period (10m): a 400
	// that no retry can fix.
	rec := ship.Record{Time: time.Now().Add(2 * time.Hour), Source: ship.SourceKernel, Node: "n1", Seq: 9, Body: "clock is off"}
	start := time.Now()
	err := ship.Retry(context.Background(), s, []ship.Record{rec},
		ship.Backoff{Initial: time.Second}, func(int, error, time.Duration) { calls++ })
	var he *ship.HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest || !strings.Contains(he.Body, "too new") {
		t.Fatalf("err = %v, want a 400 with Loki's reason", err)
	}
	if ship.Retryable(err) || calls != 0 || time.Since(start) > 5*time.Second {
		t.Errorf("retryable %v, %d retries, took %v", ship.Retryable(err), calls, time.Since(start))
	}
	t.Logf("Loki refused: %v", err)
}

func TestIntegrationLokiRetryAcrossRestart(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Loki: true})
	s := ship.NewLoki(env.LokiURL(), ship.LokiOptions{Timeout: 2 * time.Second})
	now := time.Now()
	mk := func(seq uint64, body string) []ship.Record {
		return []ship.Record{{Time: now.Add(time.Duration(seq) * time.Millisecond), Source: ship.SourceKernel, Node: "n1",
			Seq: seq, BootID: bootID, Level: 3, Body: body}}
	}
	sendAll(t, s, mk(1, "before the restart"))
	env.StopLoki(t)

	var mu sync.Mutex
	var retries []error
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		done <- ship.Retry(ctx, s, mk(2, "Xid 79 while Loki was down"), ship.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
			func(attempt int, err error, wait time.Duration) {
				mu.Lock()
				retries = append(retries, err)
				mu.Unlock()
			})
	}()
	// Let it fail a few times against the stopped Loki.
	eventually.NoError(t, 20*time.Second, "3 retries against a stopped Loki", func() error {
		select {
		case err := <-done:
			t.Fatalf("Retry returned while Loki was down: %v", err)
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		if len(retries) < 3 {
			return fmt.Errorf("%d retries", len(retries))
		}
		return nil
	})
	env.StartLoki(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Retry after Loki came back: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Retry did not succeed within a minute of Loki's restart")
	}
	mu.Lock()
	defer mu.Unlock()
	var ne *ship.NetError
	if !errors.As(retries[0], &ne) || !ship.Retryable(retries[0]) {
		t.Errorf("first failure %T %v, want a retryable *NetError", retries[0], retries[0])
	}
	for i, err := range retries {
		if !ship.Retryable(err) {
			t.Errorf("retry %d on a non-retryable error %v", i, err)
		}
	}
	t.Logf("%d retries while Loki was down; first: %v; last: %v", len(retries), retries[0], retries[len(retries)-1])
	got := testenv.WaitLoki(t, env.LokiURL(), `{node="n1", source="kernel"}`, 2, 20*time.Second)
	if len(got) != 2 || got[0].Line != "before the restart" || got[1].Line != "Xid 79 while Loki was down" {
		t.Errorf("after restart: %+v", got)
	}
}
