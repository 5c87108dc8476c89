package chart

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/faultline-dev/faultline/controller/agentcerts"
	"github.com/faultline-dev/faultline/test/testenv"
)

// TestAgentNodeCerts: by default (probeAgent.tls.mode=node) each agent requests its
// own node's certificate: it mounts no Secret of TLS material, keeps its key in a
// memory-backed volume of its pod and waits for the certificate behind a startup
// probe; the controller mounts the signer CA's pair (which the signer loads) and
// its certificate alone as the agents' CA, verifies the node's name, and approves
// for the agents' ServiceAccount only. With signer.existingSecret, no CA is
// generated and that Secret is mounted.
func TestAgentNodeCerts(t *testing.T) {
	testenv.Integration(t)
	objs := parse(t, render(t, caseNamed(t, "defaults")))
	sec := get[corev1.Secret](t, objs, "Secret", "faultline-probe-agent-signer")
	if objs.find("Secret", "faultline-probe-agent-tls") != nil {
		t.Error("the shared agent certificate is rendered in mode node")
	}
	dir := t.TempDir()
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(dir, k), sec.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if string(sec.Data["ca.crt"]) != string(sec.Data["tls.crt"]) {
		t.Error("the signer Secret's ca.crt is not its CA certificate tls.crt")
	}
	if _, err := agentcerts.LoadCA(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err != nil {
		t.Errorf("the generated signer CA does not load: %v", err)
	}

	pa := daemonSet(t, objs, "faultline-probe-agent")
	spec := &pa.Spec.Template.Spec
	pc := container(t, spec, "probe-agent")
	certDir, ok := argWithPrefix(pc, "--node-cert-dir=")
	if _, shared := argWithPrefix(pc, "--tls-cert-file="); !ok || shared {
		t.Errorf("agent args %v: want --node-cert-dir and no --tls-cert-file", pc.Args)
	}
	if v, _ := mountAt(spec, pc, certDir); v == nil || v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("agent's %s: volume %+v, want an emptyDir in memory", certDir, v)
	}
	for _, v := range spec.Volumes {
		if v.Secret == nil {
			continue
		}
		if v.Secret.SecretName == sec.Name {
			t.Errorf("agent mounts the signer's Secret %s", sec.Name)
		}
		for _, it := range v.Secret.Items {
			if it.Key != "ca.crt" {
				t.Errorf("agent mounts %s of the Secret %s: its key is made on the node", it.Key, v.Secret.SecretName)
			}
		}
	}
	if p := pc.StartupProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.FailureThreshold*p.PeriodSeconds < 300 {
		t.Errorf("agent startup probe %+v: want HTTPS, minutes for the first certificate", p)
	}

	ctl := deployment(t, objs, "faultline-controller")
	cc := container(t, &ctl.Spec.Template.Spec, "controller")
	for _, a := range []string{"--probe-agent-node-certs", "--probe-agent-service-account=" + spec.ServiceAccountName, "--probe-agent-cert-lifetime=24h"} {
		if !hasArg(cc, a) {
			t.Errorf("controller args %v lack %s", cc.Args, a)
		}
	}
	if _, ok := argWithPrefix(cc, "--probe-agent-server-name="); ok {
		t.Error("controller verifies a shared name in mode node")
	}
	caFile, _ := argWithPrefix(cc, "--probe-agent-ca-file=")
	if v, _ := mountAt(&ctl.Spec.Template.Spec, cc, filepath.Dir(caFile)); v == nil || v.Secret == nil || v.Secret.SecretName != sec.Name ||
		len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "ca.crt" {
		t.Errorf("controller CA volume %+v: want ca.crt alone from %s", v, sec.Name)
	}
	certFile, _ := argWithPrefix(cc, "--probe-agent-signer-cert-file=")
	keyFile, _ := argWithPrefix(cc, "--probe-agent-signer-key-file=")
	if v, m := mountAt(&ctl.Spec.Template.Spec, cc, filepath.Dir(certFile)); certFile == "" || filepath.Dir(keyFile) != filepath.Dir(certFile) ||
		v == nil || v.Secret == nil || v.Secret.SecretName != sec.Name || !m.ReadOnly {
		t.Errorf("controller signer volume %+v for %s, %s: want the Secret %s read-only", v, certFile, keyFile, sec.Name)
	}

	ex := parse(t, render(t, renderCase{name: "agent-signer-existing", release: "faultline", namespace: "faultline",
		sets: []string{"probeAgent.tls.signer.existingSecret=agent-ca"}}))
	if ex.find("Secret", "faultline-probe-agent-signer") != nil {
		t.Error("with probeAgent.tls.signer.existingSecret, a signer CA is generated")
	}
	ectl := deployment(t, ex, "faultline-controller")
	for _, name := range []string{"probe-agent-ca", "probe-agent-signer"} {
		if v := volume(&ectl.Spec.Template.Spec, name); v == nil || v.Secret == nil || v.Secret.SecretName != "agent-ca" {
			t.Errorf("controller volume %s %+v, want the Secret agent-ca", name, v)
		}
	}
}
