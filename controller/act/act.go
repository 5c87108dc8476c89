// Package act applies the controller's decisions to Nodes through client-go: it taints
// a faulty node with the rule's taint, keeps which taints it placed in each fault's
// NodeFault record (status.taint), points to those records from the Node's
// annotation fault.AnnotationFaults, optionally sets the node condition
// fault.ConditionType, removes what it placed when a fault is cleared, and reports
// every decision as a Kubernetes Event.
//
// Reads come from a Node informer cache; writes are full-object updates guarded by
// the resourceVersion, retried on conflict with a fresh read from the API. Until the
// cache shows the Actor's own last write of a node, that node is read from the API,
// so a decision (in particular "nothing to do") never rests on a cache that misses
// it.
//
// faultline only ever removes or changes taints that a NodeFault record says it
// placed: a taint somebody else put on the node, even with a key a rule uses, is
// never touched, and nothing on the Node itself (which its kubelet may write) can
// claim one. The record says Placing before the Node update that adds a taint and
// Placed after it; CheckPlacing settles a Placing left by a crash against the Node.
package act

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
)

// Component is the default event source and field manager.
const Component = "faultline-controller"

// DefaultBackoff spaces the retries of a write that hit a conflict: up to 10
// attempts over about a second, each re-reading the Node from the API.
var DefaultBackoff = wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5}

// Options configure an Actor. The zero value acts without the condition. There is no
// dry-run here: dry-run is a decision (see decide.Config.DryRun), and a decision of
// the kind dry-run reaches no Actor method.
type Options struct {
	// Condition also sets the node condition fault.ConditionType: True (reason: the
	// rule id) while faults are recorded on the node, False once they are cleared.
	Condition bool
	// Component is the Events' source component and the writes' field manager
	// (default "faultline-controller").
	Component string
	// Instance is the Events' reporting instance, the controller's pod name
	// (default: the host name).
	Instance string
	// Events, when set, is the client Events are sent with (default: the Actor's
	// client). Given a rate limiter of its own, a burst's Events never wait in
	// front of its taints.
	Events kubernetes.Interface
	// Resync is the Node informer's resync period (default 0: none).
	Resync time.Duration
	// Records writes the taint bookkeeping to the NodeFault records (default: a
	// store whose owner is Instance).
	Records *nodefault.Store
	// Backoff of the conflict retries (default DefaultBackoff).
	Backoff wait.Backoff
	// Now is the clock of the condition's timestamps (default time.Now).
	Now func() time.Time
	// Eligible selects the nodes that make up the population of the budget and the
	// storm hold (the GPU nodes faultline watches; nil: every node). CPU nodes
	// beside them would otherwise inflate a percentage budget past the GPU fleet.
	Eligible labels.Selector
	// Shard, when set, restricts the Actor to one shard of the fleet: the Node
	// informer lists and watches only the nodes it selects (so memory follows the
	// shard, not the fleet), and the records of other nodes are left to their shard
	// (see shard.go). Nil: every node.
	Shard labels.Selector
	// TopologyLabels are the labels whose values the facts carry per eligible node
	// (decide.NodeFacts.Groups), for fleet correlation.
	TopologyLabels []string

	// nodeListPage is how many Nodes one list request asks for (default
	// defaultNodeListPage); tests make it small.
	nodeListPage int64
}

// ErrOptedOut is matched (errors.Is) by the error Taint returns for a node labelled
// fault.LabelOptOut=true.
var ErrOptedOut = errors.New("node opted out of faultline")

// ErrNotStarted is returned by the methods that need the cache before Start.
var ErrNotStarted = errors.New("act: Actor not started")

// OptedOutError says the node carries fault.LabelOptOut=true and was not tainted.
type OptedOutError struct {
	Node string
	Rule string // pack/rule
}

func (e *OptedOutError) Error() string {
	return fmt.Sprintf("node %s is labelled %s=true: %s not applied", e.Node, fault.LabelOptOut, e.Rule)
}

// Is makes errors.Is(err, ErrOptedOut) true.
func (e *OptedOutError) Is(target error) bool { return target == ErrOptedOut }

// Actor applies decisions to Nodes (taints, labels, conditions, drains, Events),
// reading them through its View. Create it with New, then Start it.
type Actor struct {
	*View
	*events
	lanes   *lanes           // the Events' broadcasters
	records *nodefault.Store // writes and planning reads of the records
	writer  nodeWriter       // the Node writes

	// beforeWrite, when set (by tests), runs just before each Node write.
	beforeWrite func(node string, attempt int)
}

