// Package nodefault keeps the controller's record of each fault as a NodeFault
// object (faultline.io/v1alpha1, cluster-scoped): created when a rule that asks for
// a taint or a probe fires on a node, updated with every decision, probe verdict and
// firing, marked Resolved when the fault is over, and deleted a retention period
// later. The record lives in the API server, so it outlives the leader that wrote it.
package nodefault

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/lokisource"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// Defaults of Options.
const (
	DefaultRetention    = 7 * 24 * time.Hour
	DefaultMaxLines     = 10
	DefaultMaxLineBytes = 1024
	DefaultOwner        = "faultline"
	DefaultRefresh      = 30 * time.Second
	// maxHistory and maxProbes bound the status lists (the CRD's MaxItems is higher).
	maxHistory = 20
	maxProbes  = 10
	maxFirings = decide.MaxFirings
	maxMessage = 1024
)

// Options configure a Store.
type Options struct {
	// Owner is the identity written to status.owner (the controller's pod name;
	// default DefaultOwner).
	Owner string
	// Retention is how long a Resolved NodeFault is kept (default 7 days).
	Retention time.Duration
	// MaxLines and MaxLineBytes bound the evidence (defaults 10 and 1024): the
	// first MaxLines/2 lines recorded and the newest are kept.
	MaxLines, MaxLineBytes int
	// GrafanaURL, when set, gives each record a link to its query in Grafana Explore.
	GrafanaURL string
	// Datasource is the Loki datasource's uid in Grafana (default "loki").
	Datasource string
	// NodeLabel is the label (or structured metadata) that holds the node name in
	// Loki (default logstream.LabelNode).
	NodeLabel string
	// Refresh is how often a record is written again in the phase it has, with
	// fresh evidence (default 30s; see Store.Due).
	Refresh time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Refused counts the writes refused for a phase transition outside
	// Transitions, by from, to and cause (nil: not counted).
	Refused *prometheus.CounterVec
	// Log logs them (default slog.Default()).
	Log *slog.Logger
	// Workloads, when set, lists the pods a fault touched in its record (see
	// Workloads).
	Workloads Workloads
}

// Store reads and writes NodeFault objects through the Kubernetes REST client.
type Store struct {
	rc     rest.Interface
	opts   Options
	rt     readThrough
	recent recent
}

