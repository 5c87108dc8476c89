package chart

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/controller/leaderendpoint"
	ctlrbac "github.com/faultline-dev/faultline/controller/rbac"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/stepspec"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestLint runs helm lint --strict with the default values and with every testdata
// values file (values.schema.json is checked by lint and by every render).
func TestLint(t *testing.T) {
	testenv.Integration(t)
	root := repoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "test", "chart", "testdata", "values-*.yaml"))
	if len(files) == 0 {
		t.Fatal("no testdata/values-*.yaml")
	}
	for _, f := range append([]string{""}, files...) {
		args := []string{"lint", "--strict", filepath.Join(root, chartDir)}
		if f != "" {
			args = append(args, "-f", f)
		}
		if out, err := helm(t, args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
	// Every values file is one of the cases the other tests render and apply.
	for _, f := range files {
		found := false
		for _, c := range cases {
			found = found || c.valuesFile == filepath.Base(f)
		}
		if !found {
			t.Errorf("%s is not in the render cases (helpers_test.go)", filepath.Base(f))
		}
	}
}

// TestRejects shows that the schema and the templates refuse values that cannot work,
// with a message that says why.
func TestRejects(t *testing.T) {
	testenv.Integration(t)
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"misspelt key", []string{"controller.replica=3"}, "additional properties 'replica' not allowed"},
		{"unknown output", []string{"exporter.output=kafka"}, "/exporter/output"},
		{"unknown kmsg access", []string{"exporter.kmsg.access=root"}, "/exporter/kmsg/access"},
		{"loki url without scheme", []string{"loki.url=loki:3100"}, "/loki/url"},
		{"unknown probe program", []string{"probeAgent.commands.nvidia-smi=/usr/bin/nvidia-smi"}, "invalid propertyName 'nvidia-smi'"},
		{"user pack not yaml", []string{"packs.user.notes=x"}, "'notes' does not match pattern"},
		{"bad duration", []string{"controller.leaderElection.leaseDuration=15"}, "/controller/leaderElection/leaseDuration"},
		{"unknown rule mode ceiling", []string{"controller.maxMode=enforcing"}, "/controller/maxMode"},
		{"no act workers", []string{"controller.actWorkers=0"}, "/controller/actWorkers"},
		{"fleet of one node", []string{"controller.fleet.minNodes=1"}, "/controller/fleet/minNodes"},
		{"fleet group budget over 100 %", []string{"controller.fleet.groupBudget=150"}, "/controller/fleet/groupBudget"},
		{"drain timeout without a unit", []string{"controller.escalation.drainTimeout=30"}, "/controller/escalation/drainTimeout"},
		{"remediation template name not a file name", []string{"controller.escalation.remediationTemplates.Self_Node=x"}, "'Self_Node' does not match pattern"},
		{"otlp without a collector", []string{"collector.enabled=false"}, "exporter.output=otlp needs collector.enabled=true or exporter.otlpEndpoint"},
		{"direct push without accepting unverified nodes", []string{"exporter.output=loki", "collector.enabled=false"},
			"nothing verifies the node a line names: any node could have any other tainted. Use exporter.output=otlp (the chart's collector takes each line's node from its sender's token), or set exporter.lokiDirect.acceptUnverifiedNodes=true"},
		{"direct push with basic auth", []string{"exporter.output=loki", "exporter.lokiDirect.acceptUnverifiedNodes=true", "loki.basicAuth.username=u", "loki.basicAuth.password=p"}, "exporter.output=loki cannot authenticate"},
		{"collector TLS Secret with TLS off", []string{"collector.tls.enabled=false", "collector.tls.existingSecret=certs"}, "collector.tls.existingSecret is set but collector.tls.enabled is false"},
		{"basic auth without a password", []string{"loki.basicAuth.username=u"}, "loki.basicAuth.username needs loki.basicAuth.password or loki.basicAuth.existingSecret"},
	} {
		t.Run(tc.name, func(t *testing.T) { mustRefuse(t, tc.sets, tc.want) })
	}
}