// View is what the Actor knows of the fleet, from informers: the Nodes, the
// NodeFault records, the facts index the decide stage reads, the shard's nodes. It
// reads the API only for a node the cache does not have yet or may show from before
// the Actor's own last write.
type View struct {
	client  kubernetes.Interface
	opts    Options
	nodeInf cache.SharedIndexInformer
	nodeRun sync.WaitGroup // the Node informer's run
	nodes   NodeCache
	synced  cache.InformerSynced
	faults  *nodefault.Cache // the records, for facts and listings

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	// written holds, per node, the resourceVersion of the Actor's last write until
	// the cache has caught up with it: until then reads of that node go to the API,
	// so no decision rests on a cache that misses the Actor's own change.
	written map[string]pendingWrite
	// fencing counts, per node, the taint placements under way (PlaceTaint).
	fencing map[string]int

	// index keeps the decide stage's facts from the informers' events; indexed
	// say when it has the initial lists.
	index   *FactIndex
	indexed []cache.InformerSynced
}

// New builds an Actor on client: a Node informer (reads come from its cache) and an
// Event recorder sinking to the API. Nothing runs until Start.
func New(client kubernetes.Interface, opts Options) (*Actor, error) {
	if client == nil {
		return nil, errors.New("act: nil client")
	}
	if opts.Component == "" {
		opts.Component = Component
	}
	if opts.Instance == "" {
		opts.Instance, _ = os.Hostname()
	}
	if opts.Records == nil {
		st, err := nodefault.New(client, nodefault.Options{Owner: opts.Instance})
		if err != nil {
			return nil, err
		}
		opts.Records = st
	}
	faults, err := nodefault.NewCache(client, opts.Resync)
	if err != nil {
		return nil, fmt.Errorf("act: %w", err)
	}
	// Records are read from this cache where it shows the Store's own writes: a
	// burst of new faults reads none from the API server.
	opts.Records.UseCache(faults)
	if opts.Backoff.Steps <= 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Eligible == nil {
		opts.Eligible = labels.Everything()
	}
	ni, err := newNodeInformer(client, opts)
	if err != nil {
		return nil, err
	}
	a := &Actor{View: &View{
		client:  client,
		opts:    opts,
		nodeInf: ni,
		nodes:   NodeCache{store: ni.GetStore()},
		synced:  ni.HasSynced,
		written: map[string]pendingWrite{}, fencing: map[string]int{},
		faults: faults,
		index:  NewFactIndex(opts.Eligible, opts.TopologyLabels),
	}, records: opts.Records}
	a.writer = nodeWriter{client: client, fieldManager: opts.Component, note: a.noteWrite}
	// The informers' events keep the facts indexed: a decision reads them without a
	// pass over the fleet.
	// Start waits until both handlers have been handed the initial lists, so that
	// the facts are complete from the first decision on.
	recs, err := faults.AddEventHandler(a.index.recordHandler())
	if err != nil {
		return nil, fmt.Errorf("act: record informer: %w", err)
	}
	nodes, err := ni.AddEventHandler(a.index.nodeHandler())
	if err != nil {
		return nil, fmt.Errorf("act: node informer: %w", err)
	}
	a.indexed = []cache.InformerSynced{recs.HasSynced, nodes.HasSynced}
	a.lanes = newLanes(corev1.EventSource{Component: opts.Component, Host: opts.Instance})
	a.events = &events{view: a.View, records: a.records, recorder: a.lanes}
	return a, nil
}

// Start starts the informers and the Event sink and waits until the caches have
// synced and the facts index has their initial lists. Everything stops when ctx is
// done or Shutdown is called.
func (a *Actor) Start(ctx context.Context) error {
	ctx, err := a.View.start(ctx)
	if err != nil {
		return err
	}
	events := a.opts.Events
	if events == nil {
		events = a.client
	}
	a.lanes.start(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		a.lanes.shutdown()
	}()
	return a.View.sync(ctx)
}

// Shutdown stops the informers and the Event sink (Events still queued are dropped).
func (a *Actor) Shutdown() {
	if a.View.shutdown() {
		a.lanes.shutdown()
	}
}

// start runs the informers until the returned context (derived from ctx) ends.
func (v *View) start(ctx context.Context) (context.Context, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.started {
		return nil, errors.New("act: Actor already started")
	}
	ctx, v.cancel = context.WithCancel(ctx)
	v.started = true
	v.nodeRun.Add(1)
	go func() {
		defer v.nodeRun.Done()
		v.nodeInf.Run(ctx.Done())
	}()
	go v.faults.Run(ctx.Done())
	return ctx, nil
}

