package probe

import (
	"context"
	"fmt"
	"time"
)

// BusyError says an invasive probe was refused because another one holds the node.
// Invasive runs are refused rather than queued: a second GPU stress test waiting
// behind the first would run long after its caller gave up, on a node still hot.
type BusyError struct {
	Node    string
	Running string // what holds the claim: the check(s) of the run
	Since   time.Time
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("invasive probe %s has been running on %s since %s; one at a time",
		e.Running, e.Node, e.Since.UTC().Format(time.RFC3339))
}

// Claim is a runner's one invasive slot, held by one run until Release.
type Claim struct {
	r *Runner
}

// ClaimInvasive makes the caller the node's one invasive run (what names it, for the
// error others get) until the claim is released; it fails with *BusyError while
// another run holds it. This is the only invasive exclusion: the agent claims before
// it runs a request's checks (passing the claim to Run with WithClaim), and Run claims
// by itself for an invasive probe run without one.
func (r *Runner) ClaimInvasive(what string) (*Claim, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.claimedBy != "" {
		return nil, &BusyError{Node: r.cfg.Node, Running: r.claimedBy, Since: r.claimedAt}
	}
	r.claimedBy, r.claimedAt = what, r.now()
	return &Claim{r: r}, nil
}

// Release frees the slot; releasing twice is harmless.
func (c *Claim) Release() {
	if c == nil || c.r == nil {
		return
	}
	c.r.mu.Lock()
	c.r.claimedBy = ""
	c.r.mu.Unlock()
	c.r = nil
}

type claimKey struct{}

// WithClaim returns ctx carrying claim, so Run of an invasive probe under it does not
// claim again.
func WithClaim(ctx context.Context, c *Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// holds reports whether ctx carries a live claim of r.
func (r *Runner) holds(ctx context.Context) bool {
	c, _ := ctx.Value(claimKey{}).(*Claim)
	return c != nil && c.r == r
}
