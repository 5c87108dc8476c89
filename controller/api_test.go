package controller_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/faultline-dev/faultline/controller/rbac"
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

// withToken serves h to callers that send no credentials as the bearer of token.
func withToken(token string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(w, r)
	})
}

// Every endpoint and verb of the API refuses callers without a valid token (401) and
// callers whose identity lacks the permission (403); faultline-viewer reads but may
// not start probes (/status) or untaint, faultline-operator may.
func TestAPIAuth(t *testing.T) {
	cl := newCluster(t, "gpu-1")
	r := cl.start(options{})
	srv := httptest.NewServer(r.c.Handler())
	t.Cleanup(srv.Close)

	viewerRole, _, err := rbac.APIRoles()
	if err != nil {
		t.Fatal(err)
	}
	// Starts runs (/status) and nothing else.
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
	type endpoint struct {
		method, path, body string
		allowed            []string // who passes authorization; everyone else gets 401 or 403
	}
	endpoints := []endpoint{
		{"GET", "/status?host=gpu-1&check=nvml", "", []string{"runner", "operator"}},
	}
	for _, e := range endpoints {
		for who, tok := range tokens {
			req, err := http.NewRequest(e.method, srv.URL+e.path, strings.NewReader(e.body))
			if err != nil {
				t.Fatal(err)
			}
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			// Reviews of new tokens are rate limited (kubeauth.DefaultReviewBurst):
			// a refused one is asked again after its Retry-After.
			for err == nil && resp.StatusCode == http.StatusTooManyRequests {
				resp.Body.Close()
				time.Sleep(time.Second)
				req.Body = io.NopCloser(strings.NewReader(e.body))
				resp, err = http.DefaultClient.Do(req)
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := http.StatusForbidden
			switch {
			case who == "none" || who == "bogus":
				want = http.StatusUnauthorized
			case slices.Contains(e.allowed, who):
				want = 0 // served: whatever the endpoint answers, not 401 or 403
			}
			got := resp.StatusCode
			if (want == 0 && (got == http.StatusUnauthorized || got == http.StatusForbidden)) || (want != 0 && got != want) {
				t.Errorf("%s %s %s as %s: %d, want %v", e.method, e.path, e.body, who, got, map[int]string{0: "served"}[want]+http.StatusText(want))
			}
		}
	}
	// The probe endpoints are gone (runs are ProbeRun objects), and so are the
	// faults and Loki's health (NodeFaults, the Lease, metrics): not found, whoever asks.
	for _, e := range []struct{ method, path string }{{"GET", "/api/v1/probes"}, {"POST", "/api/v1/probes"}, {"GET", "/api/v1/probes/some-run"},
		{"GET", "/api/v1/faults"}, {"GET", "/api/v1/loki/health"}} {
		req, err := http.NewRequest(e.method, srv.URL+e.path, strings.NewReader(`{"nodes":["gpu-1"],"checks":["nvml"]}`))
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
			t.Errorf("%s %s as operator: %d, want 404", e.method, e.path, resp.StatusCode)
		}
	}
	// /healthz and /readyz stay open for the kubelet.
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", p, resp.StatusCode)
		}
	}
}
