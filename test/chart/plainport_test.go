package chart

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestNoTokenOverPlainHTTP: in every render no controller container has a listener
// that takes a bearer token over plain HTTP. Its plain port (--listen, the Service's
// port http) has no handler that checks a token (controller TestPlainPortTakesNoToken:
// every path but /healthz and /readyz is 404, /metrics beside them), and Autopilot's
// /status is served on the HTTPS listener alone: --status-listen comes with the
// certificate and key of a mounted kubernetes.io/tls Secret, its container port is
// named status, and the Service's status port targets that port, never http.
func TestNoTokenOverPlainHTTP(t *testing.T) {
	served := 0
	for _, c := range cases {
		objs := parse(t, render(t, c))
		for _, o := range objs.ofKind("Deployment") {
			d := convert[appsv1.Deployment](t, o)
			spec := &d.Spec.Template.Spec
			for i := range spec.Containers {
				ct := &spec.Containers[i]
				if len(ct.Args) == 0 || ct.Args[0] != "controller" {
					continue
				}
				if s := checkStatusListener(t, c.name, objs, d.Name, spec, ct); s {
					served++
				}
			}
		}
		// The Service's ports: http targets the plain port, status (if any) the
		// HTTPS one; nothing else.
		for _, o := range objs.ofKind("Service") {
			svc := convert[corev1.Service](t, o)
			if !strings.HasSuffix(svc.Name, "-controller") {
				continue
			}
			for _, p := range svc.Spec.Ports {
				if want := intstr.FromString(p.Name); (p.Name != "http" && p.Name != "status") || p.TargetPort != want {
					t.Errorf("%s: Service %s port %s targets %s; want only http→http and status→status", c.name, svc.Name, p.Name, p.TargetPort.String())
				}
			}
		}
	}
	if served == 0 {
		t.Error("no render case serves /status: the HTTPS listener is not checked")
	}
}

// checkStatusListener checks the controller container ct and reports whether it
// serves /status.
func checkStatusListener(t *testing.T, name string, objs objects, deploy string, spec *corev1.PodSpec, ct *corev1.Container) bool {
	t.Helper()
	listen, on := argWithPrefix(ct, "--status-listen=")
	certFile, _ := argWithPrefix(ct, "--status-tls-cert-file=")
	keyFile, _ := argWithPrefix(ct, "--status-tls-key-file=")
	var statusPort *corev1.ContainerPort
	for i := range ct.Ports {
		if ct.Ports[i].Name == "status" {
			statusPort = &ct.Ports[i]
		}
	}
	if !on {
		if statusPort != nil || certFile != "" {
			t.Errorf("%s: %s has a status port or certificate but no --status-listen", name, deploy)
		}
		return false
	}
	if certFile == "" || keyFile == "" || filepath.Dir(certFile) != filepath.Dir(keyFile) {
		t.Errorf("%s: %s --status-listen=%s without --status-tls-cert-file and --status-tls-key-file beside it: %v", name, deploy, listen, ct.Args)
		return true
	}
	v, m := mountAt(spec, ct, filepath.Dir(certFile))
	if v == nil || v.Secret == nil || !m.ReadOnly {
		t.Errorf("%s: %s: the certificate's directory %s is not a Secret mounted read-only", name, deploy, filepath.Dir(certFile))
		return true
	}
	if sec := objs.find("Secret", v.Secret.SecretName); sec != nil && convert[corev1.Secret](t, sec).Type != corev1.SecretTypeTLS {
		t.Errorf("%s: %s mounts %s, not a kubernetes.io/tls Secret", name, deploy, v.Secret.SecretName)
	}
	httpPort, _ := argWithPrefix(ct, "--listen=")
	if statusPort == nil || ":"+itoa(statusPort.ContainerPort) != listen || ":"+itoa(statusPort.ContainerPort) == httpPort {
		t.Errorf("%s: %s --status-listen=%s, container port status %+v, --listen=%s: want the status port to be --status-listen's, apart from --listen", name, deploy, listen, statusPort, httpPort)
	}
	return true
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
