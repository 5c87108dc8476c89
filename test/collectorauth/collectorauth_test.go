package collectorauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/test/testenv"
)

const (
	namespace  = "faultline"
	exporterSA = "dmesg-exporter"
)

// TestNoForgedLines: only an exporter's pod-bound token with the collector's
// audience gets a line into Loki, and the line carries the node the token was
// issued on, whatever node the sender wrote.
func TestNoForgedLines(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CollectorAuth: &testenv.CollectorAuth{
		ServiceAccounts: []string{namespace + "/" + exporterSA},
	}})
	cs := env.Clientset()
	ctx := context.Background()
	run := strconv.FormatInt(time.Now().UnixNano(), 36) // this run's lines

	token := env.PodToken(t, namespace, exporterSA, "gpu-a", []string{testenv.CollectorAudience})

	// The harness apiserver (1.32) puts the pod's node into the review: the
	// authenticator relies on it.
	tr, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{testenv.CollectorAudience}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Status.User.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != "gpu-a" {
		t.Fatalf("TokenReview extra %v: the node claim is missing", tr.Status.User.Extra)
	}

	send := func(tok, node, line string) error {
		var c *http.Client
		if tok != "" {
			f := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
				t.Fatal(err)
			}
			if c, err = (ship.Auth{TokenFile: f}).Client(); err != nil {
				t.Fatal(err)
			}
		}
		s := ship.NewOTLP(env.OTLPEndpoint(), ship.OTLPOptions{Client: c})
		return s.Send(ctx, []ship.Record{{Time: time.Now(), Body: line + " " + run, Source: ship.SourceKernel, Node: node, Level: 3}})
	}
	refused := func(name, tok string) {
		t.Helper()
		err := send(tok, "gpu-b", "NVRM: Xid (PCI:0000:3b:00): 79, forged "+name)
		var he *ship.HTTPError
		if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: send = %v, want 401", name, err)
		}
	}

	// The harness's readiness check was refused too: count from here.
	refusedBefore := collectorCounter(t, env.CollectorMetricsURL(), "faultline_nodeauth_refused_requests")
	refused("no credentials", "")
	refused("wrong audience", env.PodToken(t, namespace, exporterSA, "gpu-a", nil)) // the apiserver's own audience
	refused("another ServiceAccount", env.PodToken(t, namespace, "intruder", "gpu-b", []string{testenv.CollectorAudience}))
	unbound, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, exporterSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{testenv.CollectorAudience}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused("token bound to no pod", unbound.Status.Token)

	if err := send(token, "gpu-b", "NVRM: Xid (PCI:0000:3b:00): 79, claims gpu-b"); err != nil {
		t.Fatalf("valid exporter naming another node: %v, want accepted and relabelled", err)
	}
	if err := send(token, "gpu-a", "NVRM: Xid (PCI:0000:3b:00): 79, honest"); err != nil {
		t.Fatalf("valid exporter: %v", err)
	}

	// Both accepted lines arrive (the refused ones were sent before them) ...
	got := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{source="kernel"} |= %q`, run), 2, 30*time.Second)
	// ... and only those, each with the sender's node, never the claimed one.
	if len(got) != 2 {
		t.Fatalf("Loki holds %d lines of this run, want the 2 accepted: %v", len(got), got)
	}
	for _, e := range got {
		if strings.Contains(e.Line, "forged") {
			t.Errorf("a refused line reached Loki: %v", e)
		}
		if e.Labels["node"] != "gpu-a" || e.Labels["k8s_node_name"] != "gpu-a" {
			t.Errorf("line %q has node labels %v, want gpu-a (the sender's)", e.Line, e.Labels)
		}
	}
	if forged, err := testenv.QueryLoki(t.Context(), env.LokiURL(), fmt.Sprintf(`{node="gpu-b"} |= %q`, run), time.Now().Add(-time.Hour), time.Now().Add(time.Minute)); err != nil || len(forged) != 0 {
		t.Errorf("lines under the claimed node gpu-b: %v (err %v), want none", forged, err)
	}
	if n := collectorCounter(t, env.CollectorMetricsURL(), "faultline_nodeattr_relabelled_log_records"); n != 1 {
		t.Errorf("relabelled records counted %v, want 1", n)
	}
	if n := collectorCounter(t, env.CollectorMetricsURL(), "faultline_nodeauth_refused_requests") - refusedBefore; n != 4 {
		t.Errorf("refused requests counted %v, want the 4 refused above", n)
	}
}

// collectorCounter reads a counter from the collector's own metrics (the
// Prometheus exporter may append _total), summed over its series; 0 before its
// first increment.
func collectorCounter(t *testing.T, metricsURL, name string) float64 {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("collector metrics: %v", err)
	}
	for _, n := range []string{name, name + "_total"} {
		if f, ok := fams[n]; ok {
			sum := 0.0
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0 // not yet recorded
}

// TestScopeNodeRelabelled: a node named in an instrumentation scope's attributes
// (which Loki keeps as structured metadata) is relabelled to the sender's node like
// the resource's (Loki's stream label): a gpu-a exporter's line whose scope claims
// gpu-b reaches Loki as gpu-a's, by label and by structured metadata.
func TestScopeNodeRelabelled(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CollectorAuth: &testenv.CollectorAuth{
		ServiceAccounts: []string{namespace + "/" + exporterSA},
	}})
	token := env.PodToken(t, namespace, exporterSA, "gpu-a", []string{testenv.CollectorAudience})
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	attr := func(k, v string) string {
		return fmt.Sprintf(`{"key":%q,"value":{"stringValue":%q}}`, k, v)
	}
	body := fmt.Sprintf(`{"resourceLogs":[{"resource":{"attributes":[%s,%s]},"scopeLogs":[{"scope":{"name":"forger","attributes":[%s,%s]},`+
		`"logRecords":[{"timeUnixNano":"%d","body":{"stringValue":"scope claims gpu-b %s"}}]}]}]}`,
		attr("node", "gpu-a"), attr("source", "kernel"), attr("node", "gpu-b"), attr("k8s.node.name", "gpu-b"), time.Now().UnixNano(), run)
	req, err := http.NewRequest(http.MethodPost, env.OTLPEndpoint()+"/v1/logs", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the line with a claiming scope: %s", resp.Status)
	}
	got := testenv.WaitLoki(t, env.LokiURL(), fmt.Sprintf(`{source="kernel"} |= %q`, run), 1, 30*time.Second)
	for _, e := range got {
		if e.Labels["node"] != "gpu-a" {
			t.Errorf("stream label node = %q, want the sender's gpu-a", e.Labels["node"])
		}
		// Loki names a structured metadata key that is also a stream label with the
		// suffix _extracted.
		seen := 0
		for _, k := range []string{"node", "node_extracted", "k8s_node_name", "k8s_node_name_extracted"} {
			if v, ok := e.Metadata[k]; ok {
				seen++
				if v != "gpu-a" {
					t.Errorf("structured metadata %s = %q, want the sender's gpu-a", k, v)
				}
			}
		}
		if seen == 0 {
			t.Errorf("the scope's node attributes are not in the line's structured metadata %v: the test proves nothing", e.Metadata)
		}
	}
	if n := collectorCounter(t, env.CollectorMetricsURL(), "faultline_nodeattr_relabelled_log_records"); n != 1 {
		t.Errorf("relabelled records counted %v, want 1", n)
	}
}
