package rbac

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	agentrbac "github.com/faultline-dev/faultline/active-probes/agent/rbac"
	"github.com/faultline-dev/faultline/controller/agentcerts"
	"github.com/faultline-dev/faultline/test/testenv"
)

// externalSigner is a cert-manager ClusterIssuer's signer name.
const externalSigner = "clusterissuers.cert-manager.io/probe-agents"

// The approver's ClusterRole: plain verbs, approve for the configured signer only;
// no sign, no status writes, nothing on Secrets or other signers.
func TestApproverRoleShape(t *testing.T) {
	r, err := ApproverClusterRole(externalSigner)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range atoms(r.Rules) {
		if a.group != "certificates.k8s.io" || strings.Contains(a.group+a.resource+a.verb, "*") {
			t.Errorf("%s: only certificates.k8s.io, no wildcards", a)
		}
		if (a.verb == "approve") != (a.resource == "signers") || a.verb == "sign" || a.resource == "certificatesigningrequests/status" {
			t.Errorf("%s: approve on signers only, nothing that signs", a)
		}
		if a.resource == "signers" && a.name != externalSigner {
			t.Errorf("%s: limit it to %s", a, externalSigner)
		}
	}
	if _, err := ApproverClusterRole(""); err == nil {
		t.Error("an approver role without a signer name")
	}
}

// Every permission of the approver's ClusterRole is needed: on the real apiserver,
// the controller approving for an external signer, bound to the role less any one
// of them, leaves an agent's request for its own node unapproved, while the whole
// role approves it.
func TestApproverRBAC(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	admin := env.Clientset()
	ctx := context.Background()
	role, err := ApproverClusterRole(externalSigner)
	if err != nil {
		t.Fatal(err)
	}
	agentRole, err := agentrbac.NodeCertClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	env.ServiceAccountToken(t, ns, "probe-agent")
	bindRole(t, admin, agentRole, "probe-agent")
	agent := must(kubernetes.NewForConfig(env.RESTConfigForToken(env.PodToken(t, ns, "probe-agent", "gpu-1", nil)))).get(t)

	approved := func(t *testing.T, sa string, rules []rbacv1.PolicyRule, wait time.Duration) bool {
		t.Helper()
		r := role.DeepCopy()
		r.Name, r.Rules = sa, rules
		token := env.ServiceAccountToken(t, ns, sa)
		bindRole(t, admin, r, sa)
		cs := must(kubernetes.NewForConfig(env.RESTConfigForToken(token))).get(t)
		s := must(agentcerts.New(agentcerts.Config{Client: cs, SignerName: externalSigner, AgentNamespace: ns, AgentServiceAccount: "probe-agent",
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})).get(t)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go s.Run(sctx)
		name := nodeRequestOf(t, agent, "gpu-1", externalSigner)
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			c := must(admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})).get(t)
			for _, x := range c.Status.Conditions {
				if x.Type == certificatesv1.CertificateApproved {
					return true
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		return false
	}
	if !approved(t, "approver-whole", role.Rules, 30*time.Second) {
		t.Fatal("the whole role approved nothing")
	}
	eachPermissionNeeded(t, env, role, "approver-without-", externalSigner, func(t *testing.T, sa string, rules []rbacv1.PolicyRule) bool {
		return approved(t, sa, rules, 5*time.Second)
	})
}
