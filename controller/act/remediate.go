package act

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// LabelFault labels each remediation object with the NodeFault it was made for, so
// it is found again and never created twice.
const LabelFault = "faultline.io/fault"

// maxTemplate bounds a remediation template file.
const maxTemplate = 64 << 10

// TemplateData is what a remediation template's placeholders see: {{.Node}},
// {{.Rule}}, {{.Pack}}, {{.Fault}} (the NodeFault's name), {{.Namespace}}.
type TemplateData struct {
	Node, Rule, Pack, Fault, Namespace string
}

// Remediator creates remediation objects from templates, for the remediation
// operator the cluster runs (medik8s self-node-remediation, machine deletion,
// metal3, ...): the remediate step hands the node to it, NodeHealthCheck style.
// The objects' kinds are the operator's; so is the RBAC to create them, which the
// controller's service account must be granted for each template's kind.
type Remediator struct {
	dyn       dynamic.Interface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	templates map[string]*template.Template
	namespace string
}

// NewRemediator reads the templates (one object per file, name.yaml → template
// "name") from dir; namespace is where namespaced objects without one go.
func NewRemediator(dyn dynamic.Interface, disc discovery.DiscoveryInterface, dir, namespace string) (*Remediator, error) {
	r := &Remediator{dyn: dyn, namespace: namespace, templates: map[string]*template.Template{},
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}
	if dir == "" {
		return r, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		if fi.Size() > maxTemplate {
			return nil, fmt.Errorf("remediation template %s: %d bytes, at most %d", f, fi.Size(), maxTemplate)
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t, err := template.New(name).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("remediation template %s: %w", f, err)
		}
		r.templates[name] = t
	}
	return r, nil
}

// Has reports whether the template name is loaded.
func (r *Remediator) Has(name string) bool { return r != nil && r.templates[name] != nil }

// Remediate creates the object of template name for d, unless one labelled with
// d.Fault exists already (then it returns that one's name and created false).
// owner, when set, becomes the object's owner (the NodeFault), so the object goes
// when the record is collected.
func (r *Remediator) Remediate(ctx context.Context, name string, d TemplateData, owner *metav1.OwnerReference) (obj string, created bool, err error) {
	t := r.templates[name]
	if t == nil {
		return "", false, fmt.Errorf("remediation template %q is not loaded", name)
	}
	if d.Namespace == "" {
		d.Namespace = r.namespace
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", false, fmt.Errorf("remediation template %s: %w", name, err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b.Bytes(), &u.Object); err != nil {
		return "", false, fmt.Errorf("remediation template %s: %w", name, err)
	}
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return "", false, fmt.Errorf("remediation template %s: apiVersion and kind must be set", name)
	}
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		r.mapper.Reset() // a CRD installed since the last discovery
		m, err = r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return "", false, fmt.Errorf("remediation template %s: %s: %w", name, gvk, err)
	}
	var ri dynamic.ResourceInterface = r.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(d.Namespace)
		}
		ri = r.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	sel := LabelFault + "=" + labelValue(d.Fault)
	existing, err := ri.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", false, fmt.Errorf("remediation %s: list %s: %w", name, m.Resource.Resource, err)
	}
	if len(existing.Items) > 0 {
		return existing.Items[0].GetName(), false, nil
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelFault] = labelValue(d.Fault)
	u.SetLabels(labels)
	if owner != nil {
		u.SetOwnerReferences(append(u.GetOwnerReferences(), *owner))
	}
	if u.GetName() == "" && u.GetGenerateName() == "" {
		u.SetName(d.Node)
	}
	out, err := ri.Create(ctx, u, metav1.CreateOptions{FieldManager: Component})
	if apierrors.IsAlreadyExists(err) {
		// The operator's convention (one object per node, named after it) met an
		// object made for an earlier fault: that remediation is under way.
		return u.GetName(), false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("remediation %s: create %s: %w", name, m.Resource.Resource, err)
	}
	return out.GetName(), true, nil
}

// labelValue cuts a name to a label value's 63 characters.
func labelValue(s string) string {
	if len(s) <= 63 {
		return s
	}
	return strings.Trim(s[:63], ".-_")
}
