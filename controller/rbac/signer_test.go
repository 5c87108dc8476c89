package rbac

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"

	agentrbac "github.com/faultline-dev/faultline/active-probes/agent/rbac"
	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/controller/agentcerts"
	"github.com/faultline-dev/faultline/test/testenv"
)

// The signer's ClusterRole: plain verbs, approve and sign for the agents' signer
// only, nothing on Secrets or other signers.
func TestSignerRoleShape(t *testing.T) {
	r, err := SignerClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range atoms(r.Rules) {
		if a.group != "certificates.k8s.io" || strings.Contains(a.group+a.resource+a.verb, "*") {
			t.Errorf("%s: only certificates.k8s.io, no wildcards", a)
		}
		if (a.verb == "approve" || a.verb == "sign") != (a.resource == "signers") {
			t.Errorf("%s: approve and sign are verbs on signers only", a)
		}
		if a.resource == "signers" && a.name != agentapi.SignerName {
			t.Errorf("%s: limit it to %s", a, agentapi.SignerName)
		}
	}
}

// Every permission of the signer's ClusterRole is needed: on the real apiserver, a
// signer bound to the role less any one of them leaves an agent's request for its
// own node without a certificate, while the whole role issues it.
func TestSignerRBAC(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	admin := env.Clientset()
	ctx := context.Background()
	role, err := SignerClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	agentRole, err := agentrbac.NodeCertClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	env.ServiceAccountToken(t, ns, "probe-agent")
	bindRole(t, admin, agentRole, "probe-agent")
	caFile, keyFile := signerCA(t)
	agent := must(kubernetes.NewForConfig(env.RESTConfigForToken(env.PodToken(t, ns, "probe-agent", "gpu-1", nil)))).get(t)

	issued := func(t *testing.T, sa string, rules []rbacv1.PolicyRule, wait time.Duration) bool {
		t.Helper()
		r := role.DeepCopy()
		r.Name, r.Rules = sa, rules
		token := env.ServiceAccountToken(t, ns, sa)
		bindRole(t, admin, r, sa)
		cs := must(kubernetes.NewForConfig(env.RESTConfigForToken(token))).get(t)
		ca := must(agentcerts.LoadCA(caFile, keyFile)).get(t)
		s := must(agentcerts.New(agentcerts.Config{Client: cs, AgentNamespace: ns, AgentServiceAccount: "probe-agent", CA: ca,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})).get(t)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go s.Run(sctx)
		name := nodeRequest(t, agent, "gpu-1")
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			c := must(admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})).get(t)
			if len(c.Status.Certificate) > 0 {
				return true
			}
			time.Sleep(200 * time.Millisecond)
		}
		return false
	}
	if !issued(t, "signer-whole", role.Rules, 30*time.Second) {
		t.Fatal("the whole role issued no certificate")
	}
	eachPermissionNeeded(t, env, role, "signer-without-", agentapi.SignerName, func(t *testing.T, sa string, rules []rbacv1.PolicyRule) bool {
		return issued(t, sa, rules, 5*time.Second)
	})
}

// eachPermissionNeeded proves each permission of a CSR signer's or approver's role
// needed: without it, works (a certificate issued, a request approved) fails for a
// ServiceAccount bound to the rest. Without watch the informer's reflector falls
// back to listing again and again, so the work is still done, late and at the cost
// of a list each time: the proof is then the informer's watch being refused.
func eachPermissionNeeded(t *testing.T, env *testenv.Env, role *rbacv1.ClusterRole, prefix, signer string,
	works func(t *testing.T, sa string, rules []rbacv1.PolicyRule) bool) {
	t.Helper()
	ctx := context.Background()
	admin := env.Clientset()
	for _, a := range atoms(role.Rules) {
		t.Run(a.String(), func(t *testing.T) {
			sa := prefix + strings.NewReplacer("/", "-", ":", "-", "@", "-", ".", "-").Replace(a.String())
			if a.verb == "watch" {
				r := role.DeepCopy()
				r.Name, r.Rules = sa, without(role.Rules, a)
				token := env.ServiceAccountToken(t, ns, sa)
				bindRole(t, admin, r, sa)
				cs := must(kubernetes.NewForConfig(env.RESTConfigForToken(token))).get(t)
				eventually(t, "the binding of "+sa, func() error {
					_, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{Limit: 1})
					return err
				})
				w, err := cs.CertificatesV1().CertificateSigningRequests().Watch(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=" + signer})
				if err == nil {
					w.Stop()
					t.Error("the informer's watch is allowed without watch")
				}
				return
			}
			if works(t, sa, without(role.Rules, a)) {
				t.Errorf("the work was done without %s", a)
			}
		})
	}
}

func bindRole(t *testing.T, cs kubernetes.Interface, r *rbacv1.ClusterRole, sa string) {
	t.Helper()
	ctx := context.Background()
	must(cs.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})).get(t)
	must(cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Name},
		Subjects:   subject(ns, sa),
	}, metav1.CreateOptions{})).get(t)
}

// signerCA writes a CA certificate and key for the signer.
func signerCA(t *testing.T) (crt, key string) {
	t.Helper()
	k := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)).get(t)
	c := must(cert.NewSelfSignedCACert(cert.Config{CommonName: "probe-agent-ca"}, k)).get(t)
	dir := t.TempDir()
	crt, key = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(crt, must(cert.EncodeCertificates(c)).get(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, must(keyutil.MarshalPrivateKeyToPEM(k)).get(t), 0o600); err != nil {
		t.Fatal(err)
	}
	return crt, key
}

// nodeRequest submits, as an agent, the request for its node's certificate.
func nodeRequest(t *testing.T, agent kubernetes.Interface, node string) string {
	t.Helper()
	return nodeRequestOf(t, agent, node, agentapi.SignerName)
}

// nodeRequestOf is nodeRequest to signer.
func nodeRequestOf(t *testing.T, agent kubernetes.Interface, node, signer string) string {
	t.Helper()
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)).get(t)
	name := agentapi.NodeCertName(node)
	der := must(x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name}}, key)).get(t)
	var reqName string
	eventually(t, "the agent's request", func() error {
		var err error
		reqName, _, err = csr.RequestCertificate(agent, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), "",
			signer, nil, agentapi.NodeCertUsages, key)
		return err
	})
	return reqName
}