// sync waits until the caches have synced and the facts index has their initial
// lists.
func (v *View) sync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), append([]cache.InformerSynced{v.synced, v.faults.HasSynced}, v.indexed...)...) {
		return fmt.Errorf("act: node and NodeFault caches did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// shutdown stops the informers; false when they never started.
func (v *View) shutdown() bool {
	v.mu.Lock()
	cancel := v.cancel
	v.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel()
	v.nodeRun.Wait()
	return true
}

func (v *View) ready() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.started {
		return ErrNotStarted
	}
	return nil
}

// Nodes is the View's Node cache.
func (v *View) Nodes() NodeCache { return v.nodes }

// cachedNode returns the Node from the cache (what it keeps of it, see cachedNode),
// or from the API when the cache does not have it (yet). The result is the caller's
// own.
func (v *View) cachedNode(ctx context.Context, name string) (*corev1.Node, error) {
	if err := v.ready(); err != nil {
		return nil, err
	}
	n, err := v.nodes.Get(name)
	if err == nil {
		return n, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	return v.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// pendingWriteTTL bounds how long a node is read from the API after a write the
// cache has not shown (it may never show that exact version if another write
// followed before the watch delivered it).
const pendingWriteTTL = 30 * time.Second

type pendingWrite struct {
	rv string
	at time.Time
}

// noteWrite records the Actor's write of n.
func (v *View) noteWrite(n *corev1.Node) {
	if n == nil {
		return
	}
	v.mu.Lock()
	v.written[n.Name] = pendingWrite{rv: n.ResourceVersion, at: time.Now()}
	v.mu.Unlock()
}

// fence notes a taint placement on node under way until done is called.
func (v *View) fence(node string) (done func()) {
	v.mu.Lock()
	v.fencing[node]++
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.fencing[node]--; v.fencing[node] <= 0 {
			delete(v.fencing, node)
		}
	}
}

// Settled reports whether the cache shows node as the Actor last left it: no taint
// placement under way there and no write of the Actor the cache has not shown yet.
// Until then facts from the cache may lack a taint placed just now, so a caller
// must not take its absence for a removal.
func (v *View) Settled(ctx context.Context, node string) bool {
	v.mu.Lock()
	busy := v.fencing[node] > 0
	v.mu.Unlock()
	if busy {
		return false
	}
	n, err := v.cachedNode(ctx, node)
	if err != nil {
		return apierrors.IsNotFound(err) // gone: nothing of the Actor's to show
	}
	return !v.cacheBehind(node, n.ResourceVersion)
}

// cacheBehind reports whether the cached version rv of node may predate the
// Actor's last write of it.
func (v *View) cacheBehind(node, rv string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.written[node]
	if !ok {
		return false
	}
	if w.rv == rv || time.Since(w.at) > pendingWriteTTL {
		delete(v.written, node)
		return false
	}
	return true
}

// OptedOut reports whether a node carries fault.LabelOptOut=true.
func OptedOut(n *corev1.Node) bool { return optedOut(n.Labels) }

func optedOut(l map[string]string) bool { return strings.EqualFold(l[fault.LabelOptOut], "true") }

// NodeFaults is one node's faults with a taint entry: their NodeFault records,
// sorted by pack/rule.
type NodeFaults struct {
	Node     string
	OptedOut bool
	Faults   []*v1alpha1.NodeFault
}

// ListActive returns every node with faults recorded on it (a taint entry in their
// NodeFault records), sorted by node name, from the caches.
func (v *View) ListActive() ([]NodeFaults, error) {
	if err := v.ready(); err != nil {
		return nil, err
	}
	byNode := map[string][]*v1alpha1.NodeFault{}
	for _, nf := range v.ownedFaults() {
		if nf.Status.Taint != nil {
			byNode[nf.Spec.Node] = append(byNode[nf.Spec.Node], nf)
		}
	}
	out := make([]NodeFaults, 0, len(byNode))
	for node, recs := range byNode {
		sort.Slice(recs, func(i, j int) bool { return recs[i].PackRule() < recs[j].PackRule() })
		nf := NodeFaults{Node: node, Faults: recs}
		if c, ok := v.nodes.get(node); ok {
			nf.OptedOut = c.optedOut()
		}
		out = append(out, nf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// BootID returns node.status.nodeInfo.bootID (from the cache), for recover: reboot.
func (v *View) BootID(node string) (string, error) {
	if err := v.ready(); err != nil {
		return "", err
	}
	c, ok := v.nodes.get(node)
	if !ok {
		return "", apierrors.NewNotFound(corev1.Resource("node"), node)
	}
	return c.bootID, nil
}

// Facts reads the fleet's state for the decide stage from the index the informers
// keep: no pass over the fleet. The facts' maps are shared: callers only read them.
// Safe to call from several goroutines.
func (v *View) Facts() (decide.NodeFacts, error) {
	if err := v.ready(); err != nil {
		return decide.NodeFacts{}, err
	}
	return v.index.Facts(), nil
}
