package testenv

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/test/eventually"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates the CustomResourceDefinition in doc (YAML) in the API server,
// or leaves an existing one of that name, and waits until it is established.
func (e *Env) InstallCRD(t TB, doc []byte) {
	t.Helper()
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
		t.Fatalf("testenv: CRD: %v", err)
	}
	dyn, err := dynamic.NewForConfig(e.RESTConfig())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crds := dyn.Resource(crdResource)
	if _, err := crds.Create(ctx, &obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("testenv: create CRD %s: %v", obj.GetName(), err)
	}
	eventually.NoError(t, time.Minute, "CRD "+obj.GetName()+" established", func() error {
		got, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("not established: %v", conds)
	})
}
