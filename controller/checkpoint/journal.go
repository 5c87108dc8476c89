package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// PlacingKey is the ConfigMap data key holding the taints being placed (JSON).
const PlacingKey = "placing.json"

// DefaultJournalBytes bounds the claims a Journal holds, well under a ConfigMap's
// 1 MiB beside the position it shares the object with.
const DefaultJournalBytes = 256 << 10

// ErrJournalFull is returned by Claim when the claims would not fit: the caller
// claims elsewhere (on the fault's record).
var ErrJournalFull = errors.New("checkpoint: placing journal full")

// Placing is a taint the leader may have put on a node and whose NodeFault record
// does not say so yet: claimed before the Node update, released once the record
// says it. A new leader reads what the old one left (see the act package).
type Placing struct {
	Node  string    `json:"node"`
	Pack  string    `json:"pack"`
	Rule  string    `json:"rule"`
	Taint string    `json:"taint"` // key=value:effect
	Time  time.Time `json:"time"`
}

// ID is the claim's pack/rule.
func (p Placing) ID() string { return p.Pack + "/" + p.Rule }

// size is about what p takes in the JSON written.
func (p Placing) size() int {
	return len(p.Node) + len(p.Pack) + len(p.Rule) + len(p.Taint) + 90
}

// Journal keeps the leader's claims in the checkpoint ConfigMap (PlacingKey), beside
// the position; SaveState keeps the key as it finds it. Claims made while a write is
// in flight go out together in the next one (group commit), so a burst of fences
// costs the API server a few writes instead of one record per node. Only the leader
// writes; its copy in memory is the truth during its term, Load replaces it at the
// start of the next.
type Journal struct {
	client    kubernetes.Interface
	namespace string
	name      string
	maxBytes  int

	loadMu  sync.Mutex // one ensureLoaded at a time
	mu      sync.Mutex
	byNode  map[string]map[string]Placing // node → pack/rule →
	bytes   int
	gen     uint64            // changes made
	written uint64            // the last change the ConfigMap holds
	cm      *corev1.ConfigMap // as last read or written; nil: read it first
	writing chan struct{}     // closed when the write in flight ends; nil when none
	changed func(p Placing, held bool)
	loaded  bool // by Load: a write before it would drop the last leader's claims
	// live are the claims made since Load that their claimer still holds (node/pack/rule):
	// a placement under way, whose books will release them. Left leaves them out.
	live map[string]bool
}

// NewJournal returns an empty Journal kept in the ConfigMap namespace/name.
// maxBytes (default DefaultJournalBytes) bounds what it holds.
func NewJournal(c kubernetes.Interface, namespace, name string, maxBytes int) *Journal {
	if maxBytes <= 0 {
		maxBytes = DefaultJournalBytes
	}
	return &Journal{client: c, namespace: namespace, name: name, maxBytes: maxBytes,
		byNode: map[string]map[string]Placing{}, live: map[string]bool{}}
}

// OnChange calls f for each claim added (held) or removed, Load's included. Set it
// before the Journal is used.
func (j *Journal) OnChange(f func(p Placing, held bool)) { j.changed = f }

