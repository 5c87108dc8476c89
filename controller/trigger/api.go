package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/kubeauth"
)

// ActCreate is the permission GET /status checks (it starts a run), on
// probes.faultline.io: the one the probe agents check too.
var ActCreate = kubeauth.Action{Verb: "create", Resource: "probes"}

// Limits on manual runs, so that one caller cannot probe the whole fleet at once.
const (
	// MaxBatch is the most nodes a manual run probes at once.
	MaxBatch = 50
	// MaxManualRuns is how many manual runs may be in progress on a replica.
	MaxManualRuns = 4
)

// Request is a manual run: a ProbeRun's spec, or /status's query.
type Request struct {
	// Nodes by name, or Selector: a label selector over nodes (one of the two).
	Nodes    []string
	Selector string
	Checks   []string
	Params   map[string]probe.Params
	Force    bool
	Batch    int
	// Recorded: the run has its ProbeRun already (proberun.Request).
	Recorded bool
	// OnNode is called with each node's results as they come (proberun.Request).
	OnNode func(proberun.NodeRun)
}

// Register adds the probe endpoint to mux:
//
//	GET /status?check=pciebw,dcgm&host=n1,n2&batch=N&r=2                      create probes
//	                             Autopilot-compatible: runs the checks and answers when
//	                             they are done, as text (format=json for the run)
//
// The action is on probes.faultline.io (see kubeauth.Mux). Manual runs otherwise
// are ProbeRun objects (controller/proberunctl), authorized by the API server.
func (t *Triggers) Register(mux *kubeauth.Mux) {
	off := func(w http.ResponseWriter) bool {
		if t.dispatcher == nil {
			http.Error(w, "probes are not configured on this controller (see --probe-agent-port / --probe-agent)", http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	// /status starts a run, so it needs create, GET or not.
	mux.HandleFunc("GET /status", kubeauth.Fixed(ActCreate), func(w http.ResponseWriter, r *http.Request) {
		if off(w) {
			return
		}
		q := r.URL.Query()
		req := Request{Checks: splitList(q.Get("check")), Nodes: splitList(q.Get("host")), Selector: q.Get("nodelabel")}
		if len(req.Checks) == 0 {
			req.Checks = probe.Default().DefaultEnabled()
		}
		if b := q.Get("batch"); b != "" {
			n, err := strconv.Atoi(b)
			if err != nil || n < 1 {
				http.Error(w, "batch: want a positive number", http.StatusBadRequest)
				return
			}
			req.Batch = n
		}
		if lvl := q.Get("r"); lvl != "" {
			req.Params = map[string]probe.Params{"dcgm": {"level": lvl}}
		}
		if len(req.Nodes) == 0 && req.Selector == "" {
			nodes, err := t.probeNodes()
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			req.Nodes = nodes
		}
		// The run belongs to the replica, not to the request that started it.
		run, err := t.Start(t.deps.Life, req, proberun.TriggerManual)
		if err != nil {
			http.Error(w, err.Error(), startStatus(err))
			return
		}
		run, err = t.dispatcher.Wait(r.Context(), run.ID)
		if err != nil {
			http.Error(w, "client went away: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		if q.Get("format") == "json" {
			writeJSON(w, http.StatusOK, run)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		WriteStatusText(w, run)
	})
}

// Start starts a manual run (a ProbeRun, /status) with the limits of manual runs
// (MaxBatch, MaxManualRuns); it runs until ctx ends.
func (t *Triggers) Start(ctx context.Context, req Request, trigger proberun.Trigger) (proberun.Run, error) {
	if t.dispatcher == nil {
		return proberun.Run{}, fmt.Errorf("probes are not configured")
	}
	nodes := req.Nodes
	if req.Selector != "" {
		if len(nodes) > 0 {
			return proberun.Run{}, fmt.Errorf("give nodes or a selector, not both")
		}
		var err error
		if nodes, err = t.SelectNodes(req.Selector); err != nil {
			return proberun.Run{}, err
		}
		if len(nodes) == 0 {
			return proberun.Run{}, fmt.Errorf("no node matches %q", req.Selector)
		}
	}
	for _, n := range nodes {
		if _, err := t.deps.Actor.NodeLister().Get(n); err != nil {
			return proberun.Run{}, fmt.Errorf("node %q: %w", n, err)
		}
	}
	if req.Batch > MaxBatch {
		return proberun.Run{}, fmt.Errorf("batch %d: at most %d nodes are probed at once", req.Batch, MaxBatch)
	}
	if trigger == proberun.TriggerManual {
		active := 0
		for _, r := range t.dispatcher.List() {
			if r.Trigger == proberun.TriggerManual && r.State != proberun.StateDone {
				active++
			}
		}
		if active >= MaxManualRuns {
			return proberun.Run{}, fmt.Errorf("%w: %d manual runs are in progress (at most %d)", ErrBusy, active, MaxManualRuns)
		}
	}
	if ctx.Err() != nil {
		return proberun.Run{}, fmt.Errorf("controller is shutting down or no longer leads")
	}
	pr := proberun.Request{Nodes: nodes, Checks: req.Checks, Params: req.Params, Force: req.Force, Batch: req.Batch, Trigger: trigger,
		Recorded: req.Recorded, OnNode: req.OnNode}
	if err := t.dispatcher.Validate(pr); err != nil {
		return proberun.Run{}, err
	}
	if err := t.dispatcher.CheckAgents(ctx, pr); err != nil {
		return proberun.Run{}, err
	}
	return t.dispatcher.Start(ctx, pr)
}

// ErrBusy: too many manual runs are in progress; the API answers 429.
var ErrBusy = errors.New("busy")

func startStatus(err error) int {
	if errors.Is(err, ErrBusy) {
		return http.StatusTooManyRequests
	}
	if errors.Is(err, proberun.ErrNoAgent) {
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// WriteStatusText renders a run the way Autopilot's /status answers: per node, one
// line per check with its verdict, then the node's status.
func WriteStatusText(w io.Writer, run proberun.Run) {
	fmt.Fprintf(w, "Run %s: checks %s on %d node(s), %s\n", run.ID, strings.Join(run.Checks, ","), len(run.Nodes), run.Status)
	nodes := append([]proberun.NodeRun(nil), run.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
	for _, nr := range nodes {
		name := nr.Node
		if name == proberun.ClusterNode {
			name = "(cluster)"
		}
		fmt.Fprintf(w, "\nNode: %s\n", name)
		for _, r := range nr.Results {
			verdict := map[probe.Status]string{probe.StatusPass: "SUCCESS", probe.StatusWarn: "WARNING",
				probe.StatusFail: "FAIL", probe.StatusError: "ERROR", probe.StatusSkipped: "SKIPPED"}[r.Status]
			fmt.Fprintf(w, "[[ %s ]] %s", strings.ToUpper(r.Check), verdict)
			if r.Message != "" {
				fmt.Fprintf(w, ": %s", r.Message)
			}
			fmt.Fprintf(w, " (%s)\n", r.Duration.Round(time.Millisecond))
			for _, d := range r.Devices {
				fmt.Fprintf(w, "    %s %s%s", d.ID, d.Status, formatValues(d.Values))
				if d.Message != "" {
					fmt.Fprintf(w, " %s", d.Message)
				}
				fmt.Fprintln(w)
			}
		}
		if nr.Error != "" {
			fmt.Fprintf(w, "[[ ERROR ]] %s\n", nr.Error)
		}
		status := "Ok"
		if nr.Status == probe.StatusFail || nr.Status == probe.StatusError {
			status = "Err"
		}
		fmt.Fprintf(w, "Node Status: %s\n", status)
	}
}

func formatValues(v map[string]float64) string {
	if len(v) == 0 {
		return ""
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, strconv.FormatFloat(v[k], 'f', -1, 64))
	}
	return b.String()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// RunsInController reports whether a check (or an alias of one) runs in the
// controller, once per run, rather than on the nodes; false with probes off.
func (t *Triggers) RunsInController(check string) bool {
	return t.dispatcher != nil && t.dispatcher.RunsInController(check)
}
