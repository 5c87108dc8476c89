package chart

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestMonitoring renders with the Prometheus Operator's API present: a
// ServiceMonitor per component, each selecting exactly one of the chart's Services by
// a port that Service has, and a PrometheusRule whose rules promtool accepts.
func TestMonitoring(t *testing.T) {
	testenv.Integration(t)
	promtool := filepath.Join(filepath.Dir(testenv.Binary(t, "prometheus")), "promtool")
	if _, err := os.Stat(promtool); err != nil {
		t.Fatalf("promtool is not beside prometheus: %v", err)
	}
	for _, name := range []string{"defaults-monitoring", "existing-collector", "direct-loki"} {
		t.Run(name, func(t *testing.T) {
			c := caseNamed(t, name)
			objs := parse(t, render(t, c))
			sms := objs.ofKind("ServiceMonitor")
			wantSM := len(objs.ofKind("Deployment")) + len(objs.ofKind("DaemonSet"))
			if len(sms) != wantSM {
				t.Errorf("%d ServiceMonitors for %d workloads", len(sms), wantSM)
			}
			for _, sm := range sms {
				var spec struct {
					Selector struct {
						MatchLabels map[string]string `json:"matchLabels"`
					} `json:"selector"`
					NamespaceSelector struct {
						MatchNames []string `json:"matchNames"`
					} `json:"namespaceSelector"`
					Endpoints []struct {
						Port string `json:"port"`
						Path string `json:"path"`
					} `json:"endpoints"`
				}
				remarshal(t, sm.Object["spec"], &spec)
				if len(spec.NamespaceSelector.MatchNames) != 1 || spec.NamespaceSelector.MatchNames[0] != c.namespace {
					t.Errorf("ServiceMonitor %s namespaceSelector %v", sm.GetName(), spec.NamespaceSelector.MatchNames)
				}
				var matched []*corev1.Service
				for _, u := range objs.ofKind("Service") {
					s := convert[corev1.Service](t, u)
					if labels.SelectorFromSet(spec.Selector.MatchLabels).Matches(labels.Set(s.Labels)) {
						matched = append(matched, s)
					}
				}
				if len(matched) != 1 {
					t.Errorf("ServiceMonitor %s selects %d Services", sm.GetName(), len(matched))
					continue
				}
				for _, ep := range spec.Endpoints {
					found := false
					for _, p := range matched[0].Spec.Ports {
						found = found || p.Name == ep.Port
					}
					if !found || ep.Path != "/metrics" {
						t.Errorf("ServiceMonitor %s endpoint %+v: Service %s has no such port", sm.GetName(), ep, matched[0].Name)
					}
				}
			}

			rules := objs.ofKind("PrometheusRule")
			if len(rules) != 1 {
				t.Fatalf("%d PrometheusRules", len(rules))
			}
			groups, err := yaml.Marshal(map[string]any{"groups": lookup(rules[0].Object, "spec", "groups")})
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(file, groups, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
				t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, groups)
			}
			if !bytes.Contains(groups, []byte(`namespace="`+c.namespace+`"`)) {
				t.Errorf("the rules do not select the release namespace %s", c.namespace)
			}
		})
	}
	// Without the API the objects are left out, whatever the values say.
	if objs := parse(t, render(t, caseNamed(t, "defaults"))); len(objs.ofKind("ServiceMonitor"))+len(objs.ofKind("PrometheusRule")) != 0 {
		t.Error("monitoring objects rendered without monitoring.coreos.com/v1")
	}
}