// Load replaces the claims with those the ConfigMap holds (none when it is absent).
func (j *Journal) Load(ctx context.Context) error {
	cm, err := j.client.CoreV1().ConfigMaps(j.namespace).Get(ctx, j.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		j.mu.Lock()
		j.loaded = false
		j.mu.Unlock()
		return fmt.Errorf("load placing journal %s/%s: %w", j.namespace, j.name, err)
	}
	var ps []Placing
	if cm != nil && cm.Data[PlacingKey] != "" {
		if err := json.Unmarshal([]byte(cm.Data[PlacingKey]), &ps); err != nil {
			return fmt.Errorf("placing journal %s/%s: %s: %w", j.namespace, j.name, PlacingKey, err)
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, m := range j.byNode {
		for _, p := range m {
			j.dropLocked(p)
		}
	}
	for _, p := range ps {
		j.putLocked(p)
	}
	clear(j.live)
	j.cm = cm
	j.gen++
	j.written = j.gen
	j.loaded = true
	return nil
}

// Claim adds ps (replacing a node's claim of the same rule) and returns once the
// ConfigMap holds them. On an error they are taken back, except those held before.
func (j *Journal) Claim(ctx context.Context, ps ...Placing) error {
	if err := j.ensureLoaded(ctx); err != nil {
		return err
	}
	j.mu.Lock()
	grow := 0
	for _, p := range ps {
		grow += p.size()
		if old, ok := j.byNode[p.Node][p.ID()]; ok {
			grow -= old.size()
		}
	}
	if j.bytes+grow > j.maxBytes {
		j.mu.Unlock()
		return ErrJournalFull
	}
	before := make([]*Placing, len(ps))
	for i, p := range ps {
		if old, ok := j.byNode[p.Node][p.ID()]; ok {
			before[i] = &old
			j.dropLocked(old)
		}
		j.putLocked(p)
	}
	j.gen++
	gen := j.gen
	j.mu.Unlock()
	err := j.sync(ctx, gen)
	if err == nil {
		j.mu.Lock()
		for _, p := range ps {
			j.live[p.Node+"/"+p.ID()] = true
		}
		j.mu.Unlock()
	}
	if err != nil {
		j.mu.Lock()
		for i, p := range ps {
			if cur, ok := j.byNode[p.Node][p.ID()]; ok && cur == p {
				j.dropLocked(cur)
				if before[i] != nil {
					j.putLocked(*before[i])
				}
			}
		}
		j.gen++
		j.mu.Unlock()
	}
	return err
}

// ensureLoaded loads the ConfigMap's claims unless Load has: a write of the claims
// in memory alone would drop those the last leader left.
func (j *Journal) ensureLoaded(ctx context.Context) error {
	j.loadMu.Lock()
	defer j.loadMu.Unlock()
	j.mu.Lock()
	loaded := j.loaded
	j.mu.Unlock()
	if loaded {
		return nil
	}
	return j.Load(ctx)
}

// Release removes node's claims of the rules ids (pack/rule). It writes nothing:
// the next Claim or Flush carries it; a claim left in the ConfigMap meanwhile is
// one whose record already says Placed, which a reader checks.
func (j *Journal) Release(node string, ids ...string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, id := range ids {
		delete(j.live, node+"/"+id)
		if p, ok := j.byNode[node][id]; ok {
			j.dropLocked(p)
			j.gen++
		}
	}
}

// Abandon says that node's claims of the rules ids are no longer held by whoever
// made them (a fence that failed, books not written): Left returns them again.
func (j *Journal) Abandon(node string, ids ...string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, id := range ids {
		delete(j.live, node+"/"+id)
	}
}

// Flush writes the releases not yet written.
func (j *Journal) Flush(ctx context.Context) error {
	if err := j.ensureLoaded(ctx); err != nil {
		return err
	}
	j.mu.Lock()
	gen := j.gen
	j.mu.Unlock()
	return j.sync(ctx, gen)
}

// Of returns node's claims.
func (j *Journal) Of(node string) []Placing {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Placing, 0, len(j.byNode[node]))
	for _, p := range j.byNode[node] {
		out = append(out, p)
	}
	return out
}

// Left returns the claims no placement under way holds (the last leader's, and the
// abandoned ones), sorted by node and rule.
func (j *Journal) Left() []Placing {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.allLocked()
	return slices.DeleteFunc(out, func(p Placing) bool { return j.live[p.Node+"/"+p.ID()] })
}

func (j *Journal) allLocked() []Placing {
	var out []Placing
	for _, m := range j.byNode {
		for _, p := range m {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Node != out[b].Node {
			return out[a].Node < out[b].Node
		}
		return out[a].ID() < out[b].ID()
	})
	return out
}

func (j *Journal) putLocked(p Placing) {
	m := j.byNode[p.Node]
	if m == nil {
		m = map[string]Placing{}
		j.byNode[p.Node] = m
	}
	m[p.ID()] = p
	j.bytes += p.size()
	if j.changed != nil {
		j.changed(p, true)
	}
}

func (j *Journal) dropLocked(p Placing) {
	if delete(j.byNode[p.Node], p.ID()); len(j.byNode[p.Node]) == 0 {
		delete(j.byNode, p.Node)
	}
	j.bytes -= p.size()
	if j.changed != nil {
		j.changed(p, false)
	}
}

// sync returns once the ConfigMap holds change gen or a later one. One write is in
// flight at a time; whoever finds none starts the next, with every change made by
// then.
func (j *Journal) sync(ctx context.Context, gen uint64) error {
	for {
		j.mu.Lock()
		if !j.loaded {
			j.mu.Unlock()
			return fmt.Errorf("placing journal %s/%s: not loaded", j.namespace, j.name)
		}
		if j.written >= gen {
			j.mu.Unlock()
			return nil
		}
		if w := j.writing; w != nil {
			j.mu.Unlock()
			select {
			case <-w:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		w := make(chan struct{})
		j.writing = w
		g, cm := j.gen, j.cm
		data, err := json.Marshal(j.allLocked())
		j.mu.Unlock()
		if err == nil {
			cm, err = j.write(ctx, cm, string(data))
		}
		j.mu.Lock()
		j.writing = nil
		close(w)
		if err != nil {
			j.cm = nil
			j.mu.Unlock()
			return fmt.Errorf("write placing journal %s/%s: %w", j.namespace, j.name, err)
		}
		j.cm = cm
		if g > j.written {
			j.written = g
		}
		j.mu.Unlock()
	}
}

// write stores data under PlacingKey, on cm when it is current (one round trip),
// and returns the ConfigMap as written. The position's keys are kept as found.
func (j *Journal) write(ctx context.Context, cm *corev1.ConfigMap, data string) (*corev1.ConfigMap, error) {
	cms := j.client.CoreV1().ConfigMaps(j.namespace)
	var out *corev1.ConfigMap
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cm == nil {
			cur, err := cms.Get(ctx, j.name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				created, err := cms.Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: j.name, Namespace: j.namespace, Labels: labels},
					Data:       map[string]string{PlacingKey: data},
				}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return apierrors.NewConflict(corev1.Resource("configmaps"), j.name, err)
				}
				out = created
				return err
			case err != nil:
				return err
			}
			cm = cur
		}
		if cm.Data[PlacingKey] == data {
			out = cm
			return nil
		}
		next := cm.DeepCopy()
		if next.Data == nil {
			next.Data = map[string]string{}
		}
		next.Data[PlacingKey] = data
		updated, err := cms.Update(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			cm = nil // read again
			return err
		}
		out = updated
		return nil
	})
	return out, err
}
