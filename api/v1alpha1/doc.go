// Package v1alpha1 is the faultline.io/v1alpha1 API: the cluster-scoped NodeFault
// custom resource, the controller's record of one fault on one node, and the
// cluster-scoped ProbeRun, a run of probe checks on nodes and its results.
//
// One NodeFault exists per active fault (a rule of a pack that fired on a node and
// asks for a taint or a probe). The controller creates and updates it; its status
// carries the phase, the evidence lines with their times and a link to the lines
// in Grafana, the probe verdicts and the decision history. The object lives in the
// API server, so it survives a leader change: a new leader resumes held faults from
// it. Only the controller's identity may write it (see controller/rbac); a node's
// kubelet can neither create nor change one.
//
// `kubectl get nodefaults` lists which nodes have faults and why;
// `kubectl describe nodefault NAME` shows the evidence. Resolved faults are kept
// for a retention period for post-mortems, then deleted by the controller.
//
// A ProbeRun is created by whoever may run probes (RBAC on proberuns; force needs
// proberuns/force too) and run by the leading controller, which writes its status.
//
// The CRDs (nodefaults.crd.yaml, proberuns.crd.yaml) are kept beside the types; a test installs it in a
// real API server and round-trips a fully populated object, so a field the schema
// does not know fails the build's tests instead of being pruned silently.
//
// +kubebuilder:object:generate=true
// +groupName=faultline.io
package v1alpha1

import (
	_ "embed"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of the API.
const (
	Group   = "faultline.io"
	Version = "v1alpha1"
)

// SchemeGroupVersion is faultline.io/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// Resource is the plural resource name of NodeFault; ProbeRunResource that of
// ProbeRun.
const (
	Resource         = "nodefaults"
	ProbeRunResource = "proberuns"
)

// NodeFaultCRDYAML and ProbeRunCRDYAML are the CustomResourceDefinitions of
// NodeFault and ProbeRun, as shipped in the chart and in manifests/.
var (
	//go:embed nodefaults.crd.yaml
	NodeFaultCRDYAML []byte
	//go:embed proberuns.crd.yaml
	ProbeRunCRDYAML []byte
)

// CRDYAML is every CustomResourceDefinition of the API, one YAML document each.
var CRDYAML = slices.Concat(NodeFaultCRDYAML, []byte("---\n"), ProbeRunCRDYAML)

var (
	// SchemeBuilder registers the API's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &NodeFault{}, &NodeFaultList{}, &ProbeRun{}, &ProbeRunList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
