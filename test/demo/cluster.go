package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	agentrbac "github.com/faultline-dev/faultline/active-probes/agent/rbac"
	"github.com/faultline-dev/faultline/controller/rbac"
	"github.com/faultline-dev/faultline/test/testenv"
)

// tools builds or finds the pinned components with the repository's build script,
// showing its progress, and points the harness at them.
func (d *demo) tools(ctx context.Context) error {
	if os.Getenv(testenv.ToolsPathEnv) != "" {
		return nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return fmt.Errorf("run the demo from a faultline checkout (make demo): %w", err)
	}
	script := filepath.Join(root, "test", "tools", "build.sh")
	for _, c := range []string{"debian", "etcd", "otelcol", "kubernetes", "loki"} {
		cmd := exec.CommandContext(ctx, script, c)
		cmd.Stdout, cmd.Stderr = d.out, d.out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %s: %w", script, c, err)
		}
	}
	out, err := exec.CommandContext(ctx, script, "path").Output()
	if err != nil {
		return fmt.Errorf("%s path: %w", script, err)
	}
	return os.Setenv(testenv.ToolsPathEnv, strings.TrimSpace(string(out)))
}

func (d *demo) cluster(ctx context.Context) (ctrlToken string) {
	if _, err := d.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		d.tb.Fatalf("namespace: %v", err)
	}
	for i := 0; i < d.o.Nodes; i++ {
		name := fmt.Sprintf("gpu-%d", i)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8",
			rackLabel: rackOf(i)}}}
		n, err := d.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			d.tb.Fatalf("node %s: %v", name, err)
		}
		// No kubelet runs here: the demo reports each node Ready, as a kubelet would,
		// and lifts the not-ready taint the apiserver put on the new Node.
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: name}}
		n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		n.Status.Allocatable = n.Status.Capacity
		n.Status.NodeInfo.BootID = fmt.Sprintf("6d1e0b52-0000-4000-8000-%012d", i)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "simulated by faultline demo", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if n, err = d.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			d.tb.Fatalf("node %s status: %v", name, err)
		}
		n.Spec.Taints = nil
		if _, err = d.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			d.tb.Fatalf("node %s: %v", name, err)
		}
		d.nodes = append(d.nodes, name)
		d.machines[name] = &machine{kubelet: testenv.StartPodResources(d.tb)}
	}
	ctrlToken = d.env.ServiceAccountToken(d.tb, ns, "faultline-controller")
	agentRole, runnerRole, err := agentrbac.ClusterRoles()
	if err != nil {
		d.tb.Fatal(err)
	}
	rb := d.cs.RbacV1()
	steps := []error{}
	_, e := rb.ClusterRoles().Create(ctx, rbac.ClusterRole(), metav1.CreateOptions{})
	steps = append(steps, e)
	_, e = rb.ClusterRoleBindings().Create(ctx, rbac.ClusterRoleBinding(ns, "faultline-controller"), metav1.CreateOptions{})
	steps = append(steps, e)
	_, e = rb.Roles(ns).Create(ctx, rbac.Role(ns), metav1.CreateOptions{})
	steps = append(steps, e)
	_, e = rb.RoleBindings(ns).Create(ctx, rbac.RoleBinding(ns, "faultline-controller"), metav1.CreateOptions{})
	steps = append(steps, e)
	_, e = rb.ClusterRoles().Create(ctx, agentRole, metav1.CreateOptions{})
	steps = append(steps, e)
	_, e = rb.ClusterRoles().Create(ctx, runnerRole, metav1.CreateOptions{})
	steps = append(steps, e)
	// The agents request their certificates; the controller approves and signs them.
	certRole, err := agentrbac.NodeCertClusterRole()
	if err != nil {
		d.tb.Fatal(err)
	}
	signerRole, err := rbac.SignerClusterRole()
	if err != nil {
		d.tb.Fatal(err)
	}
	for _, r := range []*rbacv1.ClusterRole{certRole, signerRole} {
		_, e = rb.ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
		steps = append(steps, e)
	}
	for _, b := range []struct{ role, sa string }{{agentRole.Name, "faultline-probe-agent"}, {runnerRole.Name, "faultline-controller"},
		{certRole.Name, "faultline-probe-agent"}, {signerRole.Name, "faultline-controller"}} {
		crb := rbac.ClusterRoleBinding(ns, b.sa)
		crb.Name, crb.RoleRef.Name = b.role, b.role
		_, e = rb.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
		steps = append(steps, e)
	}
	// The demo's own API calls, and the commands it prints, act as an operator; a
	// viewer reads and asks nothing.
	viewer, operator, err := rbac.APIRoles()
	if err != nil {
		d.tb.Fatal(err)
	}
	for _, r := range []*rbacv1.ClusterRole{viewer, operator} {
		_, e = rb.ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
		steps = append(steps, e)
		b := rbac.ClusterRoleBinding(ns, r.Name)
		b.Name, b.RoleRef.Name = r.Name, r.Name
		_, e = rb.ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
		steps = append(steps, e)
	}
	d.apiToken = d.env.ServiceAccountToken(d.tb, ns, operator.Name)
	d.viewerToken = d.env.ServiceAccountToken(d.tb, ns, viewer.Name)
	if err := errors.Join(steps...); err != nil {
		d.tb.Fatalf("RBAC: %v", err)
	}
	d.say("        nodes %s (8 × A100 each: nvidia.com/gpu capacity 8, labelled nvidia.com/gpu.present=true; %s: gpu-0..2 in %s, the rest in %s)",
		strings.Join(d.nodes, ", "), rackLabel, rackOf(0), rackOf(rackSize))
	d.say("        ServiceAccounts faultline/faultline-controller (ClusterRole+Role faultline-controller, faultline-probe-runner)")
	d.say("        and faultline/faultline-probe-agent (faultline-probe-agent)")
	return ctrlToken
}

// rackLabel is the topology label the controller groups nodes by for fleet faults
// (one of its --fleet-label defaults): the first rackSize nodes share a rack.
const (
	rackLabel = "topology.kubernetes.io/rack"
	rackSize  = 3
)

func rackOf(i int) string {
	if i < rackSize {
		return "rack-a"
	}
	return "rack-b"
}

// kubeconfigFor writes a kubeconfig that authenticates with a ServiceAccount token.
func (d *demo) kubeconfigFor(token, user string) string {
	rc := d.env.RESTConfig()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["demo"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData, CertificateAuthority: rc.CAFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["demo"] = &clientcmdapi.Context{Cluster: "demo", AuthInfo: user}
	cfg.CurrentContext = "demo"
	path := filepath.Join(d.o.Dir, user+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		d.tb.Fatal(err)
	}
	return path
}
