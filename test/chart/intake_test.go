package chart

import (
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/faultline-dev/faultline/controller/leaderendpoint"
	"github.com/faultline-dev/faultline/test/testenv"
)

// intakeSliceFlag names the EndpointSlice a controller publishes its leader's address in.
const intakeSliceFlag = "--intake-endpointslice="

// publishesTo says whether a container of tmpl publishes the leader's address in
// the EndpointSlice name (the selector-less intake Service's endpoints).
func publishesTo(tmpl *corev1.PodTemplateSpec, name string) bool {
	for i := range tmpl.Spec.Containers {
		if hasArg(&tmpl.Spec.Containers[i], intakeSliceFlag+name) {
			return true
		}
	}
	return false
}

// TestIntake: by default the controller serves the intake over HTTPS with the
// chart's certificate, for the collector's token audience, and publishes its pod IP
// in the pre-created EndpointSlice of a selector-less Service, which it may get and
// update by name only; the collector sends the lines of a pipeline of its own to
// that Service over TLS verified with the intake's CA alone, with a projected token
// of that audience, retrying briefly from a bounded queue, and may create
// loglines.faultline.io; Loki's pipeline is unchanged.
func TestIntake(t *testing.T) {
	testenv.Integration(t)
	objs := parse(t, render(t, caseNamed(t, "defaults")))
	const name, service = "faultline-controller-intake", "faultline-controller-intake.faultline.svc"

	svc := get[corev1.Service](t, objs, "Service", name)
	if len(svc.Spec.Selector) != 0 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "intake" || svc.Spec.Ports[0].Port != 9404 {
		t.Errorf("Service %s: selector %v ports %+v, want none and intake 9404", name, svc.Spec.Selector, svc.Spec.Ports)
	}
	es := get[discoveryv1.EndpointSlice](t, objs, "EndpointSlice", name)
	if es.AddressType != discoveryv1.AddressTypeIPv4 || len(es.Endpoints) != 0 || es.Labels[discoveryv1.LabelServiceName] != name ||
		es.Labels[discoveryv1.LabelManagedBy] != leaderendpoint.ManagedBy {
		t.Errorf("EndpointSlice %s: %+v, want IPv4, no endpoints, labels of its Service and the controller", name, es)
	}

	d := deployment(t, objs, "faultline-controller")
	spec := &d.Spec.Template.Spec
	ctl := container(t, spec, "controller")
	dir := "/var/run/secrets/faultline/intake-tls"
	for _, a := range []string{"--intake-listen=:9404", "--intake-tls-cert-file=" + dir + "/tls.crt", "--intake-tls-key-file=" + dir + "/tls.key",
		"--intake-audience=faultline-intake", intakeSliceFlag + name, "--intake-advertise-address=$(POD_IP)"} {
		if !hasArg(ctl, a) {
			t.Errorf("controller: no %s in %q", a, ctl.Args)
		}
	}
	if e := env(ctl, "POD_IP"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("controller: POD_IP %+v, want the downward API's status.podIP", e)
	}
	if !podHasPort(spec, svc.Spec.Ports[0].TargetPort) {
		t.Errorf("controller: no container port %s", svc.Spec.Ports[0].TargetPort.String())
	}
	sec := get[corev1.Secret](t, objs, "Secret", "faultline-controller-intake-tls")
	if v, _ := mountAt(spec, ctl, dir); v == nil || v.Secret == nil || v.Secret.SecretName != sec.Name {
		t.Errorf("controller: %s is not the Secret %s (volume %+v)", dir, sec.Name, v)
	}
	pool := x509.NewCertPool()
	pool.AddCert(parseCert(t, sec.Data["ca.crt"]))
	if _, err := parseCert(t, sec.Data["tls.crt"]).Verify(x509.VerifyOptions{Roots: pool, DNSName: service, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the intake's certificate does not verify for %s with its ca.crt: %v", service, err)
	}

	// The controller's Role: get and update on the slice by name, nothing else.
	role := get[rbacv1.Role](t, objs, "Role", name)
	wantRules := []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, ResourceNames: []string{name}, Verbs: []string{"get", "update"}}}
	if !reflect.DeepEqual(role.Rules, wantRules) {
		t.Errorf("Role %s: %+v, want %+v", name, role.Rules, wantRules)
	}
	bound(t, objs, "RoleBinding", name, "faultline-controller")
	bound(t, objs, "ClusterRoleBinding", name, "faultline-controller")
	sender := clusterRole(t, objs, "faultline-intake-sender")
	wantRules = []rbacv1.PolicyRule{{APIGroups: []string{"faultline.io"}, Resources: []string{"loglines"}, Verbs: []string{"create"}}}
	if !reflect.DeepEqual(sender.Rules, wantRules) {
		t.Errorf("ClusterRole %s: %+v, want %+v", sender.Name, sender.Rules, wantRules)
	}
	bound(t, objs, "ClusterRoleBinding", sender.Name, "faultline-otel-collector")

	// The collector's sending.
	cfg := collectorConfig(t, objs, "faultline-otel-collector")
	exp, _ := lookup(cfg, "exporters", "otlphttp/controller").(map[string]any)
	if exp == nil {
		t.Fatalf("no exporter otlphttp/controller: %v", lookup(cfg, "exporters"))
	}
	if exp["endpoint"] != "https://"+service+":9404" || lookup(exp, "auth", "authenticator") != "faultlinetoken/intake" {
		t.Errorf("otlphttp/controller: %v", exp)
	}
	retry, _ := exp["retry_on_failure"].(map[string]any)
	if retry["enabled"] != true || retry["initial_interval"] != "100ms" || retry["max_elapsed_time"] != "5s" ||
		lookup(exp, "sending_queue", "enabled") != true || lookup(exp, "sending_queue", "queue_size") != float64(100) {
		t.Errorf("otlphttp/controller retries %v, queue %v: want short retries from a bounded queue", retry, exp["sending_queue"])
	}
	col := deployment(t, objs, "faultline-otel-collector")
	cspec := &col.Spec.Template.Spec
	cc := container(t, cspec, "otel-collector")
	caFile, _ := lookup(exp, "tls", "ca_file").(string)
	if v, m := mountAt(cspec, cc, filepath.Dir(caFile)); v == nil || v.Secret == nil || v.Secret.SecretName != sec.Name ||
		len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "ca.crt" || v.Secret.Items[0].Path != filepath.Base(caFile) || !m.ReadOnly {
		t.Errorf("the exporter's CA %q is not ca.crt alone from %s (volume %+v)", caFile, sec.Name, v)
	}
	tokenFile, _ := lookup(cfg, "extensions", "faultlinetoken/intake", "filename").(string)
	v, _ := mountAt(cspec, cc, filepath.Dir(tokenFile))
	if v == nil || v.Projected == nil || len(v.Projected.Sources) != 1 || v.Projected.Sources[0].ServiceAccountToken == nil {
		t.Fatalf("the intake token %q is not a projected ServiceAccount token (volume %+v)", tokenFile, v)
	}
	if tok := v.Projected.Sources[0].ServiceAccountToken; tok.Audience != "faultline-intake" || tok.Path != filepath.Base(tokenFile) ||
		tok.ExpirationSeconds == nil || *tok.ExpirationSeconds != 3600 {
		t.Errorf("the intake token: %+v, want audience faultline-intake for an hour", tok)
	}
	if !slices.Contains(toStrings(lookup(cfg, "service", "extensions")), "faultlinetoken/intake") {
		t.Errorf("the extension is not started: %v", lookup(cfg, "service", "extensions"))
	}
	pipe := func(name string) (exporters, processors []string) {
		return toStrings(lookup(cfg, "service", "pipelines", name, "exporters")), toStrings(lookup(cfg, "service", "pipelines", name, "processors"))
	}
	if e, p := pipe("logs"); !reflect.DeepEqual(e, []string{"otlphttp/loki"}) || !reflect.DeepEqual(p, []string{"faultlinenode", "batch"}) {
		t.Errorf("pipeline logs: exporters %v processors %v, want Loki's unchanged", e, p)
	}
	// The lines' node is the sender's (faultlinenode) on the push path too; its batch
	// sends at once.
	if e, p := pipe("logs/intake"); !reflect.DeepEqual(e, []string{"otlphttp/controller"}) || !reflect.DeepEqual(p, []string{"faultlinenode", "batch/intake"}) ||
		lookup(cfg, "processors", "batch/intake", "timeout") != "50ms" {
		t.Errorf("pipeline logs/intake: exporters %v processors %v (%v)", e, p, lookup(cfg, "processors"))
	}
	if r := toStrings(lookup(cfg, "service", "pipelines", "logs/intake", "receivers")); !reflect.DeepEqual(r, []string{"otlp"}) {
		t.Errorf("pipeline logs/intake receives from %v, want the otlp receiver", r)
	}
}