// taintKeys returns every taint key the repository's default packs use.
func taintKeys(t *testing.T) []string {
	t.Helper()
	packs, err := rules.LoadPaths(filepath.Join(repoRoot(t), "rules", "packs"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(packs)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, r := range set.Rules {
		keys[r.Taint.Key] = true
	}
	var out []string
	for k := range keys {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("the default packs use no taint key")
	}
	return out
}

func tolerates(tols []corev1.Toleration, key string) bool {
	for _, tol := range tols {
		if tol.Operator == corev1.TolerationOpExists && (tol.Key == "" || tol.Key == key) && tol.Effect == "" {
			return true
		}
	}
	return false
}

// TestDefaults checks what the default values deploy.
func TestDefaults(t *testing.T) {
	testenv.Integration(t)
	objs := parse(t, render(t, caseNamed(t, "defaults")))
	_, appVersion := chartMeta(t)

	// Controller: two replicas, leader election in the release namespace, packs from
	// the default packs' ConfigMaps, least privilege.
	ctl := deployment(t, objs, "faultline-controller")
	if ctl.Spec.Replicas == nil || *ctl.Spec.Replicas != 2 {
		t.Errorf("controller replicas = %v, want 2", ctl.Spec.Replicas)
	}
	cc := container(t, &ctl.Spec.Template.Spec, "controller")
	if cc.Image != "ghcr.io/faultline-dev/faultline:"+appVersion {
		t.Errorf("controller image %s", cc.Image)
	}
	if len(cc.Args) == 0 || cc.Args[0] != "controller" {
		t.Errorf("controller args %v do not start with the subcommand", cc.Args)
	}
	for _, a := range []string{"--loki-url=http://loki-gateway.loki.svc.cluster.local", "--listen=:9401", "--no-default-packs",
		"--packs=/etc/faultline/packs/defaults", "--probe-agent-port=9402", "--probe-node-selector=nvidia.com/gpu.present=true",
		"--lease-duration=15s", "--renew-deadline=10s", "--retry-period=2s", "--dry-run=false",
		"--fleet-label=topology.kubernetes.io/rack", "--fleet-label=nvidia.com/gpu.clique", "--fleet-min-nodes=3", "--fleet-window=10m",
		"--drain-timeout=30s"} {
		if !hasArg(cc, a) {
			t.Errorf("controller args %v lack %s", cc.Args, a)
		}
	}
	for name, field := range map[string]string{"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"} {
		if e := env(cc, name); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != field {
			t.Errorf("controller env %s is not the downward API's %s: %+v", name, field, e)
		}
	}
	// One ConfigMap per default pack (together they are over a ConfigMap's 1 MiB),
	// projected into one read-only directory, each holding its pack file as is.
	vol, m := mountAt(&ctl.Spec.Template.Spec, cc, "/etc/faultline/packs/defaults")
	packFiles, err := filepath.Glob(filepath.Join(repoRoot(t), "rules", "packs", "*.yaml"))
	if err != nil || len(packFiles) == 0 {
		t.Fatalf("no default packs in rules/packs: %v", err)
	}
	if vol == nil || vol.Projected == nil || len(vol.Projected.Sources) != len(packFiles) || !m.ReadOnly {
		t.Errorf("default packs are not %d ConfigMaps projected read-only: %+v %+v", len(packFiles), vol, m)
	} else {
		for i, p := range packFiles {
			name := "faultline-default-packs-" + strings.TrimSuffix(filepath.Base(p), ".yaml")
			if src := vol.Projected.Sources[i]; src.ConfigMap == nil || src.ConfigMap.Name != name {
				t.Errorf("projected source %d: %+v, want the ConfigMap %s", i, src, name)
			}
			cm := objs.find("ConfigMap", name)
			if cm == nil {
				t.Errorf("no ConfigMap %s", name)
				continue
			}
			want, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
			if got := data[filepath.Base(p)]; got != string(want) {
				t.Errorf("ConfigMap %s does not hold %s as is (%d bytes, want %d)", name, p, len(got), len(want))
			}
			if n := len(data[filepath.Base(p)]); n > 1<<20 {
				t.Errorf("ConfigMap %s holds %d bytes, over the 1 MiB a ConfigMap may hold", name, n)
			}
		}
	}
	if cm := objs.find("ConfigMap", "faultline-checkpoint"); cm == nil || cm.GetNamespace() != "faultline" {
		t.Error("no checkpoint ConfigMap faultline-checkpoint in the release namespace")
	}
	if objs.find("PodDisruptionBudget", "faultline-controller") == nil {
		t.Error("no PodDisruptionBudget for the controller")
	}

	// dmesg-exporter: /dev/kmsg, the state directory and pod logs from the host,
	// the node name from the downward API, privileged (the device cgroup).
	ex := daemonSet(t, objs, "faultline-dmesg-exporter")
	spec := &ex.Spec.Template.Spec
	ec := container(t, spec, "dmesg-exporter")
	if ec.Args[0] != "dmesg-exporter" || !hasArg(ec, "--node=$(NODE_NAME)") || !hasArg(ec, "--pod-logs=/var/log/pods") ||
		!hasArg(ec, "--state-file=/var/lib/faultline/dmesg-exporter.json") || !hasArg(ec, "--kmsg-path=/dev/kmsg") {
		t.Errorf("exporter args %v", ec.Args)
	}
	if e := env(ec, "NODE_NAME"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME is not spec.nodeName: %+v", e)
	}
	for path, want := range map[string]struct {
		hostType corev1.HostPathType
		readOnly bool
	}{
		"/dev/kmsg":          {corev1.HostPathCharDev, true},
		"/var/lib/faultline": {corev1.HostPathDirectoryOrCreate, false},
		"/var/log/pods":      {corev1.HostPathDirectory, true},
	} {
		v, m := mountAt(spec, ec, path)
		if v == nil || v.HostPath == nil || v.HostPath.Path != path || v.HostPath.Type == nil || *v.HostPath.Type != want.hostType || m.ReadOnly != want.readOnly {
			t.Errorf("%s: want hostPath %s type %s readOnly=%v; have %+v %+v", path, path, want.hostType, want.readOnly, v, m)
		}
	}
	if sc := ec.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("exporter (kmsg.access=privileged) security context %+v", ec.SecurityContext)
	}
	endpoint, ok := argWithPrefix(ec, "--otlp-endpoint=")
	if !ok || endpoint != "https://faultline-otel-collector.faultline.svc:4318" {
		t.Errorf("exporter --otlp-endpoint=%q, want the chart's collector Service over TLS", endpoint)
	}
	if !tolerates(spec.Tolerations, "faultline.io/faulty") || !tolerates(spec.Tolerations, "anything") {
		t.Errorf("exporter tolerations %+v: it must keep running on tainted nodes", spec.Tolerations)
	}
	if objs.find("ClusterRole", "faultline-dmesg-exporter") != nil {
		t.Error("the exporter has a ClusterRole without podLogs.labelSelector")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the exporter mounts a ServiceAccount token it does not use")
	}

	// Probe agent: GPU nodes, host network, port 9402, tolerates faultline's taints,
	// the probe-agent image, no capabilities.
	pa := daemonSet(t, objs, "faultline-probe-agent")
	pspec := &pa.Spec.Template.Spec
	pc := container(t, pspec, "probe-agent")
	if !pspec.HostNetwork || pspec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("probe agent hostNetwork=%v dnsPolicy=%s", pspec.HostNetwork, pspec.DNSPolicy)
	}
	if pspec.NodeSelector["nvidia.com/gpu.present"] != "true" {
		t.Errorf("probe agent nodeSelector %v", pspec.NodeSelector)
	}
	for _, key := range taintKeys(t) {
		if !tolerates(pspec.Tolerations, key) {
			t.Errorf("probe agent does not tolerate the taint %s the default packs place", key)
		}
	}
	if pc.Image != "ghcr.io/faultline-dev/faultline-probe-agent:"+appVersion {
		t.Errorf("probe agent image %s", pc.Image)
	}
	if !reflect.DeepEqual(pc.Args[:2], []string{"--node=$(NODE_NAME)", "--listen=:9402"}) {
		t.Errorf("probe agent args %v", pc.Args)
	}
	if len(pc.Ports) == 0 || pc.Ports[0].ContainerPort != 9402 {
		t.Errorf("probe agent ports %+v", pc.Ports)
	}
	if e := env(pc, "NODE_NAME"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("probe agent NODE_NAME %+v", e)
	}
	if _, ok := pc.Resources.Limits["nvidia.com/gpu"]; ok {
		t.Error("the probe agent requests GPUs: it would take them from training pods")
	}
	// The GPUs-in-use guard reads the kubelet's PodResources socket; the agent
	// tolerates its own probing taint, so a restarted agent can remove it; parameters
	// naming hosts and files are held to allow-lists; the agent's Node updates are
	// bounded by its admission policy.
	if v, m := mountAt(pspec, pc, "/var/lib/kubelet/pod-resources"); v == nil || v.HostPath == nil || v.HostPath.Path != "/var/lib/kubelet/pod-resources" ||
		v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectory || !m.ReadOnly {
		t.Errorf("probe agent pod-resources mount %+v %+v: want the kubelet's directory, read-only", v, m)
	}
	for _, arg := range []string{"--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock", "--peer-node-selector=nvidia.com/gpu.present=true",
		"--allow-hostengine=localhost,127.0.0.1,::1", "--allow-file-dir=/etc/faultline/probes", "--allow-port=5201,5202-5210", "--max-runs-per-minute=30"} {
		if !hasArg(pc, arg) {
			t.Errorf("probe agent args %v lack %s", pc.Args, arg)
		}
	}
	if !tolerates(pspec.Tolerations, "faultline.io/probing") {
		t.Errorf("probe agent tolerations %+v: it must come back to a node it left tainted faultline.io/probing", pspec.Tolerations)
	}
	if objs.find("ValidatingAdmissionPolicy", "faultline-probe-agent-nodes") == nil {
		t.Error("no admission policy for the probe agent's Node updates")
	}

	// The controller calls the agents with a projected token only they accept.
	if !hasArg(pc, "--token-audience=faultline-probe-agent") || !hasArg(cc, "--probe-token-file=/var/run/secrets/faultline/probe-agent/token") {
		t.Errorf("agent args %v / controller args %v: want the faultline-probe-agent audience and its token file", pc.Args, cc.Args)
	}
	if v, _ := mountAt(&ctl.Spec.Template.Spec, cc, "/var/run/secrets/faultline/probe-agent"); v == nil || v.Projected == nil ||
		len(v.Projected.Sources) != 1 || v.Projected.Sources[0].ServiceAccountToken == nil ||
		v.Projected.Sources[0].ServiceAccountToken.Audience != "faultline-probe-agent" {
		t.Errorf("controller's probe-agent token volume %+v: want a projected token for faultline-probe-agent", v)
	}
	// NetworkPolicies on by default for every API listener: the controller's too.
	if cnp := networkPolicy(t, objs, "faultline-controller"); !labels.SelectorFromSet(cnp.Spec.PodSelector.MatchLabels).Matches(labels.Set(ctl.Spec.Template.Labels)) {
		t.Error("the controller's NetworkPolicy does not select the controller pods")
	}
	// NetworkPolicy: the probe API only from the controller's pods.
	np := networkPolicy(t, objs, "faultline-probe-agent")
	if !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(labels.Set(pa.Spec.Template.Labels)) {
		t.Error("the probe agent's NetworkPolicy does not select the agent pods")
	}
	apiRuleFound := false
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			if p.Port == nil || *p.Port != intstr.FromInt32(9402) {
				continue
			}
			apiRuleFound = true
			if len(r.From) != 1 || r.From[0].PodSelector == nil || r.From[0].NamespaceSelector != nil ||
				!labels.SelectorFromSet(r.From[0].PodSelector.MatchLabels).Matches(labels.Set(ctl.Spec.Template.Labels)) {
				t.Errorf("port 9402 is open to %+v, want only the controller's pods", r.From)
			}
			if labels.SelectorFromSet(r.From[0].PodSelector.MatchLabels).Matches(labels.Set(ex.Spec.Template.Labels)) {
				t.Error("port 9402 is open to the exporter's pods")
			}
		}
	}
	if !apiRuleFound {
		t.Error("the NetworkPolicy has no rule for the probe API port")
	}

	// The collector takes lines only from the exporters' projected tokens and sets
	// the node from them (TestCollectorToLoki runs this config).
	col := deployment(t, objs, "faultline-otel-collector")
	if sa := col.Spec.Template.Spec.ServiceAccountName; sa != "faultline-otel-collector" {
		t.Errorf("collector ServiceAccount %q", sa)
	}
	ccfg := collectorConfig(t, objs, "faultline-otel-collector")
	if got := lookup(ccfg, "receivers", "otlp", "protocols", "http", "auth", "authenticator"); got != "faultlineauth" {
		t.Errorf("the collector's receiver authenticator is %v, want faultlineauth", got)
	}
	if got := lookup(ccfg, "service", "pipelines", "logs", "processors"); !reflect.DeepEqual(got, []any{"faultlinenode", "batch"}) {
		t.Errorf("collector processors %v, want faultlinenode first", got)
	}
	if a, sas := lookup(ccfg, "extensions", "faultlineauth", "audiences"), lookup(ccfg, "extensions", "faultlineauth", "service_accounts"); !reflect.DeepEqual(a, []any{"faultline-collector"}) ||
		!reflect.DeepEqual(sas, []any{"faultline/faultline-dmesg-exporter", "faultline/faultline-probe-agent"}) {
		t.Errorf("faultlineauth audiences %v, service accounts %v (the exporters and the probe agents' lines)", a, sas)
	}
	// The probe agents ship their lines (NVML events, verdicts) to the same collector
	// with their own projected token.
	ag := daemonSet(t, objs, "faultline-probe-agent")
	agc := &ag.Spec.Template.Spec.Containers[0]
	for _, arg := range []string{"--nvml-events", "--events-otlp-endpoint=https://faultline-otel-collector.faultline.svc:4318",
		"--events-token-file=/var/run/secrets/faultline/collector/token", "--events-ca-file=/var/run/secrets/faultline/collector-ca/ca.crt"} {
		if !hasArg(agc, arg) {
			t.Errorf("probe agent args %v: no %s", agc.Args, arg)
		}
	}
	agentToken := false
	for _, v := range ag.Spec.Template.Spec.Volumes {
		if v.Projected != nil && len(v.Projected.Sources) == 1 && v.Projected.Sources[0].ServiceAccountToken != nil &&
			v.Projected.Sources[0].ServiceAccountToken.Audience == "faultline-collector" {
			agentToken = true
		}
	}
	if !agentToken {
		t.Error("the probe agent has no projected token with audience faultline-collector")
	}
	if !hasArg(ec, "--token-file=/var/run/secrets/faultline/collector/token") {
		t.Errorf("exporter args %v: no --token-file", ec.Args)
	}
	var projected bool
	for _, v := range ex.Spec.Template.Spec.Volumes {
		if v.Projected != nil && len(v.Projected.Sources) == 1 && v.Projected.Sources[0].ServiceAccountToken != nil &&
			v.Projected.Sources[0].ServiceAccountToken.Audience == "faultline-collector" {
			projected = true
		}
	}
	if !projected {
		t.Error("the exporter has no projected token with audience faultline-collector")
	}

	// Without the Prometheus Operator's API: no monitoring objects.
	for _, o := range objs {
		if strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") {
			t.Errorf("%s %s rendered without %s", o.GetKind(), o.GetName(), monitoringAPI)
		}
	}
	// No dashboards in the chart yet means no dashboard ConfigMaps (see TestDashboards).
	dash, _ := filepath.Glob(filepath.Join(repoRoot(t), chartDir, "dashboards", "*.json"))
	if n := len(dashboardConfigMaps(objs)); n != len(dash) {
		t.Errorf("%d dashboard ConfigMaps for %d dashboards/*.json", n, len(dash))
	}
}

