// Package rbac holds the faultline controller's RBAC roles as plain YAML kept in the
// repository (clusterrole.yaml, role.yaml) and embedded here, so the deployment
// manifests and the tests use the same files.
//
// The ClusterRole covers what is cluster-wide: Nodes (informer, taints, the
// pointer annotation), nodes/status (the optional condition), NodeFaults, the reviews
// of the API's callers, and what lives in every namespace: pods (the drain step,
// the informers of the GPU pods and of the agent pods), their owners' owner
// references, and Events, which go where their object is (a fault's pods, the
// Nodes' in "default", the controller's own). The Role covers what lives in the
// controller's own namespace: the leader-election Lease and the checkpoint
// ConfigMap (by name); bound there with a RoleBinding, it lets the controller read
// or write nothing of the kind elsewhere.
package rbac

import (
	_ "embed"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Name is the name of the ClusterRole, the Role and their bindings.
const Name = "faultline-controller"

// ClusterRoleYAML is clusterrole.yaml as kept in the repository.
//
//go:embed clusterrole.yaml
var ClusterRoleYAML []byte

// RoleYAML is role.yaml as kept in the repository (without a namespace: it is set
// where the Role is created).
//
//go:embed role.yaml
var RoleYAML []byte

var (
	clusterRole rbacv1.ClusterRole
	role        rbacv1.Role
)

func init() {
	// The files are part of the binary: a broken one is a build defect, caught by
	// this package's tests.
	if err := parse(ClusterRoleYAML, "ClusterRole", &clusterRole, &clusterRole.TypeMeta, &clusterRole.ObjectMeta); err != nil {
		panic(err)
	}
	if err := parse(RoleYAML, "Role", &role, &role.TypeMeta, &role.ObjectMeta); err != nil {
		panic(err)
	}
}

func parse(data []byte, kind string, into any, tm *metav1.TypeMeta, om *metav1.ObjectMeta) error {
	return parseNamed(data, kind, Name, into, tm, om)
}

func parseNamed(data []byte, kind, name string, into any, tm *metav1.TypeMeta, om *metav1.ObjectMeta) error {
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		return fmt.Errorf("rbac: %s: %w", kind, err)
	}
	if tm.APIVersion != rbacv1.SchemeGroupVersion.String() || tm.Kind != kind {
		return fmt.Errorf("rbac: want %s %s, file has %s %s", rbacv1.SchemeGroupVersion, kind, tm.APIVersion, tm.Kind)
	}
	if om.Name != name || om.Namespace != "" {
		return fmt.Errorf("rbac: %s must be named %s and carry no namespace", kind, name)
	}
	return nil
}

// ClusterRole returns (a copy of) the controller's ClusterRole.
func ClusterRole() *rbacv1.ClusterRole { return clusterRole.DeepCopy() }

// Role returns (a copy of) the controller's Role, in namespace.
func Role(namespace string) *rbacv1.Role {
	r := role.DeepCopy()
	r.Namespace = namespace
	return r
}

func subject(namespace, serviceAccount string) []rbacv1.Subject {
	return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: serviceAccount}}
}

// ClusterRoleBinding binds the ClusterRole to the ServiceAccount namespace/serviceAccount.
func ClusterRoleBinding(namespace, serviceAccount string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Labels: clusterRole.Labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: Name},
		Subjects:   subject(namespace, serviceAccount),
	}
}

// RoleBinding binds the Role, in namespace, to the ServiceAccount namespace/serviceAccount.
func RoleBinding(namespace, serviceAccount string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: namespace, Labels: role.Labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: Name},
		Subjects:   subject(namespace, serviceAccount),
	}
}

// APIRolesYAML is apiroles.yaml: the ClusterRoles faultline-viewer and
// faultline-operator that grant use of the controller's API, as one multi-document file.
//
//go:embed apiroles.yaml
var APIRolesYAML string

// APIRoles parses APIRolesYAML.
func APIRoles() (viewer, operator *rbacv1.ClusterRole, err error) {
	docs := strings.Split(APIRolesYAML, "\n---\n")
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("apiroles.yaml: want 2 documents, have %d", len(docs))
	}
	var roles [2]rbacv1.ClusterRole
	for i, d := range docs {
		if err := yaml.UnmarshalStrict([]byte(d), &roles[i]); err != nil {
			return nil, nil, fmt.Errorf("apiroles.yaml document %d: %w", i+1, err)
		}
	}
	return &roles[0], &roles[1], nil
}

// SignerName is the name of the ClusterRole of the agents' certificate signer and
// of its binding.
const SignerName = "faultline-probe-agent-signer"

// SignerClusterRoleYAML is signer.yaml as kept in the repository.
//
//go:embed signer.yaml
var SignerClusterRoleYAML []byte

// SignerClusterRole returns the ClusterRole of the probe agents' certificate
// signer (controller/agentcerts).
func SignerClusterRole() (*rbacv1.ClusterRole, error) {
	var r rbacv1.ClusterRole
	if err := parseNamed(SignerClusterRoleYAML, "ClusterRole", SignerName, &r, &r.TypeMeta, &r.ObjectMeta); err != nil {
		return nil, err
	}
	return &r, nil
}

// ApproverName is the name of the ClusterRole of the agents' certificate approver
// (an external signer signs) and of its binding.
const ApproverName = "faultline-probe-agent-approver"

// ApproverSignerPlaceholder stands in approver.yaml for the signer name the role
// approves for.
const ApproverSignerPlaceholder = "SIGNER_NAME"

// ApproverClusterRoleYAML is approver.yaml as kept in the repository.
//
//go:embed approver.yaml
var ApproverClusterRoleYAML []byte

// ApproverClusterRole returns the ClusterRole of the probe agents' certificate
// approver for the external signer signerName (controller/agentcerts with
// Config.SignerName): approve on that signer only.
func ApproverClusterRole(signerName string) (*rbacv1.ClusterRole, error) {
	if signerName == "" {
		return nil, fmt.Errorf("rbac: %s: no signer name", ApproverName)
	}
	var r rbacv1.ClusterRole
	if err := parseNamed(ApproverClusterRoleYAML, "ClusterRole", ApproverName, &r, &r.TypeMeta, &r.ObjectMeta); err != nil {
		return nil, err
	}
	set := 0
	for i, rule := range r.Rules {
		for j, n := range rule.ResourceNames {
			if n == ApproverSignerPlaceholder {
				r.Rules[i].ResourceNames[j] = signerName
				set++
			}
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("rbac: %s: want %s once in the rules, found %d", ApproverName, ApproverSignerPlaceholder, set)
	}
	return &r, nil
}