// TestIntakeOff: without the collector (direct Loki push, an existing collector) or
// with controller.intake.enabled=false, nothing of the intake renders.
func TestIntakeOff(t *testing.T) {
	testenv.Integration(t)
	off := caseNamed(t, "defaults")
	off.name, off.sets = "intake-off", []string{"controller.intake.enabled=false"}
	for _, c := range []renderCase{off, caseNamed(t, "direct-loki"), caseNamed(t, "existing-collector")} {
		t.Run(c.name, func(t *testing.T) {
			objs := parse(t, render(t, c))
			for _, o := range objs {
				if strings.Contains(o.GetName(), "intake") || o.GetKind() == "EndpointSlice" {
					t.Errorf("%s %s rendered", o.GetKind(), o.GetName())
				}
			}
			for w, tmpl := range podTemplates(t, objs) {
				for _, ct := range tmpl.Spec.Containers {
					for _, a := range ct.Args {
						if strings.HasPrefix(a, "--intake") {
							t.Errorf("%s: %s", w, a)
						}
					}
					if env(&ct, "POD_IP") != nil {
						t.Errorf("%s: POD_IP without the intake", w)
					}
				}
				for _, v := range tmpl.Spec.Volumes {
					if strings.Contains(v.Name, "intake") {
						t.Errorf("%s: volume %s", w, v.Name)
					}
				}
			}
			for _, cm := range objs.ofKind("ConfigMap") {
				if !strings.HasSuffix(cm.GetName(), "-otel-collector") {
					continue
				}
				cfg := collectorConfig(t, objs, cm.GetName())
				if lookup(cfg, "exporters", "otlphttp/controller") != nil || lookup(cfg, "service", "pipelines", "logs/intake") != nil {
					t.Errorf("the collector still sends to the intake: %v", lookup(cfg, "service", "pipelines"))
				}
			}
		})
	}
}