// toolVersion reads a pin from test/tools/versions.env.
func toolVersion(t testing.TB, key string) string {
	t.Helper()
	for _, l := range strings.Split(string(readFile(t, filepath.Join(repoRoot(t), "test", "tools", "versions.env"))), "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatalf("no %s in test/tools/versions.env", key)
	return ""
}

// TestConsistency checks every render for references that would break at run time:
// Services select pods and name their ports, ServiceAccounts, ConfigMaps and Secrets
// exist unless they are an "existing" one from the values, and every pod is locked
// down (read-only root, RuntimeDefault seccomp, no privilege escalation and no
// capabilities unless the component needs them).
func TestConsistency(t *testing.T) {
	testenv.Integration(t)
	// From the values files, the agents' and the collector's TLS Secrets the
	// manifests leave to the user, and the cert-manager issuer's CA.
	existing := map[string]bool{"loki-credentials": true, "site-packs": true, "faultline-probe-agent-tls": true, "faultline-probe-agent-signer": true, "faultline-otel-collector-tls": true,
		"faultline-controller-intake-tls": true, "probe-agents-ca": true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := parse(t, render(t, c))
			pods := podTemplates(t, objs)
			for _, o := range objs {
				// The agents' right to reference cert-manager's Issuer lives in its namespace.
				issuerRef := (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") && strings.HasSuffix(o.GetName(), "-probe-agent-issuer")
				if ns := o.GetNamespace(); ns != "" && ns != c.namespace && !(o.GetKind() == "ConfigMap" && ns == "grafana") && !issuerRef {
					t.Errorf("%s %s in namespace %s, want %s", o.GetKind(), o.GetName(), ns, c.namespace)
				}
			}
			for _, svc := range objs.ofKind("Service") {
				s := convert[corev1.Service](t, svc)
				matched := 0
				for name, tmpl := range pods {
					if len(s.Spec.Selector) == 0 {
						// No selector (the intake's): its EndpointSlice names the pod of the
						// workload that publishes there.
						if !publishesTo(tmpl, s.Name) {
							continue
						}
					} else if !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
						continue
					}
					matched++
					for _, p := range s.Spec.Ports {
						if !podHasPort(&tmpl.Spec, p.TargetPort) {
							t.Errorf("Service %s port %s: %s has no container port %s", s.Name, p.Name, name, p.TargetPort.String())
						}
					}
				}
				if matched != 1 {
					t.Errorf("Service %s selects %d workloads, want 1", s.Name, matched)
				}
				if len(s.Spec.Selector) == 0 {
					es := get[discoveryv1.EndpointSlice](t, objs, "EndpointSlice", s.Name)
					if es.Labels[discoveryv1.LabelServiceName] != s.Name || es.Labels[discoveryv1.LabelManagedBy] != leaderendpoint.ManagedBy {
						t.Errorf("EndpointSlice %s: labels %v, want it tied to its Service and managed by %s", es.Name, es.Labels, leaderendpoint.ManagedBy)
					}
				}
			}
			for name, tmpl := range pods {
				spec := &tmpl.Spec
				if sa := spec.ServiceAccountName; sa != "" && objs.find("ServiceAccount", sa) == nil {
					t.Errorf("%s uses ServiceAccount %s, which is not rendered", name, sa)
				}
				for _, v := range spec.Volumes {
					if v.ConfigMap != nil && objs.find("ConfigMap", v.ConfigMap.Name) == nil && !existing[v.ConfigMap.Name] {
						t.Errorf("%s mounts ConfigMap %s, which is not rendered", name, v.ConfigMap.Name)
					}
					if v.Secret != nil && objs.find("Secret", v.Secret.SecretName) == nil && !existing[v.Secret.SecretName] {
						t.Errorf("%s mounts Secret %s, which is not rendered", name, v.Secret.SecretName)
					}
				}
				if spec.SecurityContext == nil || spec.SecurityContext.SeccompProfile == nil || spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("%s: pod seccomp profile is not RuntimeDefault", name)
				}
				for _, ct := range spec.Containers {
					for _, e := range ct.Env {
						if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
							ref := e.ValueFrom.SecretKeyRef.Name
							if objs.find("Secret", ref) == nil && !existing[ref] {
								t.Errorf("%s env %s reads Secret %s, which is not rendered", name, e.Name, ref)
							}
						}
					}
					checkContainerSecurity(t, name, spec, &ct)
				}
			}
		})
	}
}

