package controller_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/controller/trigger"
	"github.com/faultline-dev/faultline/test/testenv"
)

// The chart's way end to end: the real agent binary serves HTTPS with a certificate
// for the agents' Service name and accepts only the faultline-probe-agent audience;
// the controller finds it through its Running and Ready pod, verifies it against the
// CA and sends the audience-bound token over TLS only; a node whose agent pod is not
// there is refused.
func TestProbesOverTLS(t *testing.T) {
	cl := newClusterWith(t, testenv.Options{Kubernetes: true, Loki: true}, "gpu-a", "gpu-b")
	cl.env.ServiceAccountToken(t, ns, "faultline-controller") // the account
	cl.bindProbeRunner()
	const name = "faultline-probe-agent.faultline.svc"
	certs := testenv.WriteTLS(t, filepath.Join(t.TempDir(), "tls"), name)

	bin := testenv.BuildProbeAgent(t)
	fakes := testenv.BuildFakeGPUPrograms(t)
	out := pciebwOutput(t, filepath.Join(t.TempDir(), "gpu-a.jsonl"), 12.0)
	u := startAgent(t, bin, cl.env.Kubeconfig(), "gpu-a", fakes, out,
		"--tls-cert-file", certs.Cert, "--tls-key-file", certs.Key, "--token-audience", agentapi.TokenAudience)
	_, portStr, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portStr)

	// gpu-a's agent pod, Running and Ready at 127.0.0.1 (the kubelet's part).
	ctx := context.Background()
	labels := map[string]string{"app.kubernetes.io/name": "faultline", "app.kubernetes.io/component": "probe-agent"}
	if _, err := cl.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "faultline-probe-agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := cl.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "faultline-probe-agent-a", Labels: labels},
		Spec: corev1.PodSpec{NodeName: "gpu-a", ServiceAccountName: "faultline-probe-agent", HostNetwork: true,
			Containers: []corev1.Container{{Name: "probe-agent", Image: "faultline-probe-agent"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}, HostIP: "127.0.0.1",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := cl.cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The controller: the agent pods, the CA, the projected token of the agents' audience.
	pods, err := proberun.NewAgentPods(cl.cs, ns, "app.kubernetes.io/name=faultline,app.kubernetes.io/component=probe-agent", port)
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	pods.Start(lctx)
	client, err := proberun.AgentClient(certs.CA, name)
	if err != nil {
		t.Fatal(err)
	}
	exp := int64(600)
	tr, err := cl.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "faultline-controller", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{agentapi.TokenAudience}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok := tr.Status.Token
	cl.start(options{probes: trigger.Config{Agents: pods, HTTP: client, Token: func() (string, error) { return tok, nil }}})
	rc := probeRunsAs(t, cl.kubeconfigFor(cl.operator()))
	created, err := createProbeRun(rc, v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-a"}, Checks: []string{"pciebw"}})
	if err != nil {
		t.Fatal(err)
	}
	pr := cl.waitProbeRun(rc, created.Name, time.Minute)
	if a := nodeOf(pr, "gpu-a"); pr.Status.Phase != v1alpha1.ProbeRunCompleted || len(pr.Status.Nodes) != 1 || a.Error != "" ||
		a.Verdict != string(probe.StatusPass) || len(a.Results) != 1 {
		t.Fatalf("gpu-a over TLS: %+v", pr.Status)
	}

	// gpu-b has no agent pod: refused, nothing started.
	bad, err := createProbeRun(rc, v1alpha1.ProbeRunSpec{Nodes: []string{"gpu-b"}, Checks: []string{"pciebw"}})
	if err != nil {
		t.Fatal(err)
	}
	bad = cl.waitProbeRun(rc, bad.Name, 30*time.Second)
	if c := findCond(bad.Status.Conditions, v1alpha1.ProbeRunAccepted); bad.Status.Phase != v1alpha1.ProbeRunRefused || c == nil ||
		c.Reason != v1alpha1.ReasonNoProbeAgent || !strings.Contains(c.Message, "gpu-b") {
		t.Errorf("gpu-b without an agent pod: %+v", bad.Status)
	}

	// The agent speaks TLS only: a plain-HTTP client gets no API answer.
	hc := &http.Client{Timeout: 5 * time.Second}
	if resp, err := hc.Get(u + agentapi.PathChecks); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the agent: %s", resp.Status)
		}
	}
}
