// Package proberun runs probe checks for the controller: on nodes through their
// probe agents (asking each agent which checks it runs), and cluster-level checks such
// as pvc in the controller itself. It keeps a record of each run and reports every
// node's results to a hook (see controller/trigger, which decides when runs start:
// by hand, on a schedule, to confirm a rule, before a recovery).
package proberun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
)

// Trigger says why a run happened.
type Trigger string

// Triggers.
const (
	TriggerManual   Trigger = "manual"
	TriggerSchedule Trigger = "schedule"
	TriggerRule     Trigger = "rule"
	TriggerRecovery Trigger = "recovery"
	// TriggerEscalation: a step of a rule's escalation ladder (gpu-reset and the
	// confirming probes after it).
	TriggerEscalation Trigger = "escalation"
	// TriggerDeep: the periodic deep checks on idle nodes (Autopilot compatibility).
	TriggerDeep Trigger = "deep"
)

// State is the progress of a run or of one node in it.
type State string

// States.
const (
	StatePending State = "pending"
	StateRunning State = "running"
	StateDone    State = "done"
)

// ClusterNode is the NodeRun.Node of checks the controller runs for the cluster as
// a whole (pvc): they are run once per run, not once per node.
const ClusterNode = ""

// Request asks for checks on nodes.
type Request struct {
	Nodes  []string
	Checks []string
	// Params per check. Checks that measure against a peer (Spec.Peer: iperf3, ping)
	// also take peer_node: the node whose agent is the peer (asked to start the
	// server first when the check needs one, Spec.PeerServer).
	Params  map[string]probe.Params
	Force   bool
	Trigger Trigger
	// Reason says more about the trigger (the rule, the schedule).
	Reason string
	// Batch is how many nodes are probed at once (default Config.Batch).
	Batch int
	// OnNode, when set, is called with each node's part once it ended, after
	// Config.OnNode: the caller that records the run (a ProbeRun's status).
	OnNode func(nr NodeRun)
	// Recorded: the run has its record already (a ProbeRun a user created);
	// Config.OnRun's hook makes none.
	Recorded bool
}

// NodeRun is one node's part of a run.
type NodeRun struct {
	Node    string         `json:"node"`
	State   State          `json:"state"`
	Status  probe.Status   `json:"status,omitempty"`
	Results []probe.Result `json:"results,omitempty"`
	Error   string         `json:"error,omitempty"`
	// Refused is the agent's HTTP status when it refused the run (409: containers
	// hold the node's GPUs, or another invasive check runs there), or the checks in
	// NotRun; Pods the pods it named.
	Refused int      `json:"refused,omitempty"`
	Pods    []string `json:"pods,omitempty"`
	// NotRun are the checks (as asked for) the agent refused while it ran the
	// others of the run: the invasive ones, when the run mixed them with harmless
	// ones. Their results say error ("not run: ...").
	NotRun   []string  `json:"notRun,omitempty"`
	Started  time.Time `json:"started,omitempty"`
	Finished time.Time `json:"finished,omitempty"`
}

// Run is a record of a request and what it found.
type Run struct {
	ID       string                  `json:"id"`
	Trigger  Trigger                 `json:"trigger"`
	Reason   string                  `json:"reason,omitempty"`
	Checks   []string                `json:"checks"`
	Params   map[string]probe.Params `json:"params,omitempty"`
	Force    bool                    `json:"force,omitempty"`
	State    State                   `json:"state"`
	Status   probe.Status            `json:"status,omitempty"`
	Created  time.Time               `json:"created"`
	Finished time.Time               `json:"finished,omitempty"`
	Nodes    []NodeRun               `json:"nodes"`
	// Recorded: see Request.Recorded.
	Recorded bool `json:"-"`
}

// Done counts the nodes that finished.
func (r Run) Done() int {
	n := 0
	for _, nr := range r.Nodes {
		if nr.State == StateDone {
			n++
		}
	}
	return n
}

// Resolver finds a node's agent.
type Resolver interface {
	// Endpoint returns the base URL of the node's probe agent.
	Endpoint(ctx context.Context, node string) (string, error)
}