func podHasPort(spec *corev1.PodSpec, port intstr.IntOrString) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
				return true
			}
		}
	}
	return false
}

// checkContainerSecurity: every container has a read-only root filesystem; a
// privileged one is the exporter in kmsg.access=privileged mode only; every other
// one forbids privilege escalation, drops ALL capabilities and adds at most SYSLOG
// (the exporter with kmsg.access=capabilities); what runs as UID 0 is the exporter,
// and the probe agent when it mounts the kubelet's PodResources socket (writable by
// root only), with no capabilities and a non-root group.
func checkContainerSecurity(t *testing.T, pod string, spec *corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s/%s: root filesystem is not read-only", pod, c.Name)
		return
	}
	isExporter := c.Name == "dmesg-exporter"
	if sc.Privileged != nil && *sc.Privileged {
		if !isExporter {
			t.Errorf("%s/%s is privileged", pod, c.Name)
		}
		return
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s/%s allows privilege escalation", pod, c.Name)
	}
	if sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s/%s does not drop ALL capabilities: %+v", pod, c.Name, sc.Capabilities)
	} else if add := sc.Capabilities.Add; len(add) > 0 && !(isExporter && reflect.DeepEqual(add, []corev1.Capability{"SYSLOG"})) {
		t.Errorf("%s/%s adds capabilities %v", pod, c.Name, add)
	}
	runAsRoot := spec.SecurityContext.RunAsUser != nil && *spec.SecurityContext.RunAsUser == 0
	if sc.RunAsUser != nil {
		runAsRoot = *sc.RunAsUser == 0
	}
	nonRoot := spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	if sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	_, podResources := mountAt(spec, c, "/var/lib/kubelet/pod-resources")
	agentAsRoot := c.Name == "probe-agent" && podResources != nil && podResources.ReadOnly &&
		spec.SecurityContext.RunAsGroup != nil && *spec.SecurityContext.RunAsGroup != 0
	if runAsRoot && !isExporter && !agentAsRoot {
		t.Errorf("%s/%s runs as root", pod, c.Name)
	}
	if !isExporter && !nonRoot && !agentAsRoot {
		t.Errorf("%s/%s: runAsNonRoot is not set", pod, c.Name)
	}
}

