// Package stepspec describes the remediation steps of the rules' escalation ladders
// (a rule's escalate: drain, service, ...) for the readers that must not carry them
// out: the pack validator (rules), the brakes (controller/decide), the RBAC proofs
// (controller/rbac) and the chart's tests. It depends on the standard library only,
// so the pack language stays free of Kubernetes client code; each step's Do lives
// beside it, under the same name, in controller/steps.
package stepspec

import (
	"fmt"
	"regexp"
	"slices"
)

// Spec is what a step is, apart from how it is carried out.
type Spec struct {
	// Name is the step's action as written in packs.
	Name string
	// Help says what the step does, in a line.
	Help string
	// TakesCapacity: the step takes capacity away from the cluster, so it passes
	// the brakes of a taint (opt-out, storm hold, rule and global budgets).
	TakesCapacity bool
	// EvictsPods: the step moves the node's pods away and leaves it to the rule's
	// taint to keep them away, so the taint must be NoSchedule or NoExecute.
	EvictsPods bool
	// Params are the step's parameters (keys of the step in a pack beside action
	// and its trigger); a key no spec takes is an error.
	Params []Param
	// Access lists the Kubernetes API permissions the step's Do uses, beyond the
	// ones every fault needs (its NodeFault, its Events). The controller's
	// ClusterRole must grant each; controller/rbac proves each needed.
	Access []Access
}

// Param is one parameter of a step.
type Param struct {
	Name     string
	Required bool
	// Pattern, when set, is what a value must match.
	Pattern *regexp.Regexp
	// Help says what the value is (messages quote it).
	Help string
}

// Access is a permission a step needs: verbs on a resource (with its
// subresource, "pods/eviction") of an API group ("" for the core group). A
// namespaced resource is needed in every namespace: a node's pods run anywhere.
type Access struct {
	Group    string
	Resource string
	Verbs    []string
	// Why says which call of the step needs it.
	Why string
}

// The names of the steps the controller special-cases.
const (
	// Taint places the rule's taint: a ladder that starts below a taint (a probe)
	// climbs to it, and decide counts it as the taint itself.
	Taint = "taint"
)

// templateRe: a remediation template's name, a file name without .yaml.
var templateRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9._]{0,61}[a-z0-9])?$`)

// specs are the steps, in the order packs' documentation lists them.
var specs = []Spec{
	{
		Name: Taint, Help: "places the rule's taint", TakesCapacity: true,
		Access: []Access{{Resource: "nodes", Verbs: []string{"patch"}, Why: "the taint is written with a merge patch of the Node"}},
	},
	{
		Name: "drain", Help: "evicts the node's pods through the Eviction API (PodDisruptionBudgets hold)", TakesCapacity: true, EvictsPods: true,
		Access: []Access{
			{Resource: "pods", Verbs: []string{"get", "list"}, Why: "the drain helper lists the node's pods and reads evicted ones back until they are gone"},
			{Resource: "pods/eviction", Verbs: []string{"create"}, Why: "the drain helper evicts a pod"},
			{Group: "apps", Resource: "daemonsets", Verbs: []string{"get"}, Why: "a DaemonSet's pods are left once their DaemonSet is found"},
			{Group: "policy", Resource: "poddisruptionbudgets", Verbs: []string{"list"}, Why: "a blocked drain names the budget that blocks it"},
		},
	},
	{
		// Its RBAC is the remediation operator's kind, granted per template by the
		// operator (docs/controller.md), not the controller's ClusterRole.
		Name: "remediate", Help: "creates an object from a remediation template, for the cluster's remediation operator", TakesCapacity: true,
		Params: []Param{{Name: "template", Required: true, Pattern: templateRe, Help: "the name of a remediation template"}},
	},
	{
		Name: "service", Help: "labels the node and sets a Node condition for the hardware team",
		Access: []Access{
			{Resource: "nodes", Verbs: []string{"patch"}, Why: "the faultline.io/service label is written with a merge patch of the Node"},
			{Resource: "nodes/status", Verbs: []string{"patch"}, Why: "the FaultlineService condition"},
		},
	},
	{
		// Through the node's probe agent, whose API the probe-runner role grants
		// (active-probes/agent/rbac): no Kubernetes API call of its own.
		Name: "gpu-reset", Help: "resets an idle GPU through the node's probe agent and runs the confirming probes again", TakesCapacity: true,
	},
}

// All returns the specs, in the order of the documentation.
func All() []Spec { return slices.Clone(specs) }

// Get returns the spec of the step named name.
func Get(name string) (Spec, bool) {
	for _, s := range specs {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// Names returns the steps' names, in the order of the documentation.
func Names() []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// Param returns the parameter of s named name.
func (s Spec) Param(name string) (Param, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Check says what is wrong with a value of p ("" when nothing).
func (p Param) Check(v string) string {
	if p.Pattern != nil && !p.Pattern.MatchString(v) {
		return fmt.Sprintf("%s %q is not valid (%s)", p.Name, v, p.Help)
	}
	return ""
}
