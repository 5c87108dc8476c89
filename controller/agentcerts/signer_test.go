package agentcerts_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"

	"github.com/faultline-dev/faultline/active-probes/agent"
	agentrbac "github.com/faultline-dev/faultline/active-probes/agent/rbac"
	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/controller/agentcerts"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/controller/rbac"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/fakeagent"
	"github.com/faultline-dev/faultline/test/testenv"
)

const (
	ns       = "faultline"
	agentSA  = "probe-agent"
	signerSA = "controller"
	// lifetime of the test's certificates: short, so that the agents renew during the test.
	lifetime = 12 * time.Second
)

// caFiles writes a CA's certificate and key as the chart's signer Secret holds them.
func caFiles(t *testing.T, dir string) (crt, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cert.NewSelfSignedCACert(cert.Config{CommonName: "faultline-probe-agent-ca"}, k)
	if err != nil {
		t.Fatal(err)
	}
	crtPEM, err := cert.EncodeCertificates(c)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(k)
	if err != nil {
		t.Fatal(err)
	}
	crt, key = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(crt, crtPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return crt, key
}

func bind(t *testing.T, cs kubernetes.Interface, role *rbacv1.ClusterRole, sa string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

type fixture struct {
	env           *testenv.Env
	admin         kubernetes.Interface
	caCert, caKey string
	signerToken   string
}

// agentClient is the client of the agent pod on node: its token is bound to that
// pod, as the kubelet's projected ServiceAccount token is.
func (f *fixture) agentClient(t *testing.T, node string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(f.env.RESTConfigForToken(f.env.PodToken(t, ns, agentSA, node, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// setup prepares the signer's and the agents' ServiceAccounts, each bound to
// exactly its ClusterRole, and the CA; run starts the signer.
func setup(t *testing.T) *fixture {
	t.Helper()
	role, err := rbac.SignerClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	return setupWith(t, role)
}

// setupWith is setup with role as the controller's.
func setupWith(t *testing.T, role *rbacv1.ClusterRole) *fixture {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	f := &fixture{env: env, admin: env.Clientset()}
	f.caCert, f.caKey = caFiles(t, t.TempDir())
	f.signerToken = env.ServiceAccountToken(t, ns, signerSA)
	env.ServiceAccountToken(t, ns, agentSA)
	bind(t, f.admin, role, signerSA)
	agentRole, err := agentrbac.NodeCertClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	bind(t, f.admin, agentRole, agentSA)
	return f
}

// run starts the signer as the controller's ServiceAccount.
func (f *fixture) run(t *testing.T) {
	t.Helper()
	ca, err := agentcerts.LoadCA(f.caCert, f.caKey)
	if err != nil {
		t.Fatal(err)
	}
	f.start(t, agentcerts.Config{CA: ca, Lifetime: lifetime})
}

// start runs the controller's part as its ServiceAccount, with cfg's signer.
func (f *fixture) start(t *testing.T, cfg agentcerts.Config) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(f.env.RESTConfigForToken(f.signerToken))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Client, cfg.AgentNamespace, cfg.AgentServiceAccount = cs, ns, agentSA
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := agentcerts.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// nodeCert starts the agent's certificate manager on node and waits for its first
// certificate.
func (f *fixture) nodeCert(t *testing.T, node string) certificate.Manager {
	t.Helper()
	m := f.startNodeCert(t, node, agent.NodeCertRequest{})
	eventually.True(t, 60*time.Second, "the agent of "+node+" holds a signed certificate", func() bool { return m.Current() != nil })
	return m
}

// startNodeCert starts the agent's certificate manager on node, asking req's signer.
func (f *fixture) startNodeCert(t *testing.T, node string, req agent.NodeCertRequest) certificate.Manager {
	t.Helper()
	m, err := agent.RequestNodeCertificate(f.agentClient(t, node), node, t.TempDir(), req, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Stop)
	return m
}

// request submits, as the client, a CSR of the agents' signer for the names, and
// returns its name.
func request(t *testing.T, cs kubernetes.Interface, names ...string) string {
	t.Helper()
	return requestOf(t, cs, agentapi.SignerName, names...)
}

// requestOf submits, as the client, a CSR of signer for the names.
func requestOf(t *testing.T, cs kubernetes.Interface, signer string, names ...string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: names[0]}, DNSNames: names}, key)
	if err != nil {
		t.Fatal(err)
	}
	name, _, err := csr.RequestCertificate(cs, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), "",
		signer, nil, agentapi.NodeCertUsages, key)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// decided waits for the CSR to carry a condition of typ and returns the CSR.
func (f *fixture) decided(t *testing.T, name string, typ certificatesv1.RequestConditionType) (*certificatesv1.CertificateSigningRequest, certificatesv1.CertificateSigningRequestCondition) {
	t.Helper()
	var got *certificatesv1.CertificateSigningRequest
	var cond certificatesv1.CertificateSigningRequestCondition
	eventually.True(t, 30*time.Second, "CSR "+name+" "+string(typ), func() bool {
		c, err := f.admin.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, x := range c.Status.Conditions {
			if x.Type == typ && x.Status == corev1.ConditionTrue {
				got, cond = c, x
				return true
			}
		}
		return false
	})
	return got, cond
}

func leafOf(t *testing.T, c *tls.Certificate) *x509.Certificate {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// TestNodeCertificates: on the real apiserver, an agent obtains a certificate of its
// own node through a CSR the signer approves and signs; requests for another node,
// from another identity or with a token bound to no pod are denied saying why; a
// the controller's client accepts an agent only for the node its certificate
// names; the agent renews its certificate before it expires.
func TestNodeCertificates(t *testing.T) {
	f := setup(t)
	f.run(t)
	ctx := context.Background()
	caPool := x509.NewCertPool()
	caPEM, err := os.ReadFile(f.caCert)
	if err != nil {
		t.Fatal(err)
	}
	caPool.AppendCertsFromPEM(caPEM)

	m := f.nodeCert(t, "gpu-a")

	t.Run("Issued", func(t *testing.T) {
		leaf := leafOf(t, m.Current())
		want := agentapi.NodeCertName("gpu-a")
		if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != want || leaf.Subject.CommonName != want || len(leaf.IPAddresses) != 0 {
			t.Errorf("certificate names %q (CN %q, IPs %v), want only %q", leaf.DNSNames, leaf.Subject.CommonName, leaf.IPAddresses, want)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: caPool, DNSName: want, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the certificate does not verify with the signer's CA for %s: %v", want, err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: caPool, DNSName: agentapi.NodeCertName("gpu-b")}); err == nil {
			t.Error("gpu-a's certificate verifies for gpu-b")
		}
		// The request carries the node the apiserver bound the token to: the
		// binding the approval rests on (Kubernetes 1.32's pod-bound tokens).
		list, err := f.admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var approved int
		for _, c := range list.Items {
			if c.Spec.SignerName != agentapi.SignerName || len(c.Status.Certificate) == 0 {
				continue
			}
			approved++
			if got := c.Spec.Extra[agentcerts.NodeNameExtra]; len(got) != 1 || got[0] != "gpu-a" {
				t.Errorf("CSR %s: extra %s = %q, want [gpu-a]", c.Name, agentcerts.NodeNameExtra, got)
			}
			if c.Spec.Username != "system:serviceaccount:"+ns+":"+agentSA {
				t.Errorf("CSR %s requested by %q", c.Name, c.Spec.Username)
			}
			var ok bool
			for _, x := range c.Status.Conditions {
				ok = ok || (x.Type == certificatesv1.CertificateApproved && x.Reason == agentcerts.ReasonApproved)
			}
			if !ok {
				t.Errorf("CSR %s signed without the signer's approval: %+v", c.Name, c.Status.Conditions)
			}
		}
		if approved == 0 {
			t.Error("no signed CSR of the agents' signer")
		}
	})

	t.Run("Denied", func(t *testing.T) {
		other := request(t, f.agentClient(t, "gpu-a"), agentapi.NodeCertName("gpu-b"))
		unbound, err := kubernetes.NewForConfig(f.env.RESTConfigForToken(f.env.ServiceAccountToken(t, ns, agentSA)))
		if err != nil {
			t.Fatal(err)
		}
		stranger, err := kubernetes.NewForConfig(f.env.RESTConfigForToken(f.env.PodToken(t, ns, "stranger", "gpu-a", nil)))
		if err != nil {
			t.Fatal(err)
		}
		agentRole, _ := agentrbac.NodeCertClusterRole()
		agentRole.Name = "stranger-csr"
		bind(t, f.admin, agentRole, "stranger")
		var strangerCSR string
		eventually.NoError(t, 10*time.Second, "the stranger's binding takes effect", func() error {
			_, err := stranger.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{Limit: 1})
			return err
		})
		strangerCSR = request(t, stranger, agentapi.NodeCertName("gpu-a"))
		cases := []struct{ name, csr, reason, says string }{
			{"another node", other, agentcerts.ReasonNodeMismatch, `node "gpu-b", but the requester's token is bound to a pod on node "gpu-a"`},
			{"a token bound to no pod", request(t, unbound, agentapi.NodeCertName("gpu-a")), agentcerts.ReasonNoNode, "not bound to a pod"},
			{"another ServiceAccount", strangerCSR, agentcerts.ReasonNotAgent, "not the probe agents' ServiceAccount"},
			{"an extra name", request(t, f.agentClient(t, "gpu-a"), agentapi.NodeCertName("gpu-a"), "faultline-probe-agent.faultline.svc"), agentcerts.ReasonBadRequest, "names only its node"},
		}
		for _, c := range cases {
			got, cond := f.decided(t, c.csr, certificatesv1.CertificateDenied)
			if cond.Reason != c.reason || !strings.Contains(cond.Message, c.says) {
				t.Errorf("%s: denied with %s: %q, want %s saying %q", c.name, cond.Reason, cond.Message, c.reason, c.says)
			}
			time.Sleep(500 * time.Millisecond) // a wrongful signature would come now
			got, err := f.admin.CertificatesV1().CertificateSigningRequests().Get(ctx, got.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Status.Certificate) != 0 {
				t.Errorf("%s: denied, yet signed", c.name)
			}
		}
	})

	t.Run("ControllerChecksTheNode", func(t *testing.T) { controllerChecksTheNode(t, m, f.caCert) })

	t.Run("Renewed", func(t *testing.T) {
		first := leafOf(t, m.Current())
		conf := agent.ManagedTLS(m)
		eventually.True(t, 3*lifetime, "the agent serves a renewed certificate before the first expires", func() bool {
			c, err := conf.GetCertificate(&tls.ClientHelloInfo{})
			if err != nil {
				t.Fatal(err)
			}
			leaf := leafOf(t, c)
			if leaf.SerialNumber.Cmp(first.SerialNumber) == 0 {
				return false
			}
			if time.Now().After(first.NotAfter) {
				t.Errorf("renewed only after the first certificate expired (%s)", first.NotAfter)
			}
			if leaf.PublicKey.(*ecdsa.PublicKey).Equal(first.PublicKey) {
				t.Error("the renewal kept the key")
			}
			return true
		})
	})
}

// controllerChecksTheNode: gpu-a's agent, serving m's certificate, verified with
// caFile: reached as gpu-a it answers; reached as gpu-b (its key stolen and served
// at gpu-b's address) the handshake fails and the token never leaves.
func controllerChecksTheNode(t *testing.T, m certificate.Manager, caFile string) {
	t.Helper()
	ctx := context.Background()
	a := fakeagent.Serve(t, agent.ManagedTLS(m))
	client, err := proberun.NodeAgentClient(caFile)
	if err != nil {
		t.Fatal(err)
	}
	d, err := proberun.New(proberun.Config{HTTP: client, Token: func() (string, error) { return "secret-token", nil },
		Agents: proberun.AgentResolver{Static: map[string]string{"gpu-a": a.URL, "gpu-b": a.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(node string) proberun.NodeRun {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := d.Start(cctx, proberun.Request{Nodes: []string{node}, Checks: []string{"nvml"}})
		if err != nil {
			t.Fatal(err)
		}
		if r, err = d.Wait(cctx, r.ID); err != nil {
			t.Fatal(err)
		}
		return r.Nodes[0]
	}
	if nr := run("gpu-a"); nr.Error != "" || nr.Status != probe.StatusPass {
		t.Fatalf("gpu-a's agent as gpu-a: %+v", nr)
	}
	seen := len(a.Tokens())
	if seen == 0 {
		t.Fatal("gpu-a's agent received no token")
	}
	nr := run("gpu-b")
	if nr.Status != probe.StatusError || !strings.Contains(nr.Error, "certificate is valid for "+agentapi.NodeCertName("gpu-a")) {
		t.Errorf("gpu-a's certificate reached as gpu-b: %+v, want a name mismatch", nr)
	}
	if got := a.Tokens(); len(got) != seen {
		t.Errorf("the agent posing as gpu-b received tokens %q", got[seen:])
	}
}

// A request someone else approved (an administrator, another approver) is still not
// signed unless it is an agent's for its own node: the signer marks it Failed.
func TestApprovedByAnotherNotSigned(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	name := request(t, f.agentClient(t, "gpu-a"), agentapi.NodeCertName("gpu-c"))
	c, err := f.admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Admin"})
	if _, err := f.admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.run(t)
	got, cond := f.decided(t, name, certificatesv1.CertificateFailed)
	if cond.Reason != agentcerts.ReasonNodeMismatch || len(got.Status.Certificate) != 0 {
		t.Errorf("approved by another for another node: %s %q, certificate %d bytes; want Failed, NodeMismatch, none", cond.Reason, cond.Message, len(got.Status.Certificate))
	}
}
