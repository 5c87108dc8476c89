package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/faultline-dev/faultline/test/eventually"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates each CustomResourceDefinition in docs (YAML, one document
// each, as v1alpha1.CRDYAML holds them) in the API server, or leaves an existing
// one of that name, and waits until it is established.
func (e *Env) InstallCRD(t TB, docs []byte) {
	t.Helper()
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(docs)))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("testenv: CRD: %v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || bytes.Equal(bytes.TrimSpace(doc), []byte("---")) {
			continue
		}
		e.installCRD(t, doc)
	}
}

func (e *Env) installCRD(t TB, doc []byte) {
	t.Helper()
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
		t.Fatalf("testenv: CRD: %v", err)
	}
	if obj.Object == nil {
		return
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
