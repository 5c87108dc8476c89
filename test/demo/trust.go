package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/dmesg-exporter/ship"
	"github.com/faultline-dev/faultline/test/testenv"
)

// The ServiceAccounts of the node components, as the chart names them for the
// release faultline: the collector takes lines only with a pod-bound token of the
// exporters' (or the agents', for their verdict lines), and writes the token's node
// into every record.
const (
	exporterSA = "faultline-dmesg-exporter"
	agentSA    = "faultline-probe-agent"
)

// tokenRefresh is how often the demo issues its pod-bound tokens again (they live 10
// minutes), as the kubelet rotates projected tokens.
const tokenRefresh = 4 * time.Minute

// signer writes the CA that signs the agents' per-node certificates (the chart
// generates it as a Secret only the controller mounts) and returns its files.
func (d *demo) signer() (certFile, keyFile string) {
	dir := filepath.Join(d.o.Dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		d.tb.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		d.tb.Fatal(err)
	}
	ca, err := cert.NewSelfSignedCACert(cert.Config{CommonName: "faultline-probe-agent-signer"}, key)
	if err != nil {
		d.tb.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		d.tb.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), 0o644); err != nil {
		d.tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		d.tb.Fatal(err)
	}
	return certFile, keyFile
}

// nodeTokens are the files of one node's pod-bound tokens, as the kubelet projects
// them into the node's pods: the exporter's for the collector, the agent's for the
// collector and for the API server.
type nodeTokens struct {
	exporter, agentLines, agentAPI string
}

// daemonPods creates the node components' DaemonSets and their pods on every node,
// as the chart and the DaemonSet controller would (none runs here): the tokens are
// bound to them, and a drain leaves DaemonSet pods where they are.
func (d *demo) daemonPods(ctx context.Context) {
	for _, sa := range []string{exporterSA, agentSA} {
		labels := map[string]string{"app.kubernetes.io/name": "faultline", "app.kubernetes.io/component": sa}
		spec := corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "main", Image: "faultline"}}}
		ds, err := d.cs.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: sa},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}, metav1.CreateOptions{})
		if err != nil {
			d.tb.Fatalf("DaemonSet %s: %v", sa, err)
		}
		if _, err := d.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			d.tb.Fatalf("ServiceAccount %s: %v", sa, err)
		}
		yes := true
		for _, n := range d.nodes {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + n, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes}}},
				Spec: *spec.DeepCopy()}
			pod.Spec.NodeName = n
			if _, err := d.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				d.tb.Fatalf("pod %s: %v", pod.Name, err)
			}
		}
	}
}

// issueTokens writes every node's tokens, bound to the node's pod of the
// ServiceAccount (daemonPods), and keeps issuing them again until the demo ends.
func (d *demo) issueTokens(ctx context.Context) {
	issue := func() {
		for _, n := range d.nodes {
			t := d.tokens[n]
			write := func(path, sa string, audiences []string) {
				tok := d.env.PodToken(d.tb, ns, sa, n, audiences)
				// Written whole, then renamed: a reader never sees half a token.
				tmp := path + ".new"
				if err := os.WriteFile(tmp, []byte(tok), 0o600); err != nil {
					d.tb.Fatal(err)
				}
				if err := os.Rename(tmp, path); err != nil {
					d.tb.Fatal(err)
				}
			}
			write(t.exporter, exporterSA, []string{testenv.CollectorAudience})
			write(t.agentLines, agentSA, []string{testenv.CollectorAudience})
			write(t.agentAPI, agentSA, nil) // the API server's own audience
		}
		// The controller's token for the agents: their audience only, so an agent
		// cannot replay it to the API server.
		exp := int64(3600)
		tr, err := d.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "faultline-controller", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{agentapi.TokenAudience}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			d.tb.Fatalf("the controller's token for the agents: %v", err)
		}
		if err := os.WriteFile(d.probeToken+".new", []byte(tr.Status.Token), 0o600); err != nil {
			d.tb.Fatal(err)
		}
		if err := os.Rename(d.probeToken+".new", d.probeToken); err != nil {
			d.tb.Fatal(err)
		}
	}
	d.probeToken = filepath.Join(d.o.Dir, "controller-probe.token")
	for _, n := range d.nodes {
		dir := filepath.Join(d.o.Dir, "nodes", n, "tokens")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			d.tb.Fatal(err)
		}
		d.tokens[n] = nodeTokens{exporter: filepath.Join(dir, "exporter"), agentLines: filepath.Join(dir, "agent-lines"), agentAPI: filepath.Join(dir, "agent-api")}
	}
	issue()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(tokenRefresh):
				func() {
					defer func() { _ = recover() }() // a failed issue is tried again
					issue()
				}()
			}
		}
	}()
	d.tb.Cleanup(func() { cancel(); <-done })
}

// tokenConfig is a client configuration that authenticates with the token in file,
// read again as it is issued anew (client-go's BearerTokenFile).
func (d *demo) tokenConfig(file string) *rest.Config {
	cfg := d.env.RESTConfigForToken("")
	cfg.BearerTokenFile = file
	return cfg
}