// repoRules parses the rules of an RBAC file in the repository (one or more
// documents), in document order.
func repoRules(t testing.TB, rel string) [][]rbacv1.PolicyRule {
	t.Helper()
	var out [][]rbacv1.PolicyRule
	for _, doc := range strings.Split(string(readFile(t, filepath.Join(repoRoot(t), rel))), "\n---\n") {
		// ClusterRole has every field a Role has: strict parsing catches a typo.
		var r rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if r.Kind != "ClusterRole" && r.Kind != "Role" {
			t.Fatalf("%s: a document of kind %q", rel, r.Kind)
		}
		if len(r.Rules) == 0 {
			t.Fatalf("%s: a %s without rules", rel, r.Kind)
		}
		out = append(out, r.Rules)
	}
	return out
}

// TestRBACMatchesRepository shows that the rendered roles carry exactly the rules of
// the files the components' tests prove minimal — controller/rbac/clusterrole.yaml
// and role.yaml, active-probes/agent/rbac/rbac.yaml — read here from the repository,
// so a rule added there fails this test until the chart has it (make manifests) —
// and that the bindings give them to the right ServiceAccounts.
func TestRBACMatchesRepository(t *testing.T) {
	testenv.Integration(t)
	ctlCluster := repoRules(t, "controller/rbac/clusterrole.yaml")[0]
	ctlRole := repoRules(t, "controller/rbac/role.yaml")[0]
	agent := repoRules(t, "active-probes/agent/rbac/rbac.yaml")
	nodeCert := repoRules(t, "active-probes/agent/rbac/nodecert.yaml")[0]
	signer := repoRules(t, "controller/rbac/signer.yaml")[0]
	pvcRole := repoRules(t, "active-probes/pvc/role.yaml")[0]
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := parse(t, render(t, c))
			full := fullname(objs)
			same := func(what string, got, want []rbacv1.PolicyRule) {
				if !reflect.DeepEqual(got, want) {
					gy, _ := yaml.Marshal(got)
					wy, _ := yaml.Marshal(want)
					t.Errorf("%s: rendered rules differ from the repository's (run make manifests)\nrendered:\n%s\nrepository:\n%s", what, gy, wy)
				}
			}
			same("ClusterRole "+full+"-controller", clusterRole(t, objs, full+"-controller").Rules, ctlCluster)
			grantsSteps(t, clusterRole(t, objs, full+"-controller").Rules)
			role := get[rbacv1.Role](t, objs, "Role", full+"-controller")
			same("Role "+full+"-controller", role.Rules, ctlRole)
			if objs.find("Role", full+"-controller-events") != nil {
				t.Errorf("Role %s-controller-events rendered: the ClusterRole grants Events in every namespace", full)
			}

			ctlSA := deployment(t, objs, full+"-controller").Spec.Template.Spec.ServiceAccountName
			bound := func(kind, binding, roleKind, roleName, sa string) {
				var ref rbacv1.RoleRef
				var subjects []rbacv1.Subject
				if kind == "RoleBinding" {
					b := get[rbacv1.RoleBinding](t, objs, kind, binding)
					ref, subjects = b.RoleRef, b.Subjects
					if want := get[rbacv1.Role](t, objs, "Role", roleName).Namespace; b.Namespace != want {
						t.Errorf("RoleBinding %s in %s, its Role in %s", binding, b.Namespace, want)
					}
				} else {
					b := get[rbacv1.ClusterRoleBinding](t, objs, kind, binding)
					ref, subjects = b.RoleRef, b.Subjects
				}
				want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: c.namespace}}
				if ref.Kind != roleKind || ref.Name != roleName || !reflect.DeepEqual(subjects, want) {
					t.Errorf("%s %s binds %s %s to %+v, want %s %s to %+v", kind, binding, ref.Kind, ref.Name, subjects, roleKind, roleName, want)
				}
			}
			bound("ClusterRoleBinding", full+"-controller", "ClusterRole", full+"-controller", ctlSA)
			bound("RoleBinding", full+"-controller", "Role", full+"-controller", ctlSA)

			if objs.find("DaemonSet", full+"-probe-agent") == nil {
				for _, n := range []string{"-probe-agent", "-probe-runner"} {
					if objs.find("ClusterRole", full+n) != nil || objs.find("ClusterRoleBinding", full+n) != nil {
						t.Errorf("probe agents disabled, but %s%s is rendered", full, n)
					}
				}
				return
			}
			agentSA := daemonSet(t, objs, full+"-probe-agent").Spec.Template.Spec.ServiceAccountName
			same("ClusterRole "+full+"-probe-agent", clusterRole(t, objs, full+"-probe-agent").Rules, agent[0])
			same("ClusterRole "+full+"-probe-runner", clusterRole(t, objs, full+"-probe-runner").Rules, agent[1])
			bound("ClusterRoleBinding", full+"-probe-agent", "ClusterRole", full+"-probe-agent", agentSA)
			// Per-node certificates (probeAgent.tls.mode=node): the agents request,
			// the controller approves and signs, or approves only for cert-manager's
			// issuer (approver.yaml with the issuer's signer name); neither role
			// otherwise.
			signerRole, approverRole := objs.find("ClusterRole", full+"-probe-agent-signer"), objs.find("ClusterRole", full+"-probe-agent-approver")
			switch {
			case signerRole != nil && approverRole != nil:
				t.Errorf("both the signer and the approver role are rendered")
			case signerRole != nil:
				same("ClusterRole "+full+"-probe-agent-signer", clusterRole(t, objs, full+"-probe-agent-signer").Rules, signer)
				bound("ClusterRoleBinding", full+"-probe-agent-signer", "ClusterRole", full+"-probe-agent-signer", ctlSA)
			case approverRole != nil:
				c := container(t, &deployment(t, objs, full+"-controller").Spec.Template.Spec, "controller")
				name, _ := argWithPrefix(c, "--probe-agent-cert-signer=")
				want, err := ctlrbac.ApproverClusterRole(name)
				if err != nil {
					t.Fatalf("the controller's --probe-agent-cert-signer %q: %v", name, err)
				}
				same("ClusterRole "+full+"-probe-agent-approver", clusterRole(t, objs, full+"-probe-agent-approver").Rules, want.Rules)
				bound("ClusterRoleBinding", full+"-probe-agent-approver", "ClusterRole", full+"-probe-agent-approver", ctlSA)
			}
			if signerRole != nil || approverRole != nil {
				same("ClusterRole "+full+"-probe-agent-nodecert", clusterRole(t, objs, full+"-probe-agent-nodecert").Rules, nodeCert)
				bound("ClusterRoleBinding", full+"-probe-agent-nodecert", "ClusterRole", full+"-probe-agent-nodecert", agentSA)
			} else if objs.find("ClusterRole", full+"-probe-agent-nodecert") != nil {
				t.Errorf("the agents may request certificates, but no signer or approver is rendered")
			}
			// The controller calls the agents: it holds the runner role.
			bound("ClusterRoleBinding", full+"-probe-runner", "ClusterRole", full+"-probe-runner", ctlSA)
			// It runs the pvc check itself, in its namespace.
			same("Role "+full+"-pvc-probe", get[rbacv1.Role](t, objs, "Role", full+"-pvc-probe").Rules, pvcRole)
			bound("RoleBinding", full+"-pvc-probe", "Role", full+"-pvc-probe", ctlSA)
		})
	}
}

