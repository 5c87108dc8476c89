package agentcerts

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
)

// NodeNameExtra is where the apiserver writes the node of a pod-bound
// ServiceAccount token in the requester's extra information (Kubernetes 1.30 and
// later, feature ServiceAccountTokenPodNodeInfo, on by default); a CSR's
// spec.extra copies it from the identity that created the CSR, which the
// requester cannot choose.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// Reasons of the conditions the signer writes on a CSR.
const (
	ReasonApproved     = "FaultlineProbeAgentNode"
	ReasonNotAgent     = "NotProbeAgent"
	ReasonNoNode       = "NoBoundNode"
	ReasonNodeMismatch = "NodeMismatch"
	ReasonBadRequest   = "BadRequest"
)

// refusal is why a CSR is denied (or, once approved by someone else, not signed).
type refusal struct{ reason, message string }

func refuse(reason, format string, args ...any) *refusal {
	return &refusal{reason: reason, message: fmt.Sprintf(format, args...)}
}

// check returns the parsed request of csr when it is an agent's request for its
// own node's certificate: created by the agents' ServiceAccount with a token bound
// to a pod on node N, asking for exactly the name of N, a server certificate, with
// a key of a sound size. Anything else is a refusal saying why.
func (s *Signer) check(csr *certificatesv1.CertificateSigningRequest) (*x509.CertificateRequest, *refusal) {
	want := "system:serviceaccount:" + s.cfg.AgentNamespace + ":" + s.cfg.AgentServiceAccount
	if csr.Spec.Username != want {
		return nil, refuse(ReasonNotAgent, "requested by %q, not the probe agents' ServiceAccount %s", csr.Spec.Username, want)
	}
	nodes := csr.Spec.Extra[NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return nil, refuse(ReasonNoNode, "the requester's token is not bound to a pod on a node (no single %s)", NodeNameExtra)
	}
	node := nodes[0]
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, refuse(ReasonBadRequest, "spec.request holds no PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, refuse(ReasonBadRequest, "spec.request: %v", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, refuse(ReasonBadRequest, "spec.request signature: %v", err)
	}
	name := agentapi.NodeCertName(node)
	for _, n := range append([]string{req.Subject.CommonName}, req.DNSNames...) {
		if n != name {
			other, ok := agentapi.NodeOfCertName(n)
			if ok {
				return nil, refuse(ReasonNodeMismatch, "asks for a certificate of node %q, but the requester's token is bound to a pod on node %q", other, node)
			}
			return nil, refuse(ReasonBadRequest, "asks for the name %q: an agent's certificate names only its node, %q", n, name)
		}
	}
	if len(req.DNSNames) != 1 || len(req.IPAddresses) > 0 || len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return nil, refuse(ReasonBadRequest, "want exactly one name, the DNS name %q, and no addresses or URIs", name)
	}
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageServerAuth) {
		return nil, refuse(ReasonBadRequest, "usages %v lack %q", csr.Spec.Usages, certificatesv1.UsageServerAuth)
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains(agentapi.NodeCertUsages, u) {
			return nil, refuse(ReasonBadRequest, "usage %q: an agent's certificate is for a TLS server only (%v)", u, agentapi.NodeCertUsages)
		}
	}
	if err := soundKey(req.PublicKey); err != nil {
		return nil, refuse(ReasonBadRequest, "%v", err)
	}
	return req, nil
}

// soundKey accepts ECDSA P-256 and P-384, Ed25519, and RSA of 2048 bits or more.
func soundKey(pub any) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
		return fmt.Errorf("ECDSA curve %s: want P-256 or P-384", k.Curve.Params().Name)
	case *rsa.PublicKey:
		if k.N.BitLen() >= 2048 {
			return nil
		}
		return fmt.Errorf("RSA key of %d bits: want 2048 or more", k.N.BitLen())
	case ed25519.PublicKey:
		return nil
	}
	return fmt.Errorf("key type %T", pub)
}
