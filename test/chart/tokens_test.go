package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/faultline-dev/faultline/test/testenv"
)

// tokenSends maps each flag that hands a container a token file to the flag naming
// where that token goes and the flag of the CA that verifies the receiver. The
// controller's probe token goes to the agents, over TLS by construction (the agents
// serve HTTPS only), so only its CA is checked.
var tokenSends = map[string]struct{ endpoint, ca string }{
	"--token-file":        {"--otlp-endpoint=", "--ca-file="},
	"--events-token-file": {"--events-otlp-endpoint=", "--events-ca-file="},
	"--probe-token-file":  {"", "--probe-agent-ca-file="},
}

// plainHTTPOptOut is the one value that lets a token travel over plain HTTP.
const plainHTTPOptOut = "collector.tls.enabled=false"

// TestTokensOverTLS renders every case and the plain-HTTP opt-out and checks that
// no container given a token file sends it to an http:// endpoint, and that each
// verifies its receiver with a CA file from a Secret, unless the opt-out is set; with
// it, the render does send a token over plain HTTP and NOTES.txt warns. NOTES.txt
// also warns when Loki's password goes to an http:// loki.url.
func TestTokensOverTLS(t *testing.T) {
	testenv.Integration(t)
	optOut := renderCase{name: "collector-plain-http", release: "faultline", namespace: "faultline", sets: []string{plainHTTPOptOut}}
	for _, c := range append(append([]renderCase(nil), cases...), optOut) {
		t.Run(c.name, func(t *testing.T) {
			objs := parse(t, render(t, c))
			plain := 0
			for w, tmpl := range podTemplates(t, objs) {
				for i := range tmpl.Spec.Containers {
					plain += checkTokenSends(t, w, &tmpl.Spec, &tmpl.Spec.Containers[i])
				}
			}
			notes := renderNotes(t, c)
			const tlsWarning = "WARNING: collector.tls.enabled=false"
			if c.name == optOut.name {
				if plain == 0 {
					t.Errorf("with %s no token is sent over plain HTTP: the check above sees nothing", plainHTTPOptOut)
				}
				if !strings.Contains(notes, tlsWarning) {
					t.Errorf("with %s NOTES.txt does not warn:\n%s", plainHTTPOptOut, notes)
				}
			} else {
				if plain != 0 {
					t.Errorf("%d token senders use plain HTTP without %s", plain, plainHTTPOptOut)
				}
				if strings.Contains(notes, tlsWarning) {
					t.Errorf("NOTES.txt warns about plain HTTP with TLS on:\n%s", notes)
				}
			}
			// The collector-auth case: basic auth to http://loki-gateway.
			const lokiWarning = "WARNING: loki.url is plain HTTP"
			if want := c.name == "collector-auth"; strings.Contains(notes, lokiWarning) != want {
				t.Errorf("NOTES.txt warns about Loki credentials over plain HTTP: %v, want %v:\n%s", !want, want, notes)
			}
		})
	}
}

// checkTokenSends checks the token files of one container and returns how many it
// sends over plain HTTP (an error unless the render opted out, which the caller knows).
func checkTokenSends(t *testing.T, workload string, spec *corev1.PodSpec, c *corev1.Container) (plain int) {
	t.Helper()
	for _, a := range c.Args {
		flag, _, ok := strings.Cut(a, "=")
		if !ok || !strings.HasSuffix(flag, "token-file") {
			continue
		}
		send, known := tokenSends[flag]
		if !known {
			t.Errorf("%s/%s: %s is a token file this test does not know where it goes: add it to tokenSends", workload, c.Name, a)
			continue
		}
		if send.endpoint != "" {
			endpoint, _ := argWithPrefix(c, send.endpoint)
			switch {
			case strings.HasPrefix(endpoint, "http://"):
				plain++
				continue
			case !strings.HasPrefix(endpoint, "https://"):
				t.Errorf("%s/%s: %s with %s%q, want an https:// endpoint", workload, c.Name, a, send.endpoint, endpoint)
				continue
			}
		}
		caFile, ok := argWithPrefix(c, send.ca)
		v, _ := mountAt(spec, c, filepath.Dir(caFile))
		if !ok || v == nil || v.Secret == nil || len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "ca.crt" ||
			v.Secret.Items[0].Path != filepath.Base(caFile) {
			t.Errorf("%s/%s: %s but %s%q is not ca.crt alone from a Secret (volume %+v)", workload, c.Name, a, send.ca, caFile, v)
		}
	}
	return plain
}

// renderNotes renders the chart's NOTES.txt for c: helm template leaves it out, so
// a copy of the chart carries it as a named template printed into a ConfigMap.
func renderNotes(t *testing.T, c renderCase) string {
	t.Helper()
	chart := filepath.Join(t.TempDir(), "faultline")
	copyDir(t, filepath.Join(repoRoot(t), chartDir), chart)
	tmpl := filepath.Join(chart, "templates")
	notes := readFile(t, filepath.Join(tmpl, "NOTES.txt"))
	files := map[string]string{
		"_notes_test.tpl": `{{- define "faultline.notesTest" -}}` + string(notes) + `{{- end -}}`,
		"notes_test.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-test\ndata:\n  notes: {{ include \"faultline.notesTest\" . | toJson }}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(tmpl, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.chart = chart
	return get[corev1.ConfigMap](t, parse(t, render(t, c)), "ConfigMap", "notes-test").Data["notes"]
}