// grantsSteps fails when the controller's ClusterRole lacks a permission a
// remediation step's spec (rules/stepspec) says its Do needs.
func grantsSteps(t *testing.T, role []rbacv1.PolicyRule) {
	t.Helper()
	granted := map[string]bool{}
	for _, r := range role {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if len(r.ResourceNames) == 0 {
						granted[g+" "+res+" "+v] = true
					}
				}
			}
		}
	}
	for _, s := range stepspec.All() {
		for _, a := range s.Access {
			for _, v := range a.Verbs {
				if !granted[a.Group+" "+a.Resource+" "+v] {
					t.Errorf("the controller's ClusterRole does not grant %s on %s (group %q), which the %s step needs: %s", v, a.Resource, a.Group, s.Name, a.Why)
				}
			}
		}
	}
}

// fullname is the chart's full name in a render: the controller Deployment's name
// without "-controller".
func fullname(objs objects) string {
	for _, d := range objs.ofKind("Deployment") {
		if n, ok := strings.CutSuffix(d.GetName(), "-controller"); ok {
			return n
		}
	}
	return ""
}

// TestChartCopiesFresh fails when the chart's copies of the default packs and of the
// RBAC files differ from the repository's (make manifests refreshes them).
func TestChartCopiesFresh(t *testing.T) {
	root := repoRoot(t)
	src, _ := filepath.Glob(filepath.Join(root, "rules", "packs", "*.yaml"))
	dst, _ := filepath.Glob(filepath.Join(root, chartDir, "packs", "*.yaml"))
	base := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if len(src) == 0 || !reflect.DeepEqual(base(src), base(dst)) {
		t.Errorf("the chart's packs %v are not rules/packs' %v: run make manifests", base(dst), base(src))
	}
	pairs := map[string]string{
		"controller/rbac/clusterrole.yaml":       chartDir + "/files/rbac/controller-clusterrole.yaml",
		"controller/rbac/role.yaml":              chartDir + "/files/rbac/controller-role.yaml",
		"controller/rbac/apiroles.yaml":          chartDir + "/files/rbac/controller-api-roles.yaml",
		"active-probes/agent/rbac/rbac.yaml":     chartDir + "/files/rbac/probe-agent.yaml",
		"active-probes/agent/rbac/nodecert.yaml": chartDir + "/files/rbac/probe-agent-nodecert.yaml",
		"controller/rbac/signer.yaml":            chartDir + "/files/rbac/controller-signer.yaml",
		"controller/rbac/approver.yaml":          chartDir + "/files/rbac/controller-approver.yaml",
		"active-probes/pvc/role.yaml":            chartDir + "/files/rbac/pvc-probe-role.yaml",
		"api/v1alpha1/nodefaults.crd.yaml":       chartDir + "/crds/nodefaults.crd.yaml",
		"api/v1alpha1/proberuns.crd.yaml":        chartDir + "/crds/proberuns.crd.yaml",
	}
	for _, p := range src {
		pairs["rules/packs/"+filepath.Base(p)] = chartDir + "/packs/" + filepath.Base(p)
	}
	for from, to := range pairs {
		a := readFile(t, filepath.Join(root, from))
		b, err := os.ReadFile(filepath.Join(root, to))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is not a copy of %s: run make manifests", to, from)
		}
	}
}

// TestManifestsFresh fails when manifests/ is not what `make manifests` renders now:
// a comment header saying it is generated, then helm template with default values.
func TestManifestsFresh(t *testing.T) {
	testenv.Integration(t)
	root := repoRoot(t)
	got := readFile(t, filepath.Join(root, "manifests", "faultline.yaml"))
	var header []string
	body := got
	for len(body) > 0 && body[0] == '#' {
		line, rest, _ := bytes.Cut(body, []byte("\n"))
		header = append(header, string(line))
		body = rest
	}
	h := strings.Join(header, "\n")
	if !strings.Contains(h, "Generated by `make manifests`") || !strings.Contains(h, "do not edit") {
		t.Errorf("manifests/faultline.yaml does not start with the generated-file header:\n%s", h)
	}
	want := render(t, caseNamed(t, "manifests"))
	if !bytes.Equal(body, want) {
		t.Errorf("manifests/faultline.yaml is stale: run make manifests (%d bytes rendered, %d in the file)", len(want), len(body))
	}
	// The CRDs are applied before the rest: their own files, copies of the API's.
	for _, name := range []string{"nodefaults.crd.yaml", "proberuns.crd.yaml"} {
		if crd, err := os.ReadFile(filepath.Join(root, "manifests", name)); err != nil ||
			!bytes.Equal(crd, readFile(t, filepath.Join(root, "api", "v1alpha1", name))) {
			t.Errorf("manifests/%s is not a copy of api/v1alpha1/%s (%v): run make manifests", name, name, err)
		}
	}
	extra, _ := filepath.Glob(filepath.Join(root, "manifests", "*"))
	if len(extra) != 3 {
		t.Errorf("manifests/ holds %v; make manifests writes only faultline.yaml, nodefaults.crd.yaml and proberuns.crd.yaml", extra)
	}
}

