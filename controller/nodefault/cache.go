package nodefault

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/faultline-dev/faultline/api/v1alpha1"
)

// byNode indexes the cache by spec.node.
const byNode = "node"

// Cache is an informer over every NodeFault: the records as the API server last
// sent them, indexed by node. Create it with NewCache, run it with Run.
type Cache struct {
	inf cache.SharedIndexInformer
}

// NewCache builds the informer on client's connection (its transport, credentials
// and rate limiter), with a REST client of the faultline.io/v1alpha1 group.
func NewCache(client kubernetes.Interface, resync time.Duration) (*Cache, error) {
	rc, err := v1alpha1.NewRESTClient(client)
	if err != nil {
		return nil, err
	}
	lw := cache.NewListWatchFromClient(rc, v1alpha1.Resource, metav1.NamespaceAll, fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &v1alpha1.NodeFault{}, resync, cache.Indexers{
		byNode: func(obj any) ([]string, error) {
			if nf, ok := obj.(*v1alpha1.NodeFault); ok {
				return []string{nf.Spec.Node}, nil
			}
			return nil, nil
		},
	})
	// A record created placing reads as one (see AnnotationPlacing) here as from the
	// Store's own reads.
	if err := inf.SetTransform(func(obj any) (any, error) {
		if nf, ok := obj.(*v1alpha1.NodeFault); ok {
			readPlacing(nf)
		}
		return obj, nil
	}); err != nil {
		return nil, fmt.Errorf("nodefault: informer: %w", err)
	}
	return &Cache{inf: inf}, nil
}

// Run runs the informer until stop is closed.
func (c *Cache) Run(stop <-chan struct{}) { c.inf.Run(stop) }

// HasSynced reports whether the first list has been delivered.
func (c *Cache) HasSynced() bool { return c.inf.HasSynced() }

// AddEventHandler registers h for every add, update and delete of a NodeFault; the
// registration's HasSynced says when h has been handed the initial list.
func (c *Cache) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return c.inf.AddEventHandler(h)
}

// ForNode returns the cached records of node. They are shared: do not modify them.
func (c *Cache) ForNode(node string) []*v1alpha1.NodeFault {
	objs, _ := c.inf.GetIndexer().ByIndex(byNode, node)
	return toNodeFaults(objs)
}

// get returns the cached record name (shared: do not modify it).
func (c *Cache) get(name string) (*v1alpha1.NodeFault, bool) {
	o, ok, _ := c.inf.GetStore().GetByKey(name) // cluster-scoped: the key is the name
	nf, _ := o.(*v1alpha1.NodeFault)
	return nf, ok && nf != nil
}

// List returns every cached record. They are shared: do not modify them.
func (c *Cache) List() []*v1alpha1.NodeFault { return toNodeFaults(c.inf.GetStore().List()) }

func toNodeFaults(objs []any) []*v1alpha1.NodeFault {
	out := make([]*v1alpha1.NodeFault, 0, len(objs))
	for _, o := range objs {
		if nf, ok := o.(*v1alpha1.NodeFault); ok {
			out = append(out, nf)
		}
	}
	return out
}
