// Package podfilter limits the pod logs the exporter ships to pods whose labels
// match a selector, answered from a watch of this node's pods.
package podfilter

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Labels returns a function telling whether the pod namespace/name with uid runs on
// node and matches selector (Kubernetes label selector syntax, e.g. "team=ml,job").
// It watches only this node's pods. Pods not (yet) known are refused; the caller
// asks again later.
func Labels(ctx context.Context, client kubernetes.Interface, node, selector string) (func(namespace, pod, uid string) bool, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("pod label selector %q: %w", selector, err)
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	pods := f.Core().V1().Pods()
	lister := pods.Lister()
	inf := pods.Informer()
	f.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("pod label selector: pods of node %s not listed within a minute", node)
	}
	return func(namespace, pod, uid string) bool {
		p, err := lister.Pods(namespace).Get(pod)
		if err != nil {
			return false
		}
		return (uid == "" || p.UID == types.UID(uid)) && sel.Matches(labels.Set(p.Labels))
	}, nil
}