// TestValuesFiles checks what each testdata values file changes.
func TestValuesFiles(t *testing.T) {
	testenv.Integration(t)

	t.Run("existing-collector", func(t *testing.T) {
		objs := parse(t, render(t, caseNamed(t, "existing-collector")))
		if n := objs.find("Deployment", "ex-faultline-otel-collector"); n != nil {
			t.Error("collector rendered with collector.enabled=false")
		}
		ex := daemonSet(t, objs, "ex-faultline-dmesg-exporter")
		spec := &ex.Spec.Template.Spec
		ec := container(t, spec, "dmesg-exporter")
		for _, a := range []string{"--otlp-endpoint=http://otel-collector.monitoring.svc:4318", "--pod-namespace=train-.*",
			"--pod-namespace=research", "--pod-exclude-namespace=kube-system", "--pod-label-selector=workload=training", "--batch-wait=500ms"} {
			if !hasArg(ec, a) {
				t.Errorf("exporter args %v lack %s", ec.Args, a)
			}
		}
		// kmsg.access=capabilities: not privileged, UID 0, CAP_SYSLOG only.
		sc := ec.SecurityContext
		if sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			!reflect.DeepEqual(sc.Capabilities.Add, []corev1.Capability{"SYSLOG"}) || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("exporter security context %+v", sc)
		}
		// podLogs.labelSelector: pods list+watch, and a token to use them.
		cr := clusterRole(t, objs, "ex-faultline-dmesg-exporter")
		want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}}}
		if !reflect.DeepEqual(cr.Rules, want) {
			t.Errorf("exporter ClusterRole rules %+v, want %+v", cr.Rules, want)
		}
		if spec.AutomountServiceAccountToken == nil || !*spec.AutomountServiceAccountToken {
			t.Error("the exporter needs its ServiceAccount token for --pod-label-selector")
		}
		ctl := deployment(t, objs, "ex-faultline-controller")
		cc := container(t, &ctl.Spec.Template.Spec, "controller")
		for _, a := range []string{"--loki-url=https://loki.example.com", "--loki-tenant=gpu-fleet", "--loki-username=faultline",
			"--packs=/etc/faultline/packs/user", "--budget-percent=5", "--budget-max=20", "--node-condition=true", "--storm-share=0.3",
			"--grafana-url=https://grafana.example.com", "--act-workers=256"} {
			if !hasArg(cc, a) {
				t.Errorf("controller args %v lack %s", cc.Args, a)
			}
		}
		// escalation.remediationTemplates: a ConfigMap of NAME.yaml files, mounted for
		// --remediation-templates, the placeholders left for the controller.
		if !hasArg(cc, "--remediation-templates=/etc/faultline/remediation") || !hasArg(cc, "--drain-timeout=2m") {
			t.Errorf("controller args %v lack the remediation templates or the drain timeout", cc.Args)
		}
		vol, m := mountAt(&ctl.Spec.Template.Spec, cc, "/etc/faultline/remediation")
		if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != "ex-faultline-remediation-templates" || !m.ReadOnly {
			t.Errorf("remediation templates are not the ConfigMap ex-faultline-remediation-templates mounted read-only: %+v %+v", vol, m)
		}
		if cm := objs.find("ConfigMap", "ex-faultline-remediation-templates"); cm == nil {
			t.Error("no ConfigMap ex-faultline-remediation-templates")
		} else if tmpl := convert[corev1.ConfigMap](t, cm).Data["self-node.yaml"]; !strings.Contains(tmpl, `name: "{{.Node}}"`) || !strings.Contains(tmpl, "kind: SelfNodeRemediation") {
			t.Errorf("self-node.yaml in the ConfigMap:\n%s", tmpl)
		}
		if e := env(cc, "LOKI_PASSWORD"); e == nil || e.ValueFrom.SecretKeyRef.Name != "loki-credentials" || e.ValueFrom.SecretKeyRef.Key != "token" {
			t.Errorf("LOKI_PASSWORD %+v, want loki-credentials/token", e)
		}
		if v, _ := mountAt(&ctl.Spec.Template.Spec, cc, "/etc/faultline/packs/user"); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != "site-packs" {
			t.Errorf("user packs volume %+v, want ConfigMap site-packs", v)
		}
		if objs.find("ConfigMap", "ex-faultline-packs") != nil || objs.find("Secret", "ex-faultline-loki") != nil {
			t.Error("a ConfigMap or Secret rendered for what exists already")
		}
		if objs.find("NetworkPolicy", "ex-faultline-controller") == nil {
			t.Error("no controller NetworkPolicy with controller.networkPolicy.enabled")
		}
		pa := daemonSet(t, objs, "ex-faultline-probe-agent")
		pc := container(t, &pa.Spec.Template.Spec, "probe-agent")
		for _, a := range []string{"--command=dcgmi=/usr/bin/dcgmi", "--command=dgemm=/usr/local/bin/dgemm", "--command=iperf3=/usr/bin/iperf3",
			"--command=pciebw=/usr/local/bin/pciebw", "--command=ping=/usr/bin/ping", "--timeout=dgemm=10m"} {
			if !hasArg(pc, a) {
				t.Errorf("probe agent args %v lack %s", pc.Args, a)
			}
		}
		if rc := pa.Spec.Template.Spec.RuntimeClassName; rc == nil || *rc != "nvidia" {
			t.Errorf("runtimeClassName %v", rc)
		}
		for _, sm := range objs.ofKind("ServiceMonitor") {
			if sm.GetLabels()["release"] != "kube-prometheus-stack" {
				t.Errorf("ServiceMonitor %s lacks the selection label", sm.GetName())
			}
		}
	})

	t.Run("direct-loki", func(t *testing.T) {
		objs := parse(t, render(t, caseNamed(t, "direct-loki")))
		ex := daemonSet(t, objs, "fl-direct-dmesg-exporter")
		ec := container(t, &ex.Spec.Template.Spec, "dmesg-exporter")
		if !hasArg(ec, "--loki-url=http://loki.logging.svc:3100") || !hasArg(ec, "--loki-tenant=team-a") {
			t.Errorf("exporter args %v: want direct push", ec.Args)
		}
		if _, ok := argWithPrefix(ec, "--otlp-endpoint="); ok {
			t.Error("exporter still ships OTLP")
		}
		if _, ok := argWithPrefix(ec, "--pod-logs="); ok {
			t.Error("pod logs read with podLogs.enabled=false")
		}
		if v, _ := mountAt(&ex.Spec.Template.Spec, ec, "/var/log/pods"); v != nil {
			t.Error("/var/log/pods mounted with podLogs.enabled=false")
		}
		ctl := deployment(t, objs, "fl-direct-controller")
		cc := container(t, &ctl.Spec.Template.Spec, "controller")
		if hasArg(cc, "--no-default-packs") || hasArg(cc, "--packs=/etc/faultline/packs/defaults") || objs.find("ConfigMap", "fl-direct-default-packs") != nil {
			t.Error("packs.defaultsConfigMap=false still ships the defaults in a ConfigMap")
		}
		if !hasArg(cc, "--probe-agent-port=0") || !hasArg(cc, "--dry-run=true") || !hasArg(cc, "--log-format=text") {
			t.Errorf("controller args %v", cc.Args)
		}
		// The inline user pack is a ConfigMap the controller mounts, and a valid pack.
		cm := get[corev1.ConfigMap](t, objs, "ConfigMap", "fl-direct-packs")
		dir := t.TempDir()
		for name, data := range cm.Data {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		packs, err := rules.LoadPaths(dir)
		if err != nil || len(packs) != 1 {
			t.Fatalf("user packs ConfigMap does not load: %v", err)
		}
		if _, err := rules.Compile(packs); err != nil {
			t.Fatalf("user pack does not compile: %v", err)
		}
		if v, _ := mountAt(&ctl.Spec.Template.Spec, cc, "/etc/faultline/packs/user"); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != "fl-direct-packs" {
			t.Errorf("user packs volume %+v", v)
		}
		for _, kind := range []string{"DaemonSet", "ClusterRole", "ClusterRoleBinding", "NetworkPolicy"} {
			for _, n := range objs.names(kind) {
				if strings.Contains(n, "probe") {
					t.Errorf("probeAgent.enabled=false, but %s %s is rendered", kind, n)
				}
			}
		}
	})

	t.Run("collector-auth", func(t *testing.T) {
		objs := parse(t, render(t, caseNamed(t, "collector-auth")))
		cfg := collectorConfig(t, objs, "gpu-faultline-otel-collector")
		exp, _ := lookup(cfg, "exporters", "otlphttp/loki").(map[string]any)
		if exp["endpoint"] != "http://loki-gateway.loki.svc.cluster.local/otlp" ||
			lookup(exp, "headers", "X-Scope-OrgID") != "gpu-fleet" || lookup(exp, "headers", "Authorization") != "${env:LOKI_AUTHORIZATION}" {
			t.Errorf("collector exporter %v", exp)
		}
		col := deployment(t, objs, "gpu-faultline-otel-collector")
		cc := container(t, &col.Spec.Template.Spec, "otel-collector")
		if e := env(cc, "LOKI_AUTHORIZATION"); e == nil || e.ValueFrom.SecretKeyRef.Name != "gpu-faultline-loki" || e.ValueFrom.SecretKeyRef.Key != "authorization" {
			t.Errorf("collector LOKI_AUTHORIZATION %+v", e)
		}
		sec := get[corev1.Secret](t, objs, "Secret", "gpu-faultline-loki")
		if sec.StringData["password"] != "not-a-real-password" ||
			sec.StringData["authorization"] != "Basic "+base64.StdEncoding.EncodeToString([]byte("faultline:not-a-real-password")) {
			t.Errorf("Secret %v", sec.StringData)
		}
		ctl := deployment(t, objs, "gpu-faultline-controller")
		if *ctl.Spec.Replicas != 3 {
			t.Errorf("replicas %d", *ctl.Spec.Replicas)
		}
		if e := env(container(t, &ctl.Spec.Template.Spec, "controller"), "LOKI_PASSWORD"); e == nil || e.ValueFrom.SecretKeyRef.Name != "gpu-faultline-loki" {
			t.Errorf("controller LOKI_PASSWORD %+v", e)
		}
	})
}

