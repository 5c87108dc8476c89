package agentcerts_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/controller/agentcerts"
	"github.com/faultline-dev/faultline/controller/rbac"
	"github.com/faultline-dev/faultline/test/eventually"
)

// externalSigner is a cert-manager Issuer's signer name.
const externalSigner = "issuers.cert-manager.io/faultline.probe-agents"

// standInField is the field manager of the stand-in signer's writes.
const standInField = "stand-in-signer"

// TestExternalSigner: with an external signer (cert-manager), the controller,
// bound to the approver role only, approves an agent's request for its own node and
// denies one for another node, and writes no certificate; a stand-in for
// cert-manager signs the approved request with its own CA through the CSR API, the
// agent serves it, and the controller accepts it only for that node.
func TestExternalSigner(t *testing.T) {
	role, err := rbac.ApproverClusterRole(externalSigner)
	if err != nil {
		t.Fatal(err)
	}
	f := setupWith(t, role)
	f.start(t, agentcerts.Config{SignerName: externalSigner})
	ctx := context.Background()

	m := f.startNodeCert(t, "gpu-a", agent.NodeCertRequest{SignerName: externalSigner, Lifetime: agent.MinNodeCertLifetime})
	var agentCSR string
	eventually.True(t, 30*time.Second, "the agent's request is approved", func() bool {
		list, err := f.admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.signerName", externalSigner).String()})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list.Items {
			for _, x := range c.Status.Conditions {
				if x.Type == certificatesv1.CertificateApproved && x.Reason == agentcerts.ReasonApproved {
					agentCSR = c.Name
					return true
				}
			}
		}
		return false
	})
	other := requestOf(t, f.agentClient(t, "gpu-a"), externalSigner, agentapi.NodeCertName("gpu-b"))
	_, cond := f.decided(t, other, certificatesv1.CertificateDenied)
	if cond.Reason != agentcerts.ReasonNodeMismatch || !strings.Contains(cond.Message, `node "gpu-b"`) {
		t.Errorf("another node's name: denied with %s %q, want %s", cond.Reason, cond.Message, agentcerts.ReasonNodeMismatch)
	}
	time.Sleep(time.Second) // a signature by the controller would come now
	c, err := f.admin.CertificatesV1().CertificateSigningRequests().Get(ctx, agentCSR, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Status.Certificate) != 0 || m.Current() != nil {
		t.Fatal("the controller signed for an external signer")
	}
	if got := c.Spec.ExpirationSeconds; got == nil || *got != int32(agent.MinNodeCertLifetime/time.Second) {
		t.Errorf("spec.expirationSeconds %v, want the agent's %s", got, agent.MinNodeCertLifetime)
	}

	// cert-manager's part: sign what was approved.
	caCert, caKey := readCA(t, f.caCert, f.caKey)
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go standIn(sctx, t, f, caCert, caKey)
	eventually.True(t, 60*time.Second, "the agent of gpu-a serves the certificate the external signer issued", func() bool { return m.Current() != nil })

	leaf := leafOf(t, m.Current())
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: agentapi.NodeCertName("gpu-a"), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the agent's certificate does not verify with the external signer's CA: %v", err)
	}
	// Who wrote the certificate: the stand-in alone.
	for _, name := range []string{agentCSR, other} {
		c, err := f.admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range c.ManagedFields {
			if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:certificate"`) && mf.Manager != standInField {
				t.Errorf("CSR %s: status.certificate written by %q", name, mf.Manager)
			}
		}
		if name == other && len(c.Status.Certificate) != 0 {
			t.Error("the denied request for gpu-b was signed")
		}
	}
	controllerChecksTheNode(t, m, f.caCert)
}

func readCA(t *testing.T, certFile, keyFile string) (*x509.Certificate, any) {
	t.Helper()
	certs, err := cert.CertsFromFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := keyutil.PrivateKeyFromFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0], key
}

// standIn signs, as cert-manager would, the approved and not denied requests of
// the external signer with its CA, for their requested lifetime, until ctx ends.
func standIn(ctx context.Context, t *testing.T, f *fixture, ca *x509.Certificate, key any) {
	csrs := f.admin.CertificatesV1().CertificateSigningRequests()
	for ctx.Err() == nil {
		list, err := csrs.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.signerName", externalSigner).String()})
		if err != nil {
			continue
		}
		for i := range list.Items {
			c := &list.Items[i]
			var approved, denied bool
			for _, x := range c.Status.Conditions {
				approved = approved || (x.Type == certificatesv1.CertificateApproved && x.Status == corev1.ConditionTrue)
				denied = denied || x.Type == certificatesv1.CertificateDenied
			}
			if !approved || denied || len(c.Status.Certificate) > 0 {
				continue
			}
			block, _ := pem.Decode(c.Spec.Request)
			req, err := x509.ParseCertificateRequest(block.Bytes)
			if err != nil {
				t.Errorf("stand-in: %v", err)
				return
			}
			life := 90 * 24 * time.Hour
			if e := c.Spec.ExpirationSeconds; e != nil {
				life = time.Duration(*e) * time.Second
			}
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: req.Subject.CommonName},
				DNSNames: req.DNSNames, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(life),
				KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, req.PublicKey, key)
			if err != nil {
				t.Errorf("stand-in: %v", err)
				return
			}
			c.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
			if _, err := csrs.UpdateStatus(ctx, c, metav1.UpdateOptions{FieldManager: standInField}); err != nil && ctx.Err() == nil {
				t.Logf("stand-in: %v", err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The controller signs for its own signer only: a CA is required there, and
// refused with an external signer's name.
func TestSignerConfig(t *testing.T) {
	ca, err := agentcerts.LoadCA(caFiles(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	for _, c := range []struct {
		cfg  agentcerts.Config
		fail string
	}{
		{agentcerts.Config{CA: ca}, ""},
		{agentcerts.Config{}, "a CA is required"},
		{agentcerts.Config{SignerName: externalSigner}, ""},
		{agentcerts.Config{SignerName: externalSigner, CA: ca}, "only approves"},
	} {
		c.cfg.Client, c.cfg.AgentNamespace, c.cfg.AgentServiceAccount = cs, ns, agentSA
		_, err := agentcerts.New(c.cfg)
		if (c.fail == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.fail)) {
			t.Errorf("signer %q, CA %v: error %v, want %q", c.cfg.SignerName, c.cfg.CA != nil, err, c.fail)
		}
	}
}
