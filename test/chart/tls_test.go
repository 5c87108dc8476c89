package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestAgentTLS: the chart generates a CA and a certificate for the agents' Service
// name, the agents serve it, and the controller mounts only the CA and calls the
// agents' pods (by their labels) over TLS for that name. The rendered files work:
// the agent's TLS setup serves the rendered pair on loopback and the controller's
// agent client verifies it with the rendered CA and flags.
func TestAgentTLS(t *testing.T) { // probeAgent.tls.mode=shared
	testenv.Integration(t)
	objs := parse(t, render(t, renderCase{name: "agent-tls-shared", release: "faultline", namespace: "faultline",
		sets: []string{"probeAgent.tls.mode=shared"}}))
	const name = "faultline-probe-agent.faultline.svc"

	sec := get[corev1.Secret](t, objs, "Secret", "faultline-probe-agent-tls")
	if sec.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %s, want %s", sec.Type, corev1.SecretTypeTLS)
	}
	dir := t.TempDir()
	files := map[string]string{}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		// The render holds data as base64 strings; the converter decodes them.
		b := sec.Data[k]
		if len(b) == 0 {
			t.Fatalf("Secret has no %s", k)
		}
		files[k] = filepath.Join(dir, k)
		if err := os.WriteFile(files[k], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ca, leaf := parseCert(t, sec.Data["ca.crt"]), parseCert(t, sec.Data["tls.crt"])
	if !ca.IsCA {
		t.Error("ca.crt is not a CA")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, dns := range []string{name, "faultline-probe-agent.faultline.svc.cluster.local"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: dns, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("tls.crt does not verify for %s with ca.crt: %v", dns, err)
		}
	}
	if days := time.Until(leaf.NotAfter).Hours() / 24; days < 3600 {
		t.Errorf("certificate valid for %.0f more days, want probeAgent.tls.validityDays (3650)", days)
	}

	// The agent serves the pair over HTTPS, probes included.
	pa := daemonSet(t, objs, "faultline-probe-agent")
	pc := container(t, &pa.Spec.Template.Spec, "probe-agent")
	certFile, _ := argWithPrefix(pc, "--tls-cert-file=")
	keyFile, _ := argWithPrefix(pc, "--tls-key-file=")
	v, m := mountAt(&pa.Spec.Template.Spec, pc, filepath.Dir(certFile))
	if certFile == "" || keyFile == "" || filepath.Dir(keyFile) != filepath.Dir(certFile) || v == nil || v.Secret == nil ||
		v.Secret.SecretName != sec.Name || !m.ReadOnly {
		t.Errorf("agent args %v, volume %+v: want --tls-cert-file and --tls-key-file in the Secret %s mounted read-only", pc.Args, v, sec.Name)
	}
	for _, p := range []*corev1.Probe{pc.ReadinessProbe, pc.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("agent probe %+v: want HTTPS", p)
		}
	}

	// The controller: the CA alone, the agents' name, the agents' pods.
	ctl := deployment(t, objs, "faultline-controller")
	cc := container(t, &ctl.Spec.Template.Spec, "controller")
	caFile, _ := argWithPrefix(cc, "--probe-agent-ca-file=")
	cv, _ := mountAt(&ctl.Spec.Template.Spec, cc, filepath.Dir(caFile))
	if cv == nil || cv.Secret == nil || cv.Secret.SecretName != sec.Name || len(cv.Secret.Items) != 1 ||
		cv.Secret.Items[0].Key != "ca.crt" || cv.Secret.Items[0].Path != filepath.Base(caFile) {
		t.Errorf("controller CA volume %+v for --probe-agent-ca-file=%s: want ca.crt alone from %s", cv, caFile, sec.Name)
	}
	if !hasArg(cc, "--probe-agent-server-name="+name) {
		t.Errorf("controller args %v lack --probe-agent-server-name=%s", cc.Args, name)
	}
	sel, _ := argWithPrefix(cc, "--probe-agent-selector=")
	s, err := labels.Parse(sel)
	if err != nil || sel == "" || !s.Matches(labels.Set(pa.Spec.Template.Labels)) {
		t.Errorf("--probe-agent-selector=%q (%v) does not select the agent pods %v", sel, err, pa.Spec.Template.Labels)
	}
	for _, w := range []string{"Deployment/faultline-controller", "Deployment/faultline-otel-collector"} {
		if tmpl := podTemplates(t, objs)[w]; tmpl != nil && s.Matches(labels.Set(tmpl.Labels)) {
			t.Errorf("--probe-agent-selector also selects %s", w)
		}
	}
	for _, a := range cc.Args {
		if strings.Contains(a, "insecure") {
			t.Errorf("controller arg %s", a)
		}
	}

	// The rendered pair and CA work together, as the binaries use them.
	conf, err := agent.ServerTLS(files["tls.crt"], files["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The refused handshake below is expected: no server log for it.
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})}
	go srv.Serve(tls.NewListener(ln, conf))
	defer srv.Close()
	url := "https://" + ln.Addr().String() + "/healthz"
	fetch := func(c *http.Client) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	}
	client, err := proberun.AgentClient(files["ca.crt"], name)
	if err != nil {
		t.Fatal(err)
	}
	if err := fetch(client); err != nil {
		t.Errorf("the controller's client with the rendered CA and name: %v", err)
	}
	// Another render's CA does not verify this agent.
	other := get[corev1.Secret](t, parse(t, render(t, renderCase{name: "agent-tls-shared-other", release: "faultline", namespace: "faultline",
		sets: []string{"probeAgent.tls.mode=shared"}})), "Secret", "faultline-probe-agent-tls")
	otherCA := filepath.Join(dir, "other-ca.crt")
	if err := os.WriteFile(otherCA, other.Data["ca.crt"], 0o600); err != nil {
		t.Fatal(err)
	}
	oc, err := proberun.AgentClient(otherCA, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := fetch(oc); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("another CA: %v, want an unknown authority", err)
	}

	// probeAgent.tls.existingSecret: no Secret rendered, the same mounts of it.
	ex := parse(t, render(t, renderCase{name: "agent-tls-existing", release: "faultline", namespace: "faultline",
		sets: []string{"probeAgent.tls.mode=shared", "probeAgent.tls.existingSecret=agent-certs"}}))
	for _, s := range ex.ofKind("Secret") {
		if s.GetLabels()["app.kubernetes.io/component"] == "probe-agent" {
			t.Errorf("with probeAgent.tls.existingSecret, the agents' Secret %s rendered", s.GetName())
		}
	}
	epa := daemonSet(t, ex, "faultline-probe-agent")
	ectl := deployment(t, ex, "faultline-controller")
	if v := volume(&epa.Spec.Template.Spec, "tls"); v == nil || v.Secret == nil || v.Secret.SecretName != "agent-certs" {
		t.Errorf("agent TLS volume %+v, want the Secret agent-certs", v)
	}
	if v := volume(&ectl.Spec.Template.Spec, "probe-agent-ca"); v == nil || v.Secret == nil || v.Secret.SecretName != "agent-certs" {
		t.Errorf("controller CA volume %+v, want the Secret agent-certs", v)
	}
}

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("no PEM block in %q", base64.StdEncoding.EncodeToString(b[:min(len(b), 40)]))
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGeneratedTLSKept renders against a real apiserver that holds the generated
// Secrets (an upgrade): the chart's lookup keeps their CA, certificate and key, for
// the probe agents' signer CA, the collector and the intake alike, so the controller
// keeps trusting the agents' certificates and senders the receivers.
func TestGeneratedTLSKept(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	c := caseNamed(t, "defaults")
	first := parse(t, render(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := env.Clientset()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"faultline-probe-agent-signer", "faultline-otel-collector-tls", "faultline-controller-intake-tls"}
	for _, name := range secrets {
		sec := get[corev1.Secret](t, first, "Secret", name)
		if _, err := cs.CoreV1().Secrets(c.namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := helm(t, append(c.args(repoRoot(t)), "--dry-run=server", "--kubeconfig", env.Kubeconfig())...)
	if err != nil {
		t.Fatal(err)
	}
	again := parse(t, out)
	for _, name := range secrets {
		was, now := get[corev1.Secret](t, first, "Secret", name), get[corev1.Secret](t, again, "Secret", name)
		for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
			if !bytes.Equal(was.Data[k], now.Data[k]) {
				t.Errorf("Secret %s: %s changed on a render against the cluster holding it", name, k)
			}
		}
	}
	// Without the cluster, a render generates new ones (why manifests/ leaves them out).
	if fresh := get[corev1.Secret](t, parse(t, render(t, c)), "Secret", "faultline-otel-collector-tls"); bytes.Equal(fresh.Data["ca.crt"],
		get[corev1.Secret](t, first, "Secret", "faultline-otel-collector-tls").Data["ca.crt"]) {
		t.Error("two renders without a cluster generated the same collector CA")
	}
}
