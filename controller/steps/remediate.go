package steps

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
)

// The remediate step creates the object of the step's template (act.Remediator)
// for the remediation operator the cluster runs, owned by the fault's NodeFault so
// it goes with the record; one that exists already is the remediation under way.
func init() { Register("remediate", remediate) }

func remediate(ctx context.Context, d Deps, t Target) (Result, error) {
	f, nf, tmpl := t.Fault, t.Record, t.Step.Template
	if !d.Remediator.Has(tmpl) {
		return Result{}, fmt.Errorf("remediation template %q is not loaded", tmpl)
	}
	owner := &metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodeFault", Name: nf.Name, UID: nf.UID}
	obj, created, err := d.Remediator.Remediate(ctx, tmpl, act.TemplateData{Node: f.Node, Rule: f.Rule.ID, Pack: f.Rule.Pack,
		Fault: nf.Name, Namespace: d.Namespace}, owner)
	if err != nil {
		return Result{}, err
	}
	if !created {
		return Done("remediation " + obj + " already exists"), nil
	}
	return Done("created remediation " + obj + " from template " + tmpl), nil
}
