package proberun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ErrNoAgent: no probe agent runs (Running and Ready) on the node.
var ErrNoAgent = errors.New("no probe agent")

// nodeIndex indexes agent pods by the node they run on.
const nodeIndex = "spec.nodeName"

// syncTimeout bounds how long the first call waits for the pod cache.
const syncTimeout = 30 * time.Second

// AgentPods finds a node's agent among the pods of the agent DaemonSet: an informer
// on the pods of one namespace that match a label selector. A node's endpoint is
// https://<pod IP>:<port> of its Running and Ready agent pod, so the controller calls
// only nodes that run the agent, and only at an address the apiserver gave that pod
// (with the chart's host network, the node's address): never one taken from a log
// line or a request.
type AgentPods struct {
	indexer cache.Indexer
	synced  cache.InformerSynced
	factory informers.SharedInformerFactory
	port    int
}

// NewAgentPods watches the pods in namespace that match selector; call Start.
func NewAgentPods(client kubernetes.Interface, namespace, selector string, port int) (*AgentPods, error) {
	if _, err := labels.Parse(selector); err != nil || selector == "" {
		return nil, fmt.Errorf("agent pod selector %q: want a non-empty label selector (%v)", selector, err)
	}
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("agent port %d", port)
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods().Informer()
	// Only what Endpoint reads is kept: one pod per GPU node adds up in a large fleet.
	if err := inf.SetTransform(slimPod); err != nil {
		return nil, err
	}
	if err := inf.AddIndexers(cache.Indexers{nodeIndex: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{p.Spec.NodeName}, nil
	}}); err != nil {
		return nil, err
	}
	return &AgentPods{indexer: inf.GetIndexer(), synced: inf.HasSynced, factory: f, port: port}, nil
}

// slimPod drops what Endpoint does not read.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP,
			Conditions: append([]corev1.PodCondition(nil), p.Status.Conditions...)},
	}, nil
}

// Start starts the informer; it stops with ctx.
func (a *AgentPods) Start(ctx context.Context) { a.factory.Start(ctx.Done()) }

// Endpoint implements Resolver: the URL of the node's Running and Ready agent pod
// (the newest, during a rollout), or an error wrapping ErrNoAgent.
func (a *AgentPods) Endpoint(ctx context.Context, node string) (string, error) {
	if !a.synced() {
		wctx, cancel := context.WithTimeout(ctx, syncTimeout)
		defer cancel()
		if !cache.WaitForCacheSync(wctx.Done(), a.synced) {
			return "", fmt.Errorf("probe agent pods: cache not synced: %w", context.Cause(wctx))
		}
	}
	objs, err := a.indexer.ByIndex(nodeIndex, node)
	if err != nil {
		return "", err
	}
	var best *corev1.Pod
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if !serving(p) {
			continue
		}
		if best == nil || p.CreationTimestamp.After(best.CreationTimestamp.Time) {
			best = p
		}
	}
	if best == nil {
		return "", fmt.Errorf("%w on node %s: no Running and Ready agent pod there (%d not serving)", ErrNoAgent, node, len(objs))
	}
	return "https://" + net.JoinHostPort(best.Status.PodIP, strconv.Itoa(a.port)), nil
}

func serving(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || net.ParseIP(p.Status.PodIP) == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