// TestIntakeShards: each shard's controller has an intake Service and slice of its
// own, publishes there and may update that one; the collector sends to each shard's
// leader; one certificate names every shard's Service.
func TestIntakeShards(t *testing.T) {
	testenv.Integration(t)
	c := caseNamed(t, "defaults")
	c.name, c.valuesFile = "intake-shards", "shards.yaml"
	objs := parse(t, render(t, c))
	full := c.release
	sec := get[corev1.Secret](t, objs, "Secret", full+"-controller-intake-tls")
	pool := x509.NewCertPool()
	pool.AddCert(parseCert(t, sec.Data["ca.crt"]))
	leaf := parseCert(t, sec.Data["tls.crt"])
	cfg := collectorConfig(t, objs, full+"-otel-collector")
	var names, exporters []string
	for _, shard := range []string{"a", "b"} {
		name := full + "-controller-" + shard + "-intake"
		names = append(names, name)
		get[corev1.Service](t, objs, "Service", name)
		get[discoveryv1.EndpointSlice](t, objs, "EndpointSlice", name)
		d := deployment(t, objs, full+"-controller-"+shard)
		if !publishesTo(&d.Spec.Template, name) {
			t.Errorf("shard %s does not publish in %s: %q", shard, name, container(t, &d.Spec.Template.Spec, "controller").Args)
		}
		host := name + "." + c.namespace + ".svc"
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the intake's certificate does not verify for %s: %v", host, err)
		}
		exp := "otlphttp/controller-" + shard
		exporters = append(exporters, exp)
		if got := lookup(cfg, "exporters", exp, "endpoint"); got != "https://"+host+":9404" {
			t.Errorf("%s: endpoint %v, want https://%s:9404", exp, got, host)
		}
	}
	if objs.find("Service", full+"-controller-intake") != nil {
		t.Errorf("sharded, but the unsharded intake Service is rendered too")
	}
	if got := toStrings(lookup(cfg, "service", "pipelines", "logs/intake", "exporters")); !reflect.DeepEqual(got, exporters) {
		t.Errorf("pipeline logs/intake exports to %v, want %v", got, exporters)
	}
	role := get[rbacv1.Role](t, objs, "Role", full+"-controller-intake")
	if len(role.Rules) != 1 || !reflect.DeepEqual(role.Rules[0].ResourceNames, names) {
		t.Errorf("Role: %+v, want the shards' slices %v by name", role.Rules, names)
	}
}