func remarshal(t testing.TB, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// TestCollectorToLoki runs the real collector (the test build of the pinned release)
// with the configuration and the TLS Secret the chart generates by default, pointed
// at a real Loki and a real apiserver (its authenticator's TokenReviews): the config
// validates; the receiver serves the generated certificate, which the exporter's
// client verifies with the rendered CA for the Service name it is given; another
// render's CA and plain HTTP get nowhere; a record without the exporter's token is
// refused; and an OTLP log record sent the way the exporter sends one, with its
// projected token over TLS, lands in Loki under the node and source labels the
// controller's selectors use, and reaches a stand-in for the controller's intake
// over TLS verified with the intake's CA, with the collector's token of the intake's
// audience (the faultlinetoken extension is in the build and its config loads), and
// with the next token once the kubelet renews it.
func TestCollectorToLoki(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Kubernetes: true, Loki: true})
	otelcol := testenv.Binary(t, "otelcol-faultline")
	c := caseNamed(t, "defaults")
	c.sets = []string{"loki.url=" + env.LokiURL()}
	objs := parse(t, render(t, c))
	cfg := collectorConfig(t, objs, "faultline-otel-collector")
	const service = "faultline-otel-collector.faultline.svc"
	ec := container(t, &daemonSet(t, objs, "faultline-dmesg-exporter").Spec.Template.Spec, "dmesg-exporter")
	endpoint, _ := argWithPrefix(ec, "--otlp-endpoint=")
	if endpoint != "https://"+service+":4318" || !hasArg(ec, "--ca-file=/var/run/secrets/faultline/collector-ca/ca.crt") {
		t.Errorf("exporter args %v: want https://%s:4318 and --ca-file by default", ec.Args, service)
	}
	if got := lookup(cfg, "exporters", "otlphttp/loki", "endpoint"); got != env.LokiURL()+"/otlp" {
		t.Fatalf("collector exports to %v, want %s/otlp", got, env.LokiURL())
	}

	// The receiver serves the chart's generated pair, mounted from its Secret.
	tlsCfg, _ := lookup(cfg, "receivers", "otlp", "protocols", "http", "tls").(map[string]any)
	if tlsCfg == nil {
		t.Fatalf("the default collector config serves no TLS: %v", lookup(cfg, "receivers"))
	}
	sec := get[corev1.Secret](t, objs, "Secret", "faultline-otel-collector-tls")
	col := deployment(t, objs, "faultline-otel-collector")
	cc := container(t, &col.Spec.Template.Spec, "otel-collector")
	for _, k := range []string{"cert_file", "key_file"} {
		p, _ := tlsCfg[k].(string)
		if v, _ := mountAt(&col.Spec.Template.Spec, cc, filepath.Dir(p)); v == nil || v.Secret == nil || v.Secret.SecretName != sec.Name {
			t.Errorf("the receiver's %s %q is not in the Secret %s (volume %+v)", k, p, sec.Name, v)
		}
	}
	ca, leaf := parseCert(t, sec.Data["ca.crt"]), parseCert(t, sec.Data["tls.crt"])
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, dns := range []string{service, "faultline-otel-collector", "faultline-otel-collector.faultline", service + ".cluster.local"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: dns, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("tls.crt does not verify for %s with ca.crt: %v", dns, err)
		}
	}

	dir := t.TempDir()
	write := func(name string, v any) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if out, err := exec.Command(otelcol, "validate", "--config="+write("rendered.yaml", cfg)).CombinedOutput(); err != nil {
		t.Fatalf("the chart's collector config does not validate: %v\n%s", err, out)
	}

	// Run it on loopback: only the listen addresses, the paths of the rendered pair and
	// the authenticator's apiserver (in-cluster in the chart) change.
	files := map[string]string{}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		files[k] = filepath.Join(dir, k)
		if err := os.WriteFile(files[k], sec.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsCfg["cert_file"], tlsCfg["key_file"] = files["tls.crt"], files["tls.key"]
	lookup(cfg, "extensions", "faultlineauth").(map[string]any)["kubeconfig"] = env.Kubeconfig()
	// The same lines go to the controller's intake: a stand-in serving the chart's
	// intake certificate, reached as the intake's Service name, verified with the
	// intake's CA; the token is the collector's, of the audience the chart projects.
	intakeSec := get[corev1.Secret](t, objs, "Secret", "faultline-controller-intake-tls")
	intakeCA := filepath.Join(dir, "intake-ca.crt")
	if err := os.WriteFile(intakeCA, intakeSec.Data["ca.crt"], 0o600); err != nil {
		t.Fatal(err)
	}
	intakeURL, intakeGot := intakeStandIn(t, intakeSec)
	var audience string
	for _, v := range col.Spec.Template.Spec.Volumes {
		if v.Projected != nil && v.Name == "intake-token" {
			audience = v.Projected.Sources[0].ServiceAccountToken.Audience
		}
	}
	intakeToken := env.PodToken(t, "faultline", "faultline-otel-collector", "gpu-chart-0", []string{audience})
	tokenDir := filepath.Join(dir, "intake-token")
	if err := os.Mkdir(tokenDir, 0o700); err != nil {
		t.Fatal(err)
	}
	pointIntake(t, cfg, intakeURL, "faultline-controller-intake.faultline.svc", intakeCA, kubeletToken(t, tokenDir, intakeToken))
	tokenFile := filepath.Join(dir, "token")
	token := env.PodToken(t, "faultline", "faultline-dmesg-exporter", "gpu-chart-1", []string{"faultline-collector"})
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2)
	lookup(cfg, "receivers", "otlp", "protocols", "http").(map[string]any)["endpoint"] = fmt.Sprintf("127.0.0.1:%d", ports[0])
	prom := lookup(cfg, "service", "telemetry", "metrics", "readers").([]any)[0]
	pm := lookup(prom.(map[string]any), "pull", "exporter", "prometheus").(map[string]any)
	pm["host"], pm["port"] = "127.0.0.1", ports[1]
	// The exporter's client (ship.Auth's transport: the token file, the CA file) with a
	// dialer that reaches the Service name on loopback, so the name is verified.
	loopback := &transport.DialHolder{Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", ports[0]))
	}}
	client := func(tokenFile, caFile string) *http.Client {
		rt, err := transport.New(&transport.Config{BearerTokenFile: tokenFile, TLS: transport.TLSConfig{CAFile: caFile}, DialHolder: loopback})
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Transport: rt, Timeout: 10 * time.Second}
	}
	cmd := exec.Command(otelcol, "--config="+write("run.yaml", cfg))
	logf, err := os.Create(filepath.Join(dir, "otelcol.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("collector log:\n%s", b)
		}
	})

	// One record as the exporter sends it (OTLP/HTTP; JSON here), resource attributes
	// node and source.
	line := "NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus. chart-test " + strconv.FormatInt(time.Now().UnixNano(), 10)
	now := time.Now()
	body := fmt.Sprintf(`{"resourceLogs":[{"resource":{"attributes":[
		{"key":"node","value":{"stringValue":"gpu-chart-1"}},{"key":"source","value":{"stringValue":"kernel"}},
		{"key":"k8s.node.name","value":{"stringValue":"gpu-chart-1"}}]},
		"scopeLogs":[{"logRecords":[{"timeUnixNano":"%d","body":{"stringValue":%q}}]}]}]}`, now.UnixNano(), line)
	post := func(c *http.Client, url string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, url+"/v1/logs", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return c.Do(req)
	}
	eventually.NoError(t, 30*time.Second, "the collector to take the OTLP record over TLS", func() error {
		resp, err := post(client(tokenFile, files["ca.crt"]), endpoint)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, b)
		}
		return nil
	})

	resp, err := post(client("", files["ca.crt"]), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a record without the exporter's token: %s, want 401", resp.Status)
	}
	// Another render's CA does not verify this receiver: the token is not sent.
	other := get[corev1.Secret](t, parse(t, render(t, caseNamed(t, "defaults"))), "Secret", "faultline-otel-collector-tls")
	otherCA := filepath.Join(dir, "other-ca.crt")
	if err := os.WriteFile(otherCA, other.Data["ca.crt"], 0o600); err != nil {
		t.Fatal(err)
	}
	if resp, err := post(client(tokenFile, otherCA), endpoint); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		if err == nil {
			resp.Body.Close()
		}
		t.Errorf("another render's CA: %v, want an unknown authority", err)
	}
	// Plain HTTP to the receiver's port is not served.
	if resp, err := post(client(tokenFile, ""), strings.Replace(endpoint, "https://", "http://", 1)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP to the receiver: %s, want no record taken", resp.Status)
		}
	}

	query := `{node="gpu-chart-1", source="kernel"}`
	eventually.NoError(t, 30*time.Second, "Loki to have the line sent through the collector", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := testenv.QueryLoki(ctx, env.LokiURL(), query, now.Add(-time.Minute), time.Now().Add(time.Minute))
		if err == nil && (len(got) != 1 || got[0].Line != line) {
			err = fmt.Errorf("%s has %+v", query, got)
		}
		return err
	})
	// The intake got it too, with the collector's token (which the controller reviews
	// for the audience it is given), gzip-compressed OTLP protobuf, node as attributed.
	intakeGets(t, intakeGot, intakeToken, "gpu-chart-1", line)
	// The kubelet renews the token (a new ..data link in the volume): within a minute
	// the pushes carry the new one.
	renewed := env.PodToken(t, "faultline", "faultline-otel-collector", "gpu-chart-2", []string{audience})
	kubeletToken(t, tokenDir, renewed)
	eventually.True(t, 90*time.Second, "the intake to get the renewed token", func() bool {
		if resp, err := post(client(tokenFile, files["ca.crt"]), endpoint); err == nil {
			resp.Body.Close()
		}
		for {
			select {
			case r := <-intakeGot:
				if r.authorization == "Bearer "+renewed {
					return true
				}
			case <-time.After(2 * time.Second):
				return false
			}
		}
	})
	ctl := container(t, &deployment(t, objs, "faultline-controller").Spec.Template.Spec, "controller")
	controllerAudience, _ := argWithPrefix(ctl, "--intake-audience=")
	review, err := env.Clientset().AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: intakeToken, Audiences: []string{controllerAudience}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:faultline:faultline-otel-collector" {
		t.Errorf("the collector's intake token, reviewed for the controller's audience %q: %+v", controllerAudience, review.Status)
	}
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