// admission installs the chart's ValidatingAdmissionPolicies, rendered by helm from
// the checkout's chart for the release faultline in namespace faultline, whose
// ServiceAccount names the demo uses: what the controller and the agents may write
// to Nodes, who may make requests on faults, who may force a probe run.
func (d *demo) admission(ctx context.Context) []string {
	root, err := testenv.RepoRoot()
	if err != nil {
		d.tb.Fatalf("the chart: %v", err)
	}
	out, err := exec.CommandContext(ctx, testenv.Binary(d.tb, "helm"), "template", "faultline", filepath.Join(root, "helm", "faultline"),
		"--namespace", ns).Output()
	if err != nil {
		d.tb.Fatalf("helm template: %v", err)
	}
	var names []string
	dec := utilyaml.NewDocumentDecoder(io.NopCloser(bytes.NewReader(out)))
	buf := make([]byte, 4<<20)
	adm := d.cs.AdmissionregistrationV1()
	for {
		n, err := dec.Read(buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			d.tb.Fatalf("helm template: %v", err)
		}
		doc := buf[:n]
		var meta metav1.TypeMeta
		if yaml.Unmarshal(doc, &meta) != nil {
			continue
		}
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			if err := yaml.Unmarshal(doc, &p); err != nil {
				d.tb.Fatalf("policy: %v", err)
			}
			if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{}); err != nil {
				d.tb.Fatalf("policy %s: %v", p.Name, err)
			}
			names = append(names, p.Name)
		case "ValidatingAdmissionPolicyBinding":
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if err := yaml.Unmarshal(doc, &b); err != nil {
				d.tb.Fatalf("policy binding: %v", err)
			}
			if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil {
				d.tb.Fatalf("policy binding %s: %v", b.Name, err)
			}
		}
	}
	return names
}

// forgedLine: lines reach Loki only with a node's pod-bound token, and carry that
// node, whatever the sender claims. A line posted without a token is refused (401)
// and taints nothing; gpu-1's exporter token naming gpu-0 lands as gpu-1's.
func (d *demo) forgedLine(ctx context.Context) {
	const forged = "NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
	d.step("Scenario 9/9: the trust boundary: a forged line, a line that claims another node, a viewer's request")
	d.say("        someone without an exporter's token posts an Xid 79 for gpu-0 straight to the collector")
	send := func(tokenFile, node, body string) error {
		var client *http.Client
		if tokenFile != "" {
			c, err := (ship.Auth{TokenFile: tokenFile}).Client()
			if err != nil {
				return err
			}
			client = c
		}
		s := ship.NewOTLP(d.env.OTLPEndpoint(), ship.OTLPOptions{Client: client})
		return s.Send(ctx, []ship.Record{{Time: time.Now(), Body: body, Source: ship.SourceKernel, Node: node, Level: 3}})
	}
	err := send("", "gpu-0", forged)
	var he *ship.HTTPError
	refused := errors.As(err, &he) && he.StatusCode == http.StatusUnauthorized
	d.say("        POST %s/v1/logs (node=gpu-0, no token) → %v", d.env.OTLPEndpoint(), err)
	d.check("a line without an exporter's token is refused by the collector (401)", refused, errText(err))

	mark := fmt.Sprintf("faultline demo: a line gpu-1's exporter claims is gpu-0's (%d)", time.Now().UnixNano())
	err = send(d.tokens["gpu-1"].exporter, "gpu-0", mark)
	var node string
	_, ok, why := d.waitFor(ctx, "the claimed line in Loki", func() (bool, string) {
		es, err := testenv.QueryLoki(ctx, d.env.LokiURL(), fmt.Sprintf(`{source="kernel"} |= %q`, mark), time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
		if err != nil {
			return false, err.Error()
		}
		for _, e := range es {
			node = e.Labels["node"]
		}
		return len(es) > 0, "not in Loki yet"
	})
	if ok {
		d.say("        with gpu-1's exporter token, claiming node=gpu-0 → accepted, stored as node=%s (the node comes from the token)", node)
	}
	d.check("a line sent with gpu-1's token is gpu-1's, whatever node it claims", err == nil && ok && node == "gpu-1", why+errText(err))
	time.Sleep(3 * time.Second) // a decision would have come by now
	d.check("the refused line tainted nothing (gpu-0 has no xid-gpu-lost taint)", !strings.Contains(d.taintText(ctx, "gpu-0"), "xid-gpu-lost"), d.taintText(ctx, "gpu-0"))

	d.say("        a faultline-viewer asks to untaint gpu-3 (faultline untaint gpu-3, with the viewer's kubeconfig):")
	out, err := exec.CommandContext(ctx, d.o.Binary, "untaint", "gpu-3", "--kubeconfig", d.kubeconfigFor(d.viewerToken, "faultline-viewer"), "--timeout", "5s").CombinedOutput()
	d.say("          %s", clip(strings.TrimSpace(string(out)), 200))
	d.check("a viewer's request on a fault is refused by the API server", err != nil && strings.Contains(string(out), "forbidden"), errText(err))
}