// bound fails unless the binding kind/name binds the ServiceAccount sa (of the
// render's namespace) to the role of its own name.
func bound(t *testing.T, objs objects, kind, name, sa string) {
	t.Helper()
	b := get[rbacv1.RoleBinding](t, objs, kind, name) // a ClusterRoleBinding converts the same
	if b.RoleRef.Name != name || len(b.Subjects) != 1 || b.Subjects[0].Kind != rbacv1.ServiceAccountKind || b.Subjects[0].Name != sa {
		t.Errorf("%s %s: %+v to %+v, want %s bound", kind, name, b.Subjects, b.RoleRef, sa)
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// intakeRequest is what the stand-in intake received in one request.
type intakeRequest struct {
	path, authorization, encoding string
	logs                          plog.Logs
	err                           error
}

// intakeStandIn stands in for the controller's intake: an HTTPS server with the
// intake's certificate from sec, which hands every request, its body decoded (gzip,
// OTLP protobuf), to the returned channel and answers 200.
func intakeStandIn(t *testing.T, sec *corev1.Secret) (string, <-chan intakeRequest) {
	t.Helper()
	pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan intakeRequest, 64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := intakeRequest{path: r.URL.Path, authorization: r.Header.Get("Authorization"), encoding: r.Header.Get("Content-Encoding")}
		var body io.Reader = r.Body
		if req.encoding == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				req.err = err
			} else {
				body = zr
			}
		}
		if req.err == nil {
			var b []byte
			if b, req.err = io.ReadAll(body); req.err == nil {
				er := plogotlp.NewExportRequest()
				req.err = er.UnmarshalProto(b)
				req.logs = er.Logs()
			}
		}
		got <- req
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := plogotlp.NewExportResponse().MarshalProto()
		_, _ = w.Write(b)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, got
}

// pointIntake makes cfg (the chart's collector config) send to the stand-in at url
// as the intake's Service name, with the CA in caFile and the token in tokenFile.
func pointIntake(t *testing.T, cfg map[string]any, url, service, caFile, tokenFile string) {
	t.Helper()
	exp, _ := lookup(cfg, "exporters", "otlphttp/controller").(map[string]any)
	ext, _ := lookup(cfg, "extensions", "faultlinetoken/intake").(map[string]any)
	if exp == nil || ext == nil {
		t.Fatalf("no intake exporter or token: %v %v", lookup(cfg, "exporters"), lookup(cfg, "extensions"))
	}
	exp["endpoint"] = url
	exp["tls"] = map[string]any{"ca_file": caFile, "server_name_override": service}
	ext["filename"] = tokenFile
}

// kubeletToken writes token into dir the way the kubelet updates a projected
// volume: a new timestamped directory, then the ..data link swapped atomically;
// the returned path (dir/token) is a link through ..data.
func kubeletToken(t *testing.T, dir, token string) string {
	t.Helper()
	ts, err := os.MkdirTemp(dir, "..ts-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "token")
	if _, err := os.Lstat(link); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", "token"), link); err != nil {
			t.Fatal(err)
		}
	}
	return link
}

// intakeGets waits until the stand-in received line, sent with token, and fails on a
// request that is not a well-formed push.
func intakeGets(t *testing.T, got <-chan intakeRequest, token, node, line string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case r := <-got:
			if r.err != nil || r.path != "/v1/logs" || r.encoding != "gzip" {
				t.Fatalf("intake request %s (encoding %q): %v", r.path, r.encoding, r.err)
			}
			if r.authorization != "Bearer "+token {
				continue // sent before the token changed
			}
			rls := r.logs.ResourceLogs()
			for i := range rls.Len() {
				n, _ := rls.At(i).Resource().Attributes().Get("node")
				sls := rls.At(i).ScopeLogs()
				for j := range sls.Len() {
					lrs := sls.At(j).LogRecords()
					for k := range lrs.Len() {
						if lrs.At(k).Body().AsString() == line && n.AsString() == node {
							return
						}
					}
				}
			}
		case <-deadline:
			t.Fatalf("the intake did not get %q from node %s with the token", line, node)
		}
	}
}