// collectorConfig returns the parsed config.yaml of the collector's ConfigMap.
func collectorConfig(t testing.TB, objs objects, name string) map[string]any {
	t.Helper()
	cm := get[corev1.ConfigMap](t, objs, "ConfigMap", name)
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("collector config: %v", err)
	}
	return cfg
}

func dashboardConfigMaps(objs objects) objects {
	var out objects
	for _, cm := range objs.ofKind("ConfigMap") {
		if cm.GetLabels()["grafana_dashboard"] == "1" {
			out = append(out, cm)
		}
	}
	return out
}

// TestDashboards renders a copy of the chart with no dashboards and with two, and
// checks one ConfigMap per dashboards/*.json, labelled for the Grafana sidecar.
func TestDashboards(t *testing.T) {
	testenv.Integration(t)
	root := repoRoot(t)
	chart := filepath.Join(t.TempDir(), "faultline")
	copyDir(t, filepath.Join(root, chartDir), chart)
	if err := os.RemoveAll(filepath.Join(chart, "dashboards")); err != nil {
		t.Fatal(err)
	}
	c := renderCase{name: "dashboards", release: "faultline", namespace: "faultline", chart: chart}
	if n := len(dashboardConfigMaps(parse(t, render(t, c)))); n != 0 {
		t.Fatalf("%d dashboard ConfigMaps without dashboards", n)
	}
	dashboards := map[string]string{
		"faultline-overview.json": `{"title": "faultline", "panels": [{"type": "stat", "title": "Tainted nodes"}]}`,
		"Probe_Results.GPU.json":  "{\n  \"title\": \"probes\",\n  \"panels\": []\n}\n",
	}
	if err := os.MkdirAll(filepath.Join(chart, "dashboards"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range dashboards {
		if err := os.WriteFile(filepath.Join(chart, "dashboards", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.sets = []string{"dashboards.namespace=grafana", "dashboards.annotations.grafana_folder=faultline"}
	cms := dashboardConfigMaps(parse(t, render(t, c)))
	if len(cms) != len(dashboards) {
		t.Fatalf("%d dashboard ConfigMaps for %d dashboards", len(cms), len(dashboards))
	}
	for _, u := range cms {
		cm := convert[corev1.ConfigMap](t, u)
		if cm.Namespace != "grafana" || cm.Annotations["grafana_folder"] != "faultline" {
			t.Errorf("ConfigMap %s: namespace %s annotations %v", cm.Name, cm.Namespace, cm.Annotations)
		}
		if !strings.HasPrefix(cm.Name, "faultline-dashboard-faultline-overview") && cm.Name != "faultline-dashboard-probe-results-gpu" {
			t.Errorf("ConfigMap name %s", cm.Name)
		}
		if len(cm.Data) != 1 {
			t.Fatalf("ConfigMap %s has %d keys", cm.Name, len(cm.Data))
		}
		for k, v := range cm.Data {
			if want, ok := dashboards[k]; !ok || strings.TrimRight(want, "\n") != v {
				t.Errorf("ConfigMap %s: %s = %q, want the file", cm.Name, k, v)
			}
		}
	}
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mustRefuse renders the defaults with sets and wants the render refused with an
// error saying want.
func mustRefuse(t *testing.T, sets []string, want string) {
	t.Helper()
	c := caseNamed(t, "defaults")
	c.sets = sets
	out, err := helm(t, c.args(repoRoot(t))...)
	if err == nil {
		t.Fatalf("rendered with %v:\n%.400s", sets, out)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error does not say %q:\n%v", want, err)
	}
}
