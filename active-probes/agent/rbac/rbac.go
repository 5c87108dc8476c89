// Package rbac holds the probe agent's RBAC: the ClusterRole the agent itself needs
// (faultline-probe-agent) and the one that lets a caller run probes
// (faultline-probe-runner). The Helm chart renders the same rules.
package rbac

import (
	_ "embed"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// YAML is rbac.yaml: both ClusterRoles, as one multi-document file.
//
//go:embed rbac.yaml
var YAML string

// NodeCertYAML is nodecert.yaml: the ClusterRole an agent needs to request its
// node's certificate through the CSR API (faultline-probe-agent-nodecert).
//
//go:embed nodecert.yaml
var NodeCertYAML string

// NodeCertClusterRole parses NodeCertYAML.
func NodeCertClusterRole() (*rbacv1.ClusterRole, error) {
	var r rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict([]byte(NodeCertYAML), &r); err != nil {
		return nil, fmt.Errorf("nodecert.yaml: %w", err)
	}
	return &r, nil
}

// ClusterRoles parses YAML.
func ClusterRoles() (agent, runner *rbacv1.ClusterRole, err error) {
	docs := strings.Split(YAML, "\n---\n")
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("rbac.yaml: want 2 documents, have %d", len(docs))
	}
	var roles [2]rbacv1.ClusterRole
	for i, d := range docs {
		if err := yaml.UnmarshalStrict([]byte(d), &roles[i]); err != nil {
			return nil, nil, fmt.Errorf("rbac.yaml document %d: %w", i+1, err)
		}
	}
	return &roles[0], &roles[1], nil
}