// New returns a Store on client.
func New(client kubernetes.Interface, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("nodefault: nil client")
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.MaxLines <= 0 {
		opts.MaxLines = DefaultMaxLines
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.Datasource == "" {
		opts.Datasource = "loki"
	}
	if opts.NodeLabel == "" {
		opts.NodeLabel = logstream.LabelNode
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Owner == "" {
		opts.Owner = DefaultOwner // a written status always names one (see statusUnwritten)
	}
	// The core REST client reaches any path of the API server; AbsPath points it at
	// the faultline.io group.
	return &Store{rc: client.CoreV1().RESTClient(), opts: opts}, nil
}

// Name is the name of the NodeFault of a rule of pack on node: "node.pack.rule"
// when that is a valid object name, else a cut and sanitised form of it with a hash
// of the three parts, so distinct faults never share a name.
func Name(node, pack, rule string) string {
	key := fault.Key(node, pack, rule)
	plain := node + "." + pack + "." + rule
	var b strings.Builder
	for _, r := range strings.ToLower(plain) {
		if r < utf8.RuneSelf && (r == '.' || r == '-' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9')) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := b.String()
	if name == plain && len(name) <= 253 && validEnds(name) {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	if len(name) > 253-len(suffix) {
		name = name[:253-len(suffix)]
	}
	name = strings.Trim(name, ".-")
	return name + suffix
}

func validEnds(s string) bool {
	alnum := func(c byte) bool { return ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') }
	return s != "" && alnum(s[0]) && alnum(s[len(s)-1]) && !strings.Contains(s, "..")
}

func (s *Store) path(name string) string {
	p := "/apis/" + v1alpha1.Group + "/" + v1alpha1.Version + "/" + v1alpha1.Resource
	if name != "" {
		p += "/" + name
	}
	return p
}

func (s *Store) do(ctx context.Context, verb, path string, body any, into any, params ...string) error {
	req := s.rc.Verb(verb).AbsPath(path).SetHeader("Accept", "application/json")
	for i := 0; i+1 < len(params); i += 2 {
		req = req.Param(params[i], params[i+1])
	}
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		req = req.SetHeader("Content-Type", "application/json").Body(raw)
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		return err
	}
	if into != nil {
		if err := json.Unmarshal(raw, into); err != nil {
			return fmt.Errorf("nodefault: decode %s: %w", path, err)
		}
	}
	return nil
}

// Get returns the NodeFault name.
func (s *Store) Get(ctx context.Context, name string) (*v1alpha1.NodeFault, error) {
	var nf v1alpha1.NodeFault
	if err := s.do(ctx, "GET", s.path(name), nil, &nf); err != nil {
		return nil, err
	}
	readPlacing(&nf)
	return &nf, nil
}

// List returns every NodeFault.
func (s *Store) List(ctx context.Context) ([]v1alpha1.NodeFault, error) {
	var l v1alpha1.NodeFaultList
	if err := s.do(ctx, "GET", s.path(""), nil, &l); err != nil {
		return nil, fmt.Errorf("nodefault: list: %w", err)
	}
	for i := range l.Items {
		readPlacing(&l.Items[i])
	}
	return l.Items, nil
}

// ForNode returns the NodeFaults of node: the records a Node write is planned on.
// They come from the cache (UseCache), with the Store's own last writes of them that
// the cache has not shown yet (see view); from the API server when fresh, and where
// the cache shows another writer's version of one.
func (s *Store) ForNode(ctx context.Context, node string, fresh bool) ([]v1alpha1.NodeFault, error) {
	if !fresh {
		if c, own, ok := s.view(node); ok {
			cached := c.ForNode(node)
			out := make([]v1alpha1.NodeFault, 0, len(cached)+len(own))
			for _, nf := range cached {
				if own[nf.Name] == nil {
					out = append(out, *nf.DeepCopy())
				}
			}
			for _, w := range own {
				if !w.deleted {
					out = append(out, *w.obj.DeepCopy())
				}
			}
			return out, nil
		}
	}
	var l v1alpha1.NodeFaultList
	if err := s.do(ctx, "GET", s.path(""), nil, &l, "labelSelector", LabelNode+"="+labelValue(node)); err != nil {
		return nil, fmt.Errorf("nodefault: list %s's: %w", node, err)
	}
	out := l.Items[:0]
	for _, nf := range l.Items {
		if nf.Spec.Node == node { // the label is cut to 63 characters
			readPlacing(&nf)
			out = append(out, nf)
		}
	}
	return out, nil
}

// Kind is the NodeFault's kind.
const Kind = "NodeFault"

// LabelNode labels each NodeFault with its node (cut to a label value's 63
// characters), for a selective list.
const LabelNode = "faultline.io/node"

// AnnotationPlacing, on a record whose status no controller has written yet, says
// the record was created to place its taint (the annotation's value,
// key=value:effect): it reads as status.taint Placing, dated at the record's
// creation. A create cannot write the status (the status subresource ignores it),
// so without it a new fault's taint would cost a status write before the Node update
// as well as after. Only an identity that may create NodeFaults (the controller's)
// can set it, and once a status is written the status alone counts.
const AnnotationPlacing = "faultline.io/placing"

// readPlacing gives a record created placing (see AnnotationPlacing) the taint
// entry its annotation stands for. Every record read or created passes through it
// (the informer as a transform), so that no reader sees the two forms.
func readPlacing(nf *v1alpha1.NodeFault) {
	taint, ok := nf.Annotations[AnnotationPlacing]
	if !ok || taint == "" || !statusUnwritten(&nf.Status) {
		return
	}
	nf.Status.Taint = &v1alpha1.TaintRecord{Taint: taint, State: v1alpha1.TaintPlacing, Time: nf.CreationTimestamp}
}

// statusUnwritten reports whether no Store has written st: every status write sets
// the owner (New makes sure there is one).
func statusUnwritten(st *v1alpha1.NodeFaultStatus) bool {
	return st.Owner == "" && st.Phase == "" && st.Taint == nil && len(st.History) == 0
}

// placingOnly reports whether c only marks a taint Placing (with the rule for the
// spec of a record it creates): the change a create can carry as AnnotationPlacing.
func placingOnly(c Change) bool {
	if c.Taint == nil || c.Taint.State != v1alpha1.TaintPlacing || c.Taint.Taint == "" {
		return false
	}
	c.Taint = nil
	return c.IsZero()
}

// IsZero reports whether c changes nothing in a status (Rule only fills the spec
// of a record c creates; Reason and Message go with Phase or Decision).
func (c Change) IsZero() bool {
	return c.Mode == "" && c.Phase == "" && c.Decision == "" && c.Fault == nil && c.BootID == "" && c.Probe == nil &&
		c.Taint == nil && !c.ClearTaint && !c.Firing && c.Step == nil
}

// Change is one update of a record.
type Change struct {
	// Mode, when set, becomes the record's mode (the one its rule acted in).
	Mode rules.Mode
	// Phase, when set, becomes the record's phase (with Reason and Message), for
	// Cause: the write is refused unless the change is in Transitions.
	Phase   v1alpha1.Phase
	Cause   Cause
	Reason  string
	Message string
	// OnlyIn, when set, applies the change only to a record in that phase: a
	// record in another one is returned as it is, unwritten; none is created.
	OnlyIn v1alpha1.Phase
	// Decision, when set, is appended to the history (with Message).
	Decision string
	// Fault, when set, refreshes the evidence, captures, count and times, and counts
	// a firing unless LadderCounts.
	Fault *fault.Fault
	// LadderCounts says that the escalation ladder's Firing write counts Fault's
	// firing (decide.Laddered: it writes every one), so this write does not.
	LadderCounts bool
	// BootID, when set, is recorded with the evidence.
	BootID string
	// Probe, when set, is appended to the probe verdicts.
	Probe *v1alpha1.ProbeVerdict
	// Rule, when set and the record is created by this change, fills its spec
	// (Fault does too).
	Rule *rules.Compiled
	// Taint, when set, becomes the record's taint bookkeeping (time set here);
	// ClearTaint removes it.
	Taint      *v1alpha1.TaintRecord
	ClearTaint bool
	// Firing, with Fault, adds the firing (its time, BootID) to the escalation
	// record its ladder's triggers count.
	Firing bool
	// Step, when set, becomes the escalation step reached (number, action, state,
	// reason, message; time set here unless given); the firings are kept.
	Step *v1alpha1.Escalation
}

// Record applies c to the NodeFault of a rule on node, creating it when there is
// none (a Resolved one is reopened). node, pack and rule come from c.Fault when set.
// The record is read from the cache when it is current there (see UseCache).
func (s *Store) Record(ctx context.Context, node, pack, rule string, c Change) (*v1alpha1.NodeFault, error) {
	return s.record(ctx, node, pack, rule, c, nil, false)
}

// RecordOn is Record on known, the record as last read or written: the first
// attempt writes on it without reading the record again (a round trip less), a
// conflict reads it again.
func (s *Store) RecordOn(ctx context.Context, known *v1alpha1.NodeFault, c Change) (*v1alpha1.NodeFault, error) {
	return s.record(ctx, known.Spec.Node, known.Spec.Pack, known.Spec.Rule, c, known, false)
}

// RecordNew is Record for a record the caller has just seen absent: the first
// attempt creates it without reading it; one created meanwhile is read and updated.
func (s *Store) RecordNew(ctx context.Context, node, pack, rule string, c Change) (*v1alpha1.NodeFault, error) {
	return s.record(ctx, node, pack, rule, c, nil, true)
}

func (s *Store) record(ctx context.Context, node, pack, rule string, c Change, known *v1alpha1.NodeFault, absent bool) (*v1alpha1.NodeFault, error) {
	if c.Fault != nil {
		node, pack, rule = c.Fault.Node, c.Fault.Rule.Pack, c.Fault.Rule.ID
	}
	name := Name(node, pack, rule)
	if known != nil && known.Name != name {
		known = nil
	}
	if known == nil && !absent {
		if c, own, ok := s.view(node, name); ok {
			if w := own[name]; w != nil && w.deleted {
				absent = true
			} else if w != nil {
				known = w.obj // copied before it is written on
			} else if cached, found := c.get(name); found {
				known = cached
			} else {
				absent = true
			}
		}
	}
	var out *v1alpha1.NodeFault
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var cur *v1alpha1.NodeFault
		var err error
		switch {
		case known != nil:
			cur, known = known.DeepCopy(), nil
			cur.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodeFault"}
		case absent:
			absent = false
			err = apierrors.NewNotFound(v1alpha1.SchemeGroupVersion.WithResource("nodefaults").GroupResource(), name)
		default:
			cur, err = s.Get(ctx, name)
		}
		switch {
		case apierrors.IsNotFound(err) && c.OnlyIn != "":
			out = nil // no record in that phase: nothing to write
			return nil
		case apierrors.IsNotFound(err):
			if err := s.refuse(ctx, name, PhaseNone, c.Phase, c.Cause); err != nil {
				return err // before the create: a refused write leaves no record
			}
			nf := &v1alpha1.NodeFault{
				TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodeFault"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelNode: labelValue(node)}},
				Spec:       v1alpha1.NodeFaultSpec{Node: node, Pack: pack, Rule: rule},
			}
			switch {
			case c.Fault != nil:
				fillSpec(&nf.Spec, c.Fault.Rule)
			case c.Rule != nil:
				fillSpec(&nf.Spec, c.Rule)
			}
			placing := placingOnly(c)
			if placing {
				nf.Annotations = map[string]string{AnnotationPlacing: c.Taint.Taint}
			}
			var created v1alpha1.NodeFault
			if err := s.do(ctx, "POST", s.path(""), nf, &created); err != nil {
				if apierrors.IsAlreadyExists(err) { // created meanwhile: read it, try again
					return apierrors.NewConflict(v1alpha1.SchemeGroupVersion.WithResource("nodefaults").GroupResource(), name, err)
				}
				return err
			}
			readPlacing(&created)
			s.noteWrite(&created, false, "")
			if placing { // the create said it all: no status write
				out = &created
				return nil
			}
			cur = &created
		case err != nil:
			return err
		}
		if c.OnlyIn != "" && cur.Status.Phase != c.OnlyIn {
			out = cur
			return nil
		}
		if err := s.refuse(ctx, name, cur.Status.Phase, c.Phase, c.Cause); err != nil {
			return err
		}
		st := cur.Status.DeepCopy()
		touched := s.apply(st, c)
		if cur.Status.Phase == v1alpha1.PhaseResolved && st.Phase != v1alpha1.PhaseResolved {
			st.ResolvedAt = nil // the fault is back
		}
		cur.Status = *st
		var updated v1alpha1.NodeFault
		if err := s.do(ctx, "PUT", s.path(name)+"/status", cur, &updated); err != nil {
			return err
		}
		s.noteWrite(&updated, false, cur.ResourceVersion)
		out = &updated
		if touched {
			s.opts.Workloads.Recorded(&updated)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nodefault %s: %w", name, err)
	}
	return out, nil
}

// Answer writes the controller's answer to the request of the record name (node
// or fleet fault) into its status.request.
func (s *Store) Answer(ctx context.Context, name string, a v1alpha1.RequestStatus) error {
	a.Message = Truncate(a.Message, maxMessage)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := s.Get(ctx, name)
		if err != nil {
			return err
		}
		cur.Status.Owner, cur.Status.Request = s.opts.Owner, &a
		var updated v1alpha1.NodeFault
		if err := s.do(ctx, "PUT", s.path(name)+"/status", cur, &updated); err != nil {
			return err
		}
		s.noteWrite(&updated, false, cur.ResourceVersion)
		return nil
	})
	if err != nil {
		return fmt.Errorf("nodefault %s: the answer to its request: %w", name, err)
	}
	return nil
}

// labelValue makes a node name usable as a label value (at most 63 characters).
func labelValue(s string) string {
	if len(s) <= 63 {
		return s
	}
	return strings.Trim(s[:63], ".-_")
}

func fillSpec(sp *v1alpha1.NodeFaultSpec, r *rules.Compiled) {
	sp.Severity, sp.Action = string(r.Severity), string(r.Action)
	sp.Description = Truncate(r.Description, maxMessage)
	if t := r.Taint; t.Key != "" {
		sp.Taint = t.Key + "=" + t.Value + ":" + t.Effect
	}
}

// apply applies c to st; true when it recorded the pods the fault touched (touch).
func (s *Store) apply(st *v1alpha1.NodeFaultStatus, c Change) bool {
	touched := s.touch(st, c)
	now := metav1.NewTime(s.opts.Now())
	if c.Fault != nil && st.Phase == v1alpha1.PhaseResolved && c.Phase != "" && c.Phase != v1alpha1.PhaseResolved {
		// Reopened: the first lines are this episode's.
		st.Evidence, st.EvidenceOmitted = nil, 0
	}
	st.Owner = s.opts.Owner
	if c.Phase != "" {
		if c.Phase == v1alpha1.PhaseHeld && st.Phase != v1alpha1.PhaseHeld {
			st.HeldSince = &now
		}
		if c.Phase != v1alpha1.PhaseHeld {
			st.HeldSince = nil
		}
		if c.Phase == v1alpha1.PhaseResolved && st.Phase != v1alpha1.PhaseResolved {
			st.ResolvedAt = &now
		}
		st.Phase, st.Reason, st.Message = c.Phase, c.Reason, Truncate(c.Message, maxMessage)
	}
	if c.Decision != "" {
		st.History = append(st.History, v1alpha1.Decision{Time: now, Kind: c.Decision, Message: Truncate(c.Message, maxMessage)})
		if n := len(st.History); n > maxHistory {
			st.History = slices.Delete(st.History, 0, n-maxHistory)
		}
	}
	if c.Probe != nil {
		p := *c.Probe
		if p.Time.IsZero() {
			p.Time = now
		}
		p.Message = Truncate(p.Message, maxMessage)
		st.Probes = append(st.Probes, p)
		if n := len(st.Probes); n > maxProbes {
			st.Probes = slices.Delete(st.Probes, 0, n-maxProbes)
		}
	}
	if c.BootID != "" {
		st.BootID = c.BootID
	}
	if c.Mode != "" {
		st.Mode = string(c.Mode)
	}
	if c.ClearTaint {
		st.Taint = nil
	}
	if c.Firing && c.Fault != nil {
		if st.Escalation == nil {
			// The climb counts from the firing that started it (the taint's).
			t := metav1.NewMicroTime(c.Fault.Time)
			st.Escalation = &v1alpha1.Escalation{Time: &t}
		}
		boot := c.BootID
		if boot == "" {
			boot = st.BootID
		}
		e := st.Escalation
		e.Firings = append(e.Firings, v1alpha1.Firing{Time: metav1.NewMicroTime(c.Fault.Time), BootID: boot})
		if n := len(e.Firings); n > maxFirings {
			e.Firings = slices.Delete(e.Firings, 0, n-maxFirings)
		}
	}
	if c.Step != nil {
		e := *c.Step
		if st.Escalation != nil {
			e.Firings = st.Escalation.Firings
		}
		if e.Time == nil {
			t := metav1.NewMicroTime(now.Time)
			e.Time = &t
		}
		e.Reason, e.Message = Truncate(e.Reason, maxMessage), Truncate(e.Message, maxMessage)
		st.Escalation = &e
	}
	if c.Taint != nil {
		t := *c.Taint
		t.Time = now
		st.Taint = &t
	}
	if f := c.Fault; f != nil {
		t := metav1.NewTime(f.Time)
		if st.FirstSeen == nil {
			st.FirstSeen = &t
		}
		st.LastSeen = &t
		st.Count = int32(min(f.Count, 1<<30))
		if (c.Firing || !c.LadderCounts) && st.Firings < 1<<30 {
			st.Firings++
		}
		st.Recover = f.Rule.Recover.String()
		st.Captures = nil
		for k, v := range f.Captures {
			if st.Captures == nil {
				st.Captures = map[string]string{}
			}
			st.Captures[Truncate(k, s.opts.MaxLineBytes)] = Truncate(v, s.opts.MaxLineBytes)
		}
		s.addEvidence(st, f.Evidence)
		st.Query, st.Link = s.query(f)
	}
	return touched
}

// addEvidence adds a firing's lines to the record's evidence, leaving out those it
// holds already (a threshold window's earlier matches), and keeps the first
// MaxLines/2 lines and the newest, counting those left out between them.
func (s *Store) addEvidence(st *v1alpha1.NodeFaultStatus, lines []logstream.Line) {
	// Times are kept to the second (metav1.Time): lines are compared so.
	type key struct {
		sec  int64
		text string
	}
	all := slices.Clone(st.Evidence)
	held := make(map[key]bool, len(all)+len(lines))
	for _, l := range all {
		held[key{l.Time.Unix(), l.Text}] = true
	}
	for _, l := range lines {
		e := v1alpha1.EvidenceLine{Time: metav1.NewTime(l.Time), Text: Truncate(l.Text, s.opts.MaxLineBytes)}
		if k := (key{l.Time.Unix(), e.Text}); !held[k] {
			held[k] = true
			all = append(all, e)
		}
	}
	if over := len(all) - s.opts.MaxLines; over > 0 {
		first := s.opts.MaxLines / 2
		all = slices.Delete(all, first, first+over)
		st.EvidenceOmitted = int32(min(int64(st.EvidenceOmitted)+int64(over), 1<<30))
	}
	st.Evidence = all
}

// query returns the LogQL query of the rule's lines on the node (see RuleQuery),
// and its Grafana Explore link around the fault's first and last line.
func (s *Store) query(f *fault.Fault) (string, string) {
	q := RuleQuery(f.Rule, s.opts.NodeLabel, f.Node)
	if s.opts.GrafanaURL == "" {
		return q, ""
	}
	from, to := f.Time.Add(-15*time.Minute), f.Time.Add(5*time.Minute)
	if len(f.Evidence) > 0 && f.Evidence[0].Time.Before(from) {
		from = f.Evidence[0].Time.Add(-time.Minute)
	}
	state := map[string]any{
		"datasource": s.opts.Datasource,
		"queries":    []map[string]string{{"refId": "A", "expr": q}},
		"range":      map[string]string{"from": strconv.FormatInt(from.UnixMilli(), 10), "to": strconv.FormatInt(to.UnixMilli(), 10)},
	}
	raw, _ := json.Marshal(state) // strings and maps only: always encodes
	return q, strings.TrimRight(s.opts.GrafanaURL, "/") + "/explore?left=" + url.QueryEscape(string(raw))
}

// maxQueryRegex bounds the regex a query filters on: past it (a Grafana link would
// be too long to open) the rule's literals filter instead.
const maxQueryRegex = 2048

// RuleQuery is the LogQL query of rule r's lines on node (nodeLabel holds the node
// name in Loki): the stream selector of the rule's source, the node, and a line
// filter of the rule's regex (Loki's |~ uses Go's regexp, as the engine does), or of
// its literals when the regex is too long. The rule's where conditions and
// companion are not expressed: the query shows every line the regex matches.
func RuleQuery(r *rules.Compiled, nodeLabel, node string) string {
	sel := "{" + logstream.LabelSource + "=~\".+\"}"
	if ls, ok := logstream.LookupSource(string(r.Source)); ok {
		sel = ls.Selector
	}
	q := sel + " | " + nodeLabel + "=" + strconv.Quote(node)
	if re := r.Regexp(); re != nil && re.String() != "" && len(re.String()) <= maxQueryRegex {
		return q + " |~ " + lokisource.LogQLString(re.String())
	}
	return q + lokisource.LineFilter(r.Literals, len(r.Literals) > 0)
}

// Collect deletes the Resolved NodeFaults older than the retention period and
// returns how many it deleted. It picks them from the cache once that has synced
// (UseCache): the controller collects on every reconcile pass, and a list of every
// record each time made the API server send, and this process decode, all of a
// fleet's records every few seconds. A cached copy may be stale: each delete's
// precondition is the copy's resourceVersion, so a record reopened since is kept, and
// one resolved since the cache last heard of it waits for a later pass.
func (s *Store) Collect(ctx context.Context) (int, error) {
	all, err := s.collectable(ctx)
	if err != nil {
		return 0, err
	}
	now := s.opts.Now()
	n := 0
	var errs []error
	for _, nf := range all {
		if nf.Status.Phase != v1alpha1.PhaseResolved || nf.Status.ResolvedAt == nil || now.Sub(nf.Status.ResolvedAt.Time) < s.opts.Retention {
			continue
		}
		if nf.Status.Taint != nil {
			continue // it still records a taint on the node: the proof of its owner stays
		}
		// The precondition keeps a record reopened since the List.
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &nf.ResourceVersion}}
		if err := s.do(ctx, "DELETE", s.path(nf.Name), opts, nil); err != nil {
			if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("nodefault %s: delete: %w", nf.Name, err))
			}
			continue
		}
		s.noteWrite(nf, true, nf.ResourceVersion)
		n++
	}
	return n, errors.Join(errs...)
}

