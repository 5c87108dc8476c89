package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// ErrUnknownProbe is returned by Runner.Run for a name no probe is registered under.
var ErrUnknownProbe = errors.New("unknown probe")

// ErrNotImplemented is returned by Runner.Run for a check this program knows but does
// not run (a node check in the controller: the agents run those).
var ErrNotImplemented = errors.New("check not implemented in this program")

// Runner runs registered probes for one node and records their metrics.
//
// Runs of the same probe are serialized. Invasive probes run one at a time: a run
// that finds another holding the node is refused with *BusyError (see ClaimInvasive;
// two GPU stress tests at once would measure each other). A probe that does not return when its
// timeout expires (an NVML call stuck on a GPU that fell off the bus) is abandoned: Run
// returns an error result and the probe's goroutine finishes in the background.
type Runner struct {
	reg     *Registry
	cfg     Config
	metrics *Metrics
	now     func() time.Time

	mu        sync.Mutex
	probes    map[string]Probe
	locks     map[string]*sync.Mutex
	timeouts  map[string]time.Duration
	claimedBy string // the invasive run holding the node ("" if none), see ClaimInvasive
	claimedAt time.Time
}

// NewRunner returns a runner for the probes in reg (Default() if nil); metrics may be nil.
func NewRunner(reg *Registry, cfg Config, metrics *Metrics) *Runner {
	if reg == nil {
		reg = Default()
	}
	return &Runner{reg: reg, cfg: cfg, metrics: metrics, now: time.Now,
		probes: map[string]Probe{}, locks: map[string]*sync.Mutex{}, timeouts: map[string]time.Duration{}}
}

// Close closes the probes that hold something beyond a run (the iperf3-server
// probe's servers waiting for a client).
func (r *Runner) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.probes {
		if c, ok := p.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// Registry returns the runner's registry.
func (r *Runner) Registry() *Registry { return r.reg }

// SetTimeout overrides the timeout of a probe (0 restores the spec's).
func (r *Runner) SetTimeout(name string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d <= 0 {
		delete(r.timeouts, name)
		return
	}
	r.timeouts[name] = d
}

func (r *Runner) instance(s Spec) (Probe, *sync.Mutex, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.probes[s.Name]
	if !ok {
		p = s.New(r.cfg)
		r.probes[s.Name] = p
	}
	l, ok := r.locks[s.Name]
	if !ok {
		l = &sync.Mutex{}
		r.locks[s.Name] = l
	}
	return p, l, r.timeouts[s.Name]
}

// Run runs the probe registered under name with params p. It returns an error only
// when the request itself is wrong or cannot run now: ErrUnknownProbe, a *ParamError
// (joined) for invalid parameters, a *BusyError for an invasive probe while another
// holds the node (and ctx carries no claim of this runner), or a *LimitError from a
// probe that refused to start because a limit of the node is reached; nothing is
// recorded then. Everything else, including a probe that
// fails to start, times out or panics, is a Result (status error) and is recorded.
func (r *Runner) Run(ctx context.Context, name string, p Params) (Result, error) {
	spec, ok := r.reg.Get(name)
	if !ok {
		return Result{}, fmt.Errorf("%w %q", ErrUnknownProbe, name)
	}
	if spec.New == nil {
		return Result{}, fmt.Errorf("%w: %q", ErrNotImplemented, name)
	}
	resolved, err := spec.Params.Resolve(p)
	if err != nil {
		return Result{}, fmt.Errorf("probe %s: %w", name, err)
	}
	pr, lock, override := r.instance(spec)
	timeout := spec.Timeout(resolved)
	if override > 0 {
		timeout = override
	}

	if spec.IsInvasive(resolved) && !r.holds(ctx) {
		claim, err := r.ClaimInvasive(name)
		if err != nil {
			return Result{}, err
		}
		defer claim.Release()
	}
	lock.Lock()
	defer lock.Unlock()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	started := r.now()
	res, runErr := runGuarded(ctx, name, pr, resolved)
	elapsed := r.now().Sub(started)
	var limited *LimitError
	if errors.As(runErr, &limited) {
		return Result{}, runErr // refused before examining anything: no result to record
	}

	res.Check = name
	if res.Node == "" {
		res.Node = r.cfg.Node
	}
	res.Params = resolved
	res.Started = started
	res.Duration = elapsed
	switch {
	case runErr != nil:
		res.Status = StatusError
		msg := runErr.Error()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			if runErr == ctx.Err() {
				msg = fmt.Sprintf("timed out after %s", timeout)
			} else {
				msg = fmt.Sprintf("timed out after %s: %s", timeout, msg)
			}
		}
		if res.Message != "" {
			msg = msg + "; " + res.Message
		}
		res.Message = msg
	case res.Status == "":
		res.Status = res.DeviceStatus()
		if res.Status == "" {
			res.Status = StatusError
			res.Message = "probe returned no verdict"
		}
	case !res.Status.Valid():
		res.Message = fmt.Sprintf("probe returned invalid status %q; %s", res.Status, res.Message)
		res.Status = StatusError
	}
	if res.Message == "" && res.Status != StatusPass {
		res.Message = res.Summary()
	}
	r.metrics.Observe(res)
	return res, nil
}

// runGuarded runs the probe in its own goroutine so that a stuck probe cannot hold the
// caller past its deadline, and turns a panic into an error.
func runGuarded(ctx context.Context, name string, pr Probe, p Params) (Result, error) {
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{err: fmt.Errorf("probe %s panicked: %v", name, v)}
			}
		}()
		res, err := pr.Run(ctx, p)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-ctx.Done():
		// Give a probe that honours its context a moment to return its own error.
		select {
		case o := <-done:
			return o.res, o.err
		case <-time.After(2 * time.Second):
			return Result{}, fmt.Errorf("probe %s did not return: %w", name, ctx.Err())
		}
	}
}