// Config configures a Dispatcher.
type Config struct {
	Agents Resolver
	// Token returns the bearer token the agents check (the controller's
	// ServiceAccount token).
	Token func() (string, error)
	HTTP  *http.Client
	// Registry is the one list of checks, each saying where it runs (Spec.RunsOn):
	// on the nodes, through their agents (which are asked what they actually run),
	// or in the controller (default: the probe package's registry, node checks only).
	Registry *probe.Registry
	// Local runs the checks that run in the controller (RunsOn OnController, pvc);
	// nil: such checks are refused.
	Local *probe.Runner
	// Batch is the default number of nodes probed at once (default 10).
	Batch int
	// NodeTimeout bounds one node's part of a run (default 30m: dcgm level 3 is long).
	NodeTimeout time.Duration
	// Iperf3Port is where peers' one-shot iperf3 servers listen (default 5201).
	Iperf3Port int
	// Keep is how many finished runs are remembered (default 200).
	Keep int
	// PickPeer chooses the peer of a peer check (Spec.Peer) that names neither peer
	// nor peer_node (a rule's confirming probe cannot know one); nil: such checks fail
	// validation on the agent.
	PickPeer func(node string) (string, error)
	// Capacity tells a node's capacity of a resource (0, false: unknown); it fills in
	// the parameters whose schema names one (ParamSpec.FromCapacity) and that a run
	// leaves unset. nil: they keep their defaults.
	Capacity func(node, resource string) (int64, bool)
	// Aliases are other names of checks, each with some of the check's parameters
	// set (Autopilot's check names, controller/autopilot): a request may name them
	// wherever it names a check, and their results carry the name asked for.
	Aliases map[string]Alias
	// OnRun is called when a run starts, before any of its nodes; OnStart when a
	// node's probes start; OnNode when they finished.
	OnRun   func(run *Run)
	OnStart func(run *Run, node string)
	OnNode  func(run *Run, nr NodeRun)
	Log     *slog.Logger
}

// Alias is another name for a check, with some of the check's parameters set;
// those a request gives for the alias come on top of them.
type Alias struct {
	Check  string
	Params probe.Params
}

// Dispatcher runs probes and remembers the runs.
type Dispatcher struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	checks  map[string]inventory // node → what its agent said it runs
	runs    map[string]*Run
	order   []string
	done    map[string]chan struct{}
	running map[string]int // probes in flight per node
}

