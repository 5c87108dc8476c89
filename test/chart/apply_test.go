package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/faultline-dev/faultline/rules/stepspec"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestApply applies every render (the committed manifests/ for the defaults) to a
// real kube-apiserver with kubectl apply --server-side — after minimal CRDs for the
// Prometheus Operator's kinds, so ServiceMonitors and the PrometheusRule are applied
// too — and checks that every object exists afterwards and that a second apply
// changes nothing. kubectl validates fields strictly on the server, so a misspelt
// field fails here. Then it asks the apiserver's RBAC authorizer, as each
// ServiceAccount of the chart, what that account may do.
func TestApply(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	kubectl := testenv.Binary(t, "kubectl")
	root := repoRoot(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", env.Kubeconfig()}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("apply", "--server-side", "-f", filepath.Join(root, "test", "chart", "testdata", "crds"))
	// The chart's own CRD (helm installs crds/ before the templates).
	run("apply", "--server-side", "-f", filepath.Join(root, chartDir, "crds"))
	run("wait", "--for=condition=Established", "--timeout=60s",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com", "crd/nodefaults.faultline.io")

	cs := env.Clientset()
	dyn, err := dynamic.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rendered := render(t, c)
			objs := parse(t, rendered)
			file := filepath.Join(t.TempDir(), "rendered.yaml")
			if c.name == "manifests" {
				// What users apply: the committed manifests (TestManifestsFresh keeps them
				// equal to this render).
				file = filepath.Join(root, "manifests", "faultline.yaml")
			} else if err := os.WriteFile(file, rendered, 0o644); err != nil {
				t.Fatal(err)
			}
			namespaces := map[string]bool{c.namespace: true}
			for _, o := range objs {
				if ns := o.GetNamespace(); ns != "" {
					namespaces[ns] = true
				}
			}
			for ns := range namespaces {
				_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			}
			run("apply", "--server-side", "--field-manager=faultline-chart-test", "-f", file)
			// read returns every rendered object from the apiserver by key.
			read := func() map[string]string {
				versions := map[string]string{}
				for _, o := range objs {
					gvk := o.GroupVersionKind()
					m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
					if err != nil {
						t.Errorf("%s %s: %v", gvk, o.GetName(), err)
						continue
					}
					var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
					if o.GetNamespace() != "" {
						ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
					}
					got, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
					if err != nil {
						t.Errorf("%s %s/%s was applied but cannot be read: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
						continue
					}
					if got.GetLabels()["app.kubernetes.io/part-of"] != "faultline" {
						t.Errorf("%s %s: labels %v", gvk.Kind, o.GetName(), got.GetLabels())
					}
					versions[gvk.Kind+" "+o.GetNamespace()+"/"+o.GetName()] = got.GetResourceVersion()
				}
				return versions
			}
			first := read()
			// Applying the same objects again changes nothing (what helm upgrade or a
			// GitOps tool does with unchanged values).
			run("apply", "--server-side", "--field-manager=faultline-chart-test", "-f", file)
			for key, rv := range read() {
				if first[key] != rv {
					t.Errorf("%s changed on the second apply (resourceVersion %s -> %s)", key, first[key], rv)
				}
			}
			t.Logf("%d objects applied", len(objs))
		})
	}

	// What the chart's ServiceAccounts may do, as the apiserver's RBAC authorizer sees it.
	type check struct {
		ns, verb, group, resource, sub, name string
		allowed                              bool
	}
	accounts := []struct {
		ns, sa string
		checks []check
	}{
		{"faultline", "faultline-controller", []check{
			{"", "patch", "", "nodes", "", "gpu-1", true},
			{"", "update", "", "nodes", "", "gpu-1", false},
			{"", "watch", "", "nodes", "", "", true},
			{"", "patch", "", "nodes", "status", "gpu-1", true},
			{"default", "create", "", "events", "", "", true},
			{"faultline", "create", "", "events", "", "", true},
			// A fault's pods get an Event wherever they run; Events are never deleted.
			{"kube-system", "create", "", "events", "", "", true},
			{"kube-system", "delete", "", "events", "", "", false},
			{"faultline", "update", "coordination.k8s.io", "leases", "", "faultline-controller", true},
			{"faultline", "update", "", "configmaps", "", "faultline-checkpoint", true},
			{"default", "update", "coordination.k8s.io", "leases", "", "faultline-controller", false},
			{"default", "update", "", "configmaps", "", "faultline-checkpoint", false},
			{"", "create", "faultline.io", "probes", "", "gpu-1", true},
			{"", "delete", "", "nodes", "", "gpu-1", false},
			{"faultline", "get", "", "secrets", "", "", false},
			// Only its own Lease and checkpoint; the pods of every namespace watched
			// (the GPU pods' informer), their ReplicaSets and Jobs read, not written.
			{"faultline", "get", "", "configmaps", "", "faultline-default-packs", false},
			{"faultline", "update", "coordination.k8s.io", "leases", "", "another", false},
			{"faultline", "watch", "", "pods", "", "", true},
			{"default", "watch", "", "pods", "", "", true},
			{"default", "get", "batch", "jobs", "", "", true},
			{"default", "get", "apps", "replicasets", "", "", true},
			{"default", "update", "batch", "jobs", "", "", false},
			{"default", "list", "apps", "replicasets", "", "", false},
			// The ladder's steps may do what their specs say (stepChecks); the
			// drain's pods are never deleted, DaemonSets only read by name.
			{"default", "list", "apps", "daemonsets", "", "", false},
			{"default", "delete", "", "pods", "", "", false},
			{"default", "list", "policy", "poddisruptionbudgets", "", "", true},
			// The intake: its leader's address in its own EndpointSlice, by name; the
			// reviews of the collector's requests. It pushes no lines itself.
			{"faultline", "get", "discovery.k8s.io", "endpointslices", "", "faultline-controller-intake", true},
			{"faultline", "update", "discovery.k8s.io", "endpointslices", "", "faultline-controller-intake", true},
			{"", "create", "authentication.k8s.io", "tokenreviews", "", "", true},
			{"", "create", "authorization.k8s.io", "subjectaccessreviews", "", "", true},
			{"faultline", "update", "discovery.k8s.io", "endpointslices", "", "another", false},
			{"faultline", "list", "discovery.k8s.io", "endpointslices", "", "", false},
			{"faultline", "create", "discovery.k8s.io", "endpointslices", "", "", false},
			{"faultline", "delete", "discovery.k8s.io", "endpointslices", "", "faultline-controller-intake", false},
			{"default", "update", "discovery.k8s.io", "endpointslices", "", "faultline-controller-intake", false},
			{"", "create", "faultline.io", "loglines", "", "", false},
		}},
		{"faultline", "faultline-otel-collector", []check{
			// It may push lines to the intake, and review its senders' tokens; nothing else.
			{"", "create", "faultline.io", "loglines", "", "", true},
			{"", "create", "authentication.k8s.io", "tokenreviews", "", "", true},
			{"", "get", "faultline.io", "loglines", "", "", false},
			{"", "delete", "faultline.io", "loglines", "", "", false},
			{"", "create", "authorization.k8s.io", "subjectaccessreviews", "", "", false},
			{"faultline", "get", "discovery.k8s.io", "endpointslices", "", "faultline-controller-intake", false},
			{"faultline", "update", "discovery.k8s.io", "endpointslices", "", "faultline-controller-intake", false},
			{"", "create", "faultline.io", "probes", "", "gpu-1", false},
			{"", "list", "", "pods", "", "", false},
			{"faultline", "get", "", "secrets", "", "", false},
		}},
		{"faultline", "faultline-probe-agent", []check{
			{"", "create", "authentication.k8s.io", "tokenreviews", "", "", true},
			{"", "create", "authorization.k8s.io", "subjectaccessreviews", "", "", true},
			{"", "list", "", "pods", "", "", false}, // GPU pods come from the kubelet's PodResources API
			{"", "watch", "", "pods", "", "", false},
			{"", "create", "faultline.io", "probes", "", "gpu-1", false},
			{"", "list", "", "nodes", "", "", true},        // the agent nodes' addresses: allowed peers
			{"", "update", "", "nodes", "", "gpu-1", true}, // the probing taint; the admission policy bounds it
			{"", "patch", "", "nodes", "status", "gpu-1", false},
			{"", "delete", "", "nodes", "", "gpu-1", false},
		}},
		{"faultline", "faultline-dmesg-exporter", []check{
			{"", "list", "", "pods", "", "", false},
			{"", "get", "", "nodes", "", "", false},
		}},
		{"fl-existing", "ex-faultline-dmesg-exporter", []check{ // podLogs.labelSelector set
			{"", "list", "", "pods", "", "", true},
			{"", "watch", "", "pods", "", "", true},
			{"", "get", "", "secrets", "", "", false},
		}},
	}
	// What the remediation steps' specs (rules/stepspec) say their Do needs, in
	// any namespace: a node's pods run anywhere.
	for i := range accounts {
		if accounts[i].sa != "faultline-controller" {
			continue
		}
		for _, sp := range stepspec.All() {
			for _, ac := range sp.Access {
				res, sub, _ := strings.Cut(ac.Resource, "/")
				for _, v := range ac.Verbs {
					accounts[i].checks = append(accounts[i].checks, check{"default", v, ac.Group, res, sub, "", true})
				}
			}
		}
	}
	for _, a := range accounts {
		t.Run("rbac/"+a.ns+"/"+a.sa, func(t *testing.T) {
			if _, err := cs.CoreV1().ServiceAccounts(a.ns).Get(ctx, a.sa, metav1.GetOptions{}); err != nil {
				t.Fatalf("the chart did not create ServiceAccount %s/%s: %v", a.ns, a.sa, err)
			}
			as, err := kubernetes.NewForConfig(env.RESTConfigForToken(env.ServiceAccountToken(t, a.ns, a.sa)))
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range a.checks {
				attrs := authorizationv1.ResourceAttributes{
					Namespace: ch.ns, Verb: ch.verb, Group: ch.group, Resource: ch.resource, Subresource: ch.sub, Name: ch.name}
				// A denied check is asked after the allowed ones settled.
				if ch.allowed {
					waitAllowed(t, as, attrs)
					continue
				}
				st, err := selfReview(ctx, as, attrs)
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("%s %s.%s/%s %q in %q", ch.verb, ch.resource, ch.group, ch.sub, ch.name, ch.ns)
				if st.Allowed {
					t.Errorf("%s/%s may %s, want denied (%s)", a.ns, a.sa, what, st.Reason)
				}
			}
		})
	}
}
