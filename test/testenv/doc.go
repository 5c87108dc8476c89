// Package testenv runs the real components faultline works with — etcd and
// kube-apiserver (optionally kube-controller-manager), Grafana Loki, the OpenTelemetry
// Collector and Prometheus — as local processes for integration tests.
//
// A test asks for the components it needs; Start runs them on free 127.0.0.1 ports with
// their data in t.TempDir(), waits until each is ready and hands back clients and URLs:
//
//	func TestTaintOnXid(t *testing.T) {
//		env := testenv.Start(t, testenv.Options{Kubernetes: true, Collector: true})
//		cs := env.Clientset()          // admin client-go clientset
//		otlp := env.OTLPEndpoint()     // POST OTLP/HTTP logs to otlp+"/v1/logs"
//		loki := env.LokiURL()          // query /loki/api/v1/query_range
//		...
//	}
//
// Tests read Loki with QueryLoki (a log query's entries, index labels and structured
// metadata apart, in time order) or WaitLoki (poll until at least n entries).
//
// Collector implies Loki (the collector exports to Loki's /otlp endpoint, and Loki
// promotes the resource attributes k8s.node.name and node to the index labels
// k8s_node_name and node). ControllerManager implies Kubernetes.
//
// Kubernetes: the apiserver uses RBAC, a static admin token (group system:masters) and a
// self-generated serving certificate; RESTConfig, Clientset and Kubeconfig (a file for
// kubectl and helm) use them. ServiceAccountToken creates a ServiceAccount and mints a
// token for it with the TokenRequest API, so a test can check what RBAC lets it do.
//
// Fault injection: env.Stop(t, testenv.Loki) stops a component gracefully and
// env.Start(t, testenv.Loki) brings it back on the same port with the same data
// (StopLoki/StartLoki and StopAPIServer/StartAPIServer are shorthands).
//
// Prometheus scrapes the targets in PrometheusOptions every second; AddScrapeTarget adds
// one later (the thing to scrape often starts after Prometheus).
//
// Kwok (sigs.k8s.io/kwok) simulates GPU nodes against the apiserver for scale tests:
// Options.Kwok.Nodes Nodes (8 GPUs each, named kwok-gpu-00000, …) are created at Start,
// AddKwokNodes adds more; kwok makes each Ready, renews its lease every 10 s and
// refreshes its status every 5 minutes, the kubelet's default rates. No kubelet runs, so
// nothing schedules on them; the Node objects and their heartbeat load are real.
//
// Each process writes its output to <Dir>/<component>.log; when the test failed, the
// cleanup logs the last 100 lines of each. Cleanup kills every process; processes also
// die with the test binary (on a test timeout, a panic or SIGKILL): each runs in its own
// process group with a parent-death signal, watched by a small shell watchdog that
// kills the group if the test binary disappears.
//
// Binaries come from test/tools/build.sh (versions in test/tools/versions.env), found
// through $FAULTLINE_TOOLS_PATH or `test/tools/build.sh path`; a missing one is built
// on demand by the same script (see Binary), which serializes concurrent builds.
// `make test` builds them all first. Startup on a 2-core machine: etcd ~0.2 s,
// kube-apiserver ~2 s, kube-controller-manager ~0.3 s, Loki ~0.4 s, collector ~0.1 s,
// Prometheus ~0.1 s; components without dependencies between them start concurrently.
//
// In -short mode (make test-unit) Start skips the test with "integration test: needs
// real components; run make test". Otherwise it never skips, and with CI=true it never
// skips at all: a component that cannot be built or started fails the test.
package testenv
