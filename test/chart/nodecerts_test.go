package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/faultline-dev/faultline/controller/agentcerts"
	ctlrbac "github.com/faultline-dev/faultline/controller/rbac"
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

// TestAgentNodeCertsCertManager: with probeAgent.tls.certManager.issuer, cert-manager's
// issuer signs and the controller only approves: the agents ask that issuer's signer
// for the certificate's lifetime; the controller approves for that signer name with
// the approver role, gets no signer CA (none is rendered) and verifies the agents
// with the issuer's CA from the named Secret or ConfigMap; for an Issuer the agents
// may reference it, as cert-manager checks. Values that do not fit fail the render,
// saying why.
func TestAgentNodeCertsCertManager(t *testing.T) {
	testenv.Integration(t)
	for _, c := range []struct {
		name, signer, issuerNS string
		sets                   []string
		caSecret, caConfigMap  string
		caKey                  string
	}{
		{name: "issuer", signer: "issuers.cert-manager.io/faultline.probe-agents", issuerNS: "faultline",
			sets:     []string{"probeAgent.tls.certManager.issuer.name=probe-agents", "probeAgent.tls.certManager.caBundle.secret=probe-agents-ca"},
			caSecret: "probe-agents-ca", caKey: "ca.crt"},
		{name: "issuer-elsewhere", signer: "issuers.cert-manager.io/pki.probe-agents", issuerNS: "pki",
			sets: []string{"probeAgent.tls.certManager.issuer.name=probe-agents", "probeAgent.tls.certManager.issuer.namespace=pki",
				"probeAgent.tls.certManager.caBundle.secret=probe-agents-ca"},
			caSecret: "probe-agents-ca", caKey: "ca.crt"},
		{name: "cluster-issuer", signer: "clusterissuers.cert-manager.io/fleet-ca",
			sets: []string{"probeAgent.tls.certManager.issuer.name=fleet-ca", "probeAgent.tls.certManager.issuer.kind=ClusterIssuer",
				"probeAgent.tls.certManager.caBundle.configMap=fleet-ca-bundle", "probeAgent.tls.certManager.caBundle.key=root.pem"},
			caConfigMap: "fleet-ca-bundle", caKey: "root.pem"},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := parse(t, render(t, renderCase{name: c.name, release: "faultline", namespace: "faultline", sets: c.sets}))
			for _, o := range []struct{ kind, name string }{{"Secret", "faultline-probe-agent-signer"}, {"Secret", "faultline-probe-agent-tls"},
				{"ClusterRole", "faultline-probe-agent-signer"}, {"ClusterRoleBinding", "faultline-probe-agent-signer"}} {
				if objs.find(o.kind, o.name) != nil {
					t.Errorf("%s %s rendered: cert-manager signs", o.kind, o.name)
				}
			}

			pa := daemonSet(t, objs, "faultline-probe-agent")
			spec := &pa.Spec.Template.Spec
			pc := container(t, spec, "probe-agent")
			for _, a := range []string{"--node-cert-signer=" + c.signer, "--node-cert-lifetime=24h"} {
				if !hasArg(pc, a) {
					t.Errorf("agent args %v lack %s", pc.Args, a)
				}
			}
			if _, ok := argWithPrefix(pc, "--node-cert-dir="); !ok {
				t.Errorf("agent args %v: want --node-cert-dir", pc.Args)
			}

			ctl := deployment(t, objs, "faultline-controller")
			cspec := &ctl.Spec.Template.Spec
			cc := container(t, cspec, "controller")
			for _, a := range []string{"--probe-agent-node-certs", "--probe-agent-cert-signer=" + c.signer, "--probe-agent-service-account=" + spec.ServiceAccountName} {
				if !hasArg(cc, a) {
					t.Errorf("controller args %v lack %s", cc.Args, a)
				}
			}
			for _, p := range []string{"--probe-agent-signer-cert-file=", "--probe-agent-signer-key-file=", "--probe-agent-cert-lifetime="} {
				if _, ok := argWithPrefix(cc, p); ok {
					t.Errorf("controller args %v: %s with cert-manager signing", cc.Args, p)
				}
			}
			if v := volume(cspec, "probe-agent-signer"); v != nil {
				t.Errorf("controller mounts a signer volume %+v", v)
			}
			caFile, _ := argWithPrefix(cc, "--probe-agent-ca-file=")
			v, _ := mountAt(cspec, cc, filepath.Dir(caFile))
			var items []corev1.KeyToPath
			switch {
			case v == nil:
				t.Fatalf("controller: nothing mounted at %s", filepath.Dir(caFile))
			case c.caSecret != "" && v.Secret != nil && v.Secret.SecretName == c.caSecret:
				items = v.Secret.Items
			case c.caConfigMap != "" && v.ConfigMap != nil && v.ConfigMap.Name == c.caConfigMap:
				items = v.ConfigMap.Items
			default:
				t.Fatalf("controller CA volume %+v: want the Secret %q or ConfigMap %q", v, c.caSecret, c.caConfigMap)
			}
			if len(items) != 1 || items[0].Key != c.caKey || items[0].Path != filepath.Base(caFile) {
				t.Errorf("controller CA items %+v: want %s alone as %s", items, c.caKey, filepath.Base(caFile))
			}

			approver := clusterRole(t, objs, "faultline-probe-agent-approver")
			want, err := ctlrbac.ApproverClusterRole(c.signer)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(approver.Rules, want.Rules) {
				t.Errorf("approver rules %+v, want %+v", approver.Rules, want.Rules)
			}
			if objs.find("ClusterRole", "faultline-probe-agent-nodecert") == nil {
				t.Error("the agents may not request certificates")
			}

			ref := objs.find("Role", "faultline-probe-agent-issuer")
			if c.issuerNS == "" {
				if ref != nil {
					t.Error("a reference Role for a ClusterIssuer, which cert-manager does not check")
				}
				return
			}
			role := get[rbacv1.Role](t, objs, "Role", "faultline-probe-agent-issuer")
			wantRules := []rbacv1.PolicyRule{{APIGroups: []string{"cert-manager.io"}, Resources: []string{"signers"}, ResourceNames: []string{"probe-agents"}, Verbs: []string{"reference"}}}
			if role.Namespace != c.issuerNS || !reflect.DeepEqual(role.Rules, wantRules) {
				t.Errorf("reference Role in %q with %+v, want in %q %+v", role.Namespace, role.Rules, c.issuerNS, wantRules)
			}
			b := get[rbacv1.RoleBinding](t, objs, "RoleBinding", "faultline-probe-agent-issuer")
			wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: spec.ServiceAccountName, Namespace: "faultline"}}
			if b.Namespace != c.issuerNS || b.RoleRef.Kind != "Role" || b.RoleRef.Name != role.Name || !reflect.DeepEqual(b.Subjects, wantSubjects) {
				t.Errorf("reference RoleBinding %+v: want the Role %s bound to %+v in %s", b, role.Name, wantSubjects, c.issuerNS)
			}
		})
	}

	t.Run("Refused", func(t *testing.T) {
		issuer := "probeAgent.tls.certManager.issuer.name=probe-agents"
		secret := "probeAgent.tls.certManager.caBundle.secret=probe-agents-ca"
		for _, r := range []struct {
			sets []string
			want string
		}{
			{[]string{issuer}, "needs the issuer's CA certificate"},
			{[]string{issuer, secret, "probeAgent.tls.certManager.caBundle.configMap=c"}, "set one of probeAgent.tls.certManager.caBundle.secret or .configMap"},
			{[]string{issuer, secret, "probeAgent.tls.mode=shared"}, "needs probeAgent.tls.mode node"},
			{[]string{issuer, secret, "probeAgent.tls.signer.existingSecret=agent-ca"}, "not with probeAgent.tls.certManager.issuer"},
			{[]string{issuer, secret, "probeAgent.tls.certManager.issuer.kind=Certificate"}, "Issuer"},
		} {
			mustRefuse(t, r.sets, r.want)
		}
	})
}
