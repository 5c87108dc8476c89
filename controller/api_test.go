package controller_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/rbac"
	"github.com/faultline-dev/faultline/controller/statusapi"
	"github.com/faultline-dev/faultline/test/eventually"
)

// apiUser returns a token for a ServiceAccount bound to role (nil: no role).
func (cl *cluster) apiUser(name string, role *rbacv1.ClusterRole) string {
	cl.t.Helper()
	tok := cl.env.ServiceAccountToken(cl.t, ns, name)
	if role == nil {
		return tok
	}
	ctx := context.Background()
	if _, err := cl.cs.RbacV1().ClusterRoles().Get(ctx, role.Name, metav1.GetOptions{}); err != nil {
		if _, err := cl.cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			cl.t.Fatal(err)
		}
	}
	_, err := cl.cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
	}, metav1.CreateOptions{})
	if err != nil {
		cl.t.Fatal(err)
	}
	// The apiserver's authorizer sees a new binding through its informers, a moment
	// after the create: wait until it allows the role's first rule, so a request
	// made at once is not refused for a binding not yet seen.
	for _, r := range role.Rules {
		if len(r.Resources) == 0 || len(r.Verbs) == 0 || len(r.APIGroups) == 0 {
			continue
		}
		user := "system:serviceaccount:" + ns + ":" + name
		eventually.True(cl.t, 30*time.Second, "the binding of "+user+" authorizes", func() bool {
			sar, err := cl.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
					Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{Group: r.APIGroups[0], Resource: r.Resources[0], Verb: r.Verbs[0]}},
			}, metav1.CreateOptions{})
			return err == nil && sar.Status.Allowed
		})
		break
	}
	return tok
}

// operator returns a token bound to the repository's faultline-operator role.
func (cl *cluster) operator() string {
	cl.t.Helper()
	_, op, err := rbac.APIRoles()
	if err != nil {
		cl.t.Fatal(err)
	}
	return cl.apiUser("operator", op)
}

// kubeconfigFor writes a kubeconfig whose user authenticates with token, as the
// CLI's users' kubeconfigs do.
func (cl *cluster) kubeconfigFor(token string) string {
	cl.t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: cl.env.APIServerURL(), InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(cl.t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		cl.t.Fatal(err)
	}
	return path
}

// statusServer serves replica r's GET /status over TLS, as --status-listen does:
// each run is created with the caller's token against the test's apiserver.
func (cl *cluster) statusServer(r *running) *httptest.Server {
	cl.t.Helper()
	runs, err := v1alpha1.NewRESTClient(cl.cs)
	if err != nil {
		cl.t.Fatal(err)
	}
	srv, err := statusapi.New(statusapi.Config{APIServer: cl.env.RESTConfig(), Runs: runs, Nodes: r.c.Triggers().ProbeNodes,
		DefaultChecks: probe.Default().DefaultEnabled()})
	if err != nil {
		cl.t.Fatal(err)
	}
	ts := httptest.NewTLSServer(srv.Handler())
	cl.t.Cleanup(ts.Close)
	return ts
}

// getStatus sends GET path to ts as the bearer of token ("": none).
func getStatus(t *testing.T, ts *httptest.Server, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStatusInCallersName: /status on its TLS listener creates its ProbeRun with
// the caller's token, so the API server decides by RBAC on proberuns: no token or a
// bogus one 401, a stranger, a viewer and a holder of create probes alone 403 (no
// run created), an operator's run created (and answered: probes are off here, so
// refused with 503). The plain port has no /status, nor any other path that takes a
// token: 404 with an operator's token.
func TestStatusInCallersName(t *testing.T) {
	cl := newCluster(t, "gpu-1")
	r := cl.start(options{})
	ts := cl.statusServer(r)
	viewerRole, _, err := rbac.APIRoles()
	if err != nil {
		t.Fatal(err)
	}
	runner := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "api-runner"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"faultline.io"}, Resources: []string{"probes"}, Verbs: []string{"create"}}}}
	tokens := map[string]string{
		"none":     "",
		"bogus":    "not-a-token",
		"stranger": cl.apiUser("stranger", nil),
		"viewer":   cl.apiUser("viewer", viewerRole),
		"runner":   cl.apiUser("runner", runner),
		"operator": cl.operator(),
	}
	runs, err := v1alpha1.NewRESTClient(cl.cs)
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var l v1alpha1.ProbeRunList
		if err := runs.Get().Resource(v1alpha1.ProbeRunResource).Do(context.Background()).Into(&l); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, pr := range l.Items {
			if pr.Spec.Reason == "GET /status" {
				n++
			}
		}
		return n
	}
	for _, who := range []string{"none", "bogus", "stranger", "viewer", "runner", "operator"} {
		code, body := getStatus(t, ts, "/status?host=gpu-1&check=nvml", tokens[who])
		want, created := http.StatusForbidden, 0
		switch who {
		case "none", "bogus":
			want = http.StatusUnauthorized
		case "operator":
			want, created = http.StatusServiceUnavailable, 1
		}
		if code != want || count() != created {
			t.Errorf("/status as %s: %d %q, %d runs; want %d, %d runs", who, code, body, count(), want, created)
		}
		if who == "operator" && !strings.Contains(body, v1alpha1.ReasonProbesOff) {
			t.Errorf("/status as operator: %q, want the run refused for %s", body, v1alpha1.ReasonProbesOff)
		}
	}

	plain := httptest.NewServer(r.c.Handler())
	t.Cleanup(plain.Close)
	for _, p := range []string{"/status?host=gpu-1&check=nvml", "/api/v1/faults", "/api/v1/loki/health", "/api/v1/probes", "/api/v1/nodes/gpu-1/untaint"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, err := http.NewRequest(method, plain.URL+p, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tokens["operator"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("plain %s %s as operator: %d, want 404", method, p, resp.StatusCode)
			}
		}
	}
	if n := count(); n != 1 {
		t.Errorf("%d runs after the plain port's requests, want the operator's one", n)
	}
}