// collectable is every record, from the synced cache (shared copies: read only) or
// else from the API server.
func (s *Store) collectable(ctx context.Context) ([]*v1alpha1.NodeFault, error) {
	s.rt.mu.Lock()
	c := s.rt.cache
	s.rt.mu.Unlock()
	if c != nil && c.HasSynced() {
		return c.List(), nil
	}
	l, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.NodeFault, len(l))
	for i := range l {
		out[i] = &l[i]
	}
	return out, nil
}

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut with "…":
// for the bounded fields of records, Events and conditions.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// FaultOf rebuilds the fault a record describes, with the packs' rule; false when
// the packs no longer have it.
func FaultOf(set *rules.Set, nf *v1alpha1.NodeFault) (fault.Fault, bool) {
	r := set.Rule(nf.Spec.Pack, nf.Spec.Rule)
	if r == nil {
		return fault.Fault{}, false
	}
	st := nf.Status
	f := fault.Fault{Node: nf.Spec.Node, Rule: r, Captures: st.Captures, Count: int(st.Count)}
	if st.LastSeen != nil {
		f.Time = st.LastSeen.Time
	}
	for _, l := range st.Evidence {
		f.Evidence = append(f.Evidence, logstream.Line{Time: l.Time.Time, Text: l.Text})
	}
	return f, true
}