// New returns a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Agents == nil {
		return nil, errors.New("probes: no agent resolver")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 10
	}
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = 30 * time.Minute
	}
	if cfg.Iperf3Port <= 0 {
		cfg.Iperf3Port = 5201
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 200
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Registry == nil {
		cfg.Registry = probe.Default()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Dispatcher{cfg: cfg, log: cfg.Log, runs: map[string]*Run{}, done: map[string]chan struct{}{}, running: map[string]int{}, checks: map[string]inventory{}}, nil
}

// RunsInController reports whether the check a name runs runs in the controller
// (once per run, as node ClusterNode) rather than on the nodes.
func (d *Dispatcher) RunsInController(name string) bool { return d.local(name) }

// local reports whether the check a name runs runs in the controller.
func (d *Dispatcher) local(name string) bool {
	check, _ := d.Resolve(name, nil)
	spec, ok := d.cfg.Registry.Get(check)
	return ok && spec.RunsOn == probe.OnController
}

// Resolve returns the check a name runs (itself, or an alias's check) and its
// parameters: the alias's, with p over them.
func (d *Dispatcher) Resolve(name string, p probe.Params) (string, probe.Params) {
	a, ok := d.cfg.Aliases[name]
	if !ok {
		return name, p
	}
	out := a.Params.Clone()
	if out == nil {
		out = probe.Params{}
	}
	for k, v := range p {
		out[k] = v
	}
	return a.Check, out
}

// Invasive reports whether one of the checks a request names, with its
// parameters, is invasive (it loads the GPUs or the network).
func (d *Dispatcher) Invasive(names []string, params map[string]probe.Params) bool {
	for _, name := range names {
		check, p := d.Resolve(name, params[name])
		spec, ok := d.cfg.Registry.Get(check)
		if !ok {
			continue
		}
		if rp, err := spec.Params.Resolve(p); err == nil {
			p = rp
		}
		if spec.IsInvasive(p) {
			return true
		}
	}
	return false
}

// Validate checks a request without running it.
func (d *Dispatcher) Validate(req Request) error {
	if len(req.Checks) == 0 {
		return errors.New("no checks named")
	}
	seen := map[string]bool{}
	remote := false
	for _, c := range req.Checks {
		if seen[c] {
			return fmt.Errorf("check %q named twice", c)
		}
		seen[c] = true
		check, params := d.Resolve(c, req.Params[c])
		spec, ok := d.cfg.Registry.Get(check)
		switch {
		case !ok:
			return fmt.Errorf("unknown check %q", c)
		case spec.RunsOn == probe.OnController:
			if d.cfg.Local == nil {
				return fmt.Errorf("check %s runs in the controller, which has no runner for it", c)
			}
			if _, err := spec.Params.Resolve(params); err != nil {
				return fmt.Errorf("check %s: %w", c, err)
			}
		default:
			remote = true
			p := params.Clone()
			if p["peer_node"] != "" || (spec.Peer && p["peer"] == "" && d.cfg.PickPeer != nil) {
				delete(p, "peer_node")
				p["peer"] = "127.0.0.1" // stands for the peer's address, resolved when run
			}
			if _, err := spec.Params.Resolve(p); err != nil {
				return fmt.Errorf("check %s: %w", c, err)
			}
		}
	}
	for c := range req.Params {
		if !seen[c] {
			return fmt.Errorf("parameters given for %q, which is not among the checks", c)
		}
	}
	if remote && len(req.Nodes) == 0 {
		return errors.New("no nodes: name nodes or a label selector that matches some")
	}
	return nil
}

// CheckAgents refuses a request with checks that run on nodes when some of its
// nodes run no probe agent (ErrNoAgent), naming them; a manual run then starts
// nothing rather than failing node by node.
func (d *Dispatcher) CheckAgents(ctx context.Context, req Request) error {
	remote := false
	for _, c := range req.Checks {
		remote = remote || !d.local(c)
	}
	if !remote {
		return nil
	}
	var missing []string
	var first error
	for _, n := range req.Nodes {
		if _, err := d.cfg.Agents.Endpoint(ctx, n); err != nil {
			if !errors.Is(err, ErrNoAgent) {
				return fmt.Errorf("probe agent of %s: %w", n, err)
			}
			missing = append(missing, n)
			if first == nil {
				first = err
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return fmt.Errorf("%d of %d node(s) run no probe agent, nothing started: %s (%w)", len(missing), len(req.Nodes), strings.Join(missing, ", "), first)
}

// Start validates the request and starts the run in the background. The run goes on
// after ctx ends only if ctx is the controller's lifetime context: cancelling ctx
// cancels the run.
func (d *Dispatcher) Start(ctx context.Context, req Request) (Run, error) {
	if err := d.Validate(req); err != nil {
		return Run{}, err
	}
	if req.Trigger == "" {
		req.Trigger = TriggerManual
	}
	batch := req.Batch
	if batch <= 0 {
		batch = d.cfg.Batch
	}
	run := &Run{ID: newID(), Trigger: req.Trigger, Reason: req.Reason, Checks: req.Checks, Params: req.Params,
		Force: req.Force, State: StateRunning, Created: time.Now(), Recorded: req.Recorded}
	var local, remote []string
	for _, c := range req.Checks {
		if d.local(c) {
			local = append(local, c)
		} else {
			remote = append(remote, c)
		}
	}
	if len(local) > 0 {
		run.Nodes = append(run.Nodes, NodeRun{Node: ClusterNode, State: StatePending})
	}
	if len(remote) > 0 {
		nodes := append([]string(nil), req.Nodes...)
		sort.Strings(nodes)
		for i, n := range nodes {
			if i > 0 && n == nodes[i-1] {
				continue
			}
			run.Nodes = append(run.Nodes, NodeRun{Node: n, State: StatePending})
		}
	}
	done := make(chan struct{})
	d.mu.Lock()
	d.runs[run.ID] = run
	d.order = append(d.order, run.ID)
	d.done[run.ID] = done
	d.forgetOld()
	snap := cloneRun(run)
	d.mu.Unlock()
	if d.cfg.OnRun != nil {
		d.cfg.OnRun(&snap)
	}

	go func() {
		defer close(done)
		sem := make(chan struct{}, batch)
		var wg sync.WaitGroup
		for i := range snap.Nodes {
			node := snap.Nodes[i].Node
			checks := remote
			if node == ClusterNode {
				checks = local
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				d.runNode(ctx, run, i, node, checks, req)
			}()
		}
		wg.Wait()
		d.mu.Lock()
		run.State, run.Finished = StateDone, time.Now()
		var ss []probe.Status
		for _, nr := range run.Nodes {
			ss = append(ss, nr.Status)
		}
		run.Status = probe.Worst(ss...)
		d.mu.Unlock()
		d.log.Info("probe run finished", "id", run.ID, "trigger", run.Trigger, "checks", run.Checks, "nodes", len(run.Nodes), "status", run.Status)
	}()
	return snap, nil
}

// Wait waits for a run to finish and returns it.
func (d *Dispatcher) Wait(ctx context.Context, id string) (Run, error) {
	d.mu.Lock()
	done, ok := d.done[id]
	d.mu.Unlock()
	if !ok {
		return Run{}, fmt.Errorf("no run %q", id)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return Run{}, ctx.Err()
	}
	r, _ := d.Get(id)
	return r, nil
}

// Get returns a copy of a run.
func (d *Dispatcher) Get(id string) (Run, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.runs[id]
	if !ok {
		return Run{}, false
	}
	return cloneRun(r), true
}

// List returns the remembered runs, newest first.
func (d *Dispatcher) List() []Run {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Run, 0, len(d.order))
	for i := len(d.order) - 1; i >= 0; i-- {
		out = append(out, cloneRun(d.runs[d.order[i]]))
	}
	return out
}

// Testing reports whether probes are running on a node now.
func (d *Dispatcher) Testing(node string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.running[node] > 0
}

func (d *Dispatcher) forgetOld() {
	for len(d.order) > d.cfg.Keep {
		id := d.order[0]
		if d.runs[id].State != StateDone {
			break
		}
		d.order = d.order[1:]
		delete(d.runs, id)
		delete(d.done, id)
	}
}

func (d *Dispatcher) runNode(ctx context.Context, run *Run, i int, node string, checks []string, req Request) {
	d.mu.Lock()
	run.Nodes[i].State, run.Nodes[i].Started = StateRunning, time.Now()
	d.running[node]++
	d.mu.Unlock()
	if d.cfg.OnStart != nil && node != ClusterNode {
		d.cfg.OnStart(cloneRunPtr(d, run), node)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.NodeTimeout)
	defer cancel()
	var results []probe.Result
	var refused []agentapi.Refusal
	var err error
	if node == ClusterNode {
		results, err = d.runLocal(ctx, checks, req)
	} else {
		results, refused, err = d.runRemote(ctx, node, checks, req)
	}
	d.mu.Lock()
	nr := &run.Nodes[i]
	nr.State, nr.Finished, nr.Results = StateDone, time.Now(), results
	for _, r := range refused {
		nr.NotRun = append(nr.NotRun, r.Check)
		nr.Refused = r.Code
		for _, p := range r.Pods {
			if !slices.Contains(nr.Pods, p) {
				nr.Pods = append(nr.Pods, p)
			}
		}
	}
	var ss []probe.Status
	for _, r := range results {
		ss = append(ss, r.Status)
	}
	nr.Status = probe.Worst(ss...)
	if err != nil {
		nr.Error = err.Error()
		nr.Status = probe.Worst(nr.Status, probe.StatusError)
		var refused *agentapi.APIError
		if errors.As(err, &refused) {
			nr.Refused, nr.Pods = refused.Code, refused.Pods
		}
	}
	d.running[node]--
	if d.running[node] <= 0 {
		delete(d.running, node)
	}
	out := *nr
	d.mu.Unlock()
	if d.cfg.OnNode != nil {
		d.cfg.OnNode(cloneRunPtr(d, run), out)
	}
	if req.OnNode != nil {
		req.OnNode(out)
	}
}

func cloneRunPtr(d *Dispatcher, r *Run) *Run {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := cloneRun(r)
	return &c
}

func (d *Dispatcher) runLocal(ctx context.Context, names []string, req Request) ([]probe.Result, error) {
	var out []probe.Result
	for _, name := range names {
		check, p := d.Resolve(name, req.Params[name])
		res, err := d.cfg.Local.Run(ctx, check, p)
		if err != nil {
			return out, err
		}
		res.Check = name
		out = append(out, res)
	}
	return out, nil
}

func (d *Dispatcher) client(ctx context.Context, node string) (*agentapi.Client, error) {
	base, err := d.cfg.Agents.Endpoint(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("probe agent of %s: %w", node, err)
	}
	// The node travels with each request: a client of per-node certificates
	// (NodeAgentClient) checks that the agent's certificate names it.
	return &agentapi.Client{BaseURL: base, Token: d.cfg.Token, HTTP: forNode(d.cfg.HTTP, node)}, nil
}

// runRemote asks the node's agent to run the checks the names stand for, in one
// request, or in several when two names run the same check (two aliases of nvml):
// the agent takes each check once per request.
func (d *Dispatcher) runRemote(ctx context.Context, node string, names []string, req Request) ([]probe.Result, []agentapi.Refusal, error) {
	c, err := d.client(ctx, node)
	if err != nil {
		return nil, nil, err
	}
	inv, err := d.inventory(ctx, node, c)
	if err != nil {
		return nil, nil, err
	}
	var calls [][]string
	for _, name := range names {
		check, _ := d.Resolve(name, nil)
		i := slices.IndexFunc(calls, func(call []string) bool {
			return !slices.ContainsFunc(call, func(n string) bool { c, _ := d.Resolve(n, nil); return c == check })
		})
		if i < 0 {
			calls = append(calls, nil)
			i = len(calls) - 1
		}
		calls[i] = append(calls[i], name)
	}
	var out []probe.Result
	var refused []agentapi.Refusal
	for _, call := range calls {
		res, ref, err := d.runCall(ctx, node, c, inv, call, req)
		out = append(out, res...)
		refused = append(refused, ref...)
		if err != nil {
			return out, refused, err
		}
	}
	return out, refused, nil
}

// runCall asks the node's agent to run the checks of names (each check once), and
// reports each result under the name asked for. Peer checks with a peer_node get
// the peer's address (the host of its agent, which listens on the host network);
// for those that need a server (iperf3) the peer's agent first starts a one-shot
// one.
func (d *Dispatcher) runCall(ctx context.Context, node string, c *agentapi.Client, inv inventory, names []string, req Request) ([]probe.Result, []agentapi.Refusal, error) {
	params := map[string]probe.Params{}
	checks := make([]string, 0, len(names))
	asked := map[string]string{} // check → the name asked for
	for _, name := range names {
		ch, p := d.Resolve(name, req.Params[name])
		checks = append(checks, ch)
		asked[ch] = name
		p = p.Clone()
		if p == nil {
			p = probe.Params{}
		}
		spec, ok := inv.checks[ch]
		if !ok {
			return nil, nil, fmt.Errorf("the probe agent on %s does not run %s (it runs: %s)", node, ch, strings.Join(inv.names(), ", "))
		}
		d.fromCapacity(node, ch, p)
		if spec.Peer && p["peer"] == "" && p["peer_node"] == "" && d.cfg.PickPeer != nil {
			peer, err := d.cfg.PickPeer(node)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: no peer for %s: %w", ch, node, err)
			}
			p["peer_node"] = peer
		}
		if peer := p["peer_node"]; peer != "" {
			delete(p, "peer_node")
			if peer == node {
				return nil, nil, fmt.Errorf("%s: peer_node is the node itself", ch)
			}
			pc, err := d.client(ctx, peer)
			if err != nil {
				return nil, nil, err
			}
			host, err := hostOf(pc.BaseURL)
			if err != nil {
				return nil, nil, err
			}
			p["peer"] = host
			if spec.PeerServer != "" {
				port := d.cfg.Iperf3Port
				if v := p["port"]; v != "" {
					if port, err = strconv.Atoi(v); err != nil {
						return nil, nil, fmt.Errorf("%s: port %q: %w", ch, v, err)
					}
				}
				// The peer serves through its agent's own check (iperf3-server).
				if err := serve(ctx, pc, spec.PeerServer, probe.Params{"port": strconv.Itoa(port), "idle_timeout": "5m"}, req.Trigger); err != nil {
					return nil, nil, fmt.Errorf("%s: %s on %s: %w", ch, spec.PeerServer, peer, err)
				}
				p["port"] = strconv.Itoa(port)
			}
		}
		if len(p) > 0 {
			params[ch] = p
		}
	}
	resp, err := c.Run(ctx, agentapi.RunRequest{Checks: checks, Params: params, Force: req.Force, Trigger: string(req.Trigger)})
	if err != nil {
		return nil, nil, err
	}
	for i := range resp.Results {
		if name, ok := asked[resp.Results[i].Check]; ok {
			resp.Results[i].Check = name
		}
	}
	for i := range resp.Refused {
		if name, ok := asked[resp.Refused[i].Check]; ok {
			resp.Refused[i].Check = name
		}
	}
	return resp.Results, resp.Refused, nil
}

// fromCapacity sets the parameters of check that p leaves unset and whose value the
// node's capacity gives (nvml's expected_gpus: the node's nvidia.com/gpu), within
// the parameter's bounds; an explicit value, even 0, is kept.
func (d *Dispatcher) fromCapacity(node, check string, p probe.Params) {
	if d.cfg.Capacity == nil {
		return
	}
	spec, ok := d.cfg.Registry.Get(check)
	if !ok {
		return
	}
	for _, ps := range spec.Params {
		if ps.FromCapacity == "" || p[ps.Name] != "" {
			continue
		}
		n, ok := d.cfg.Capacity(node, ps.FromCapacity)
		if !ok || n <= 0 || (ps.Max != 0 && float64(n) > ps.Max) {
			continue
		}
		p[ps.Name] = strconv.FormatInt(n, 10)
	}
}

// inventoryTTL is how long an agent's list of checks is trusted: an agent upgraded
// in place (a DaemonSet rollout) is asked again within it.
const inventoryTTL = 5 * time.Minute

// maxInventories bounds the cache (one entry per node).
const maxInventories = 100000

type inventory struct {
	checks map[string]agentapi.CheckInfo
	at     time.Time
}

func (inv inventory) names() []string {
	out := make([]string, 0, len(inv.checks))
	for n := range inv.checks {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// inventory returns the checks the node's agent runs, asking the agent (GET
// /api/v1/checks) at most every inventoryTTL: the agent, not the controller's own
// registry, says what a node can run and which checks need a peer.
func (d *Dispatcher) inventory(ctx context.Context, node string, c *agentapi.Client) (inventory, error) {
	d.mu.Lock()
	inv, ok := d.checks[node]
	d.mu.Unlock()
	if ok && time.Since(inv.at) < inventoryTTL {
		return inv, nil
	}
	list, err := c.Checks(ctx)
	if err != nil {
		return inventory{}, fmt.Errorf("probe agent of %s: list of checks: %w", node, err)
	}
	inv = inventory{checks: make(map[string]agentapi.CheckInfo, len(list)), at: time.Now()}
	for _, ci := range list {
		inv.checks[ci.Name] = ci
	}
	d.mu.Lock()
	if len(d.checks) >= maxInventories {
		clear(d.checks)
	}
	d.checks[node] = inv
	d.mu.Unlock()
	return inv, nil
}

// serve runs check (a peer server) on the agent of c, for a run started by trigger,
// and says whether it is serving.
func serve(ctx context.Context, c *agentapi.Client, check string, p probe.Params, trigger Trigger) error {
	resp, err := c.Run(ctx, agentapi.RunRequest{Checks: []string{check}, Params: map[string]probe.Params{check: p}, Trigger: string(trigger)})
	if err != nil {
		return err
	}
	if len(resp.Results) != 1 || resp.Results[0].Status != probe.StatusPass {
		return fmt.Errorf("not serving: %+v", resp.Results)
	}
	return nil
}

func hostOf(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	h := u.Hostname()
	if h == "" {
		return "", fmt.Errorf("agent URL %q has no host", base)
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.String(), nil
	}
	return h, nil
}

func cloneRun(r *Run) Run {
	c := *r
	c.Nodes = append([]NodeRun(nil), r.Nodes...)
	for i := range c.Nodes {
		c.Nodes[i].Results = append([]probe.Result(nil), r.Nodes[i].Results...)
	}
	return c
}

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}
