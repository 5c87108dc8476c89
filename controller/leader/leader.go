// Package leader runs the controller's work only while it holds a Lease, so two
// replicas never act at once and a standby takes over within a lease duration.
package leader

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config of the election.
type Config struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string // the Lease name
	Identity  string // this replica (pod name)
	// Durations; defaults 15s, 10s, 2s as in Kubernetes' own controllers.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// OnNewLeader is told who leads (also when it is another replica).
	OnNewLeader func(identity string)
}

// Run blocks until ctx is done, calling lead with a context that is cancelled when
// leadership is lost. It campaigns again after losing the lease, and only once lead
// has returned: the old term's work (its last saves) never overlaps the next one.
func Run(ctx context.Context, c Config, lead func(ctx context.Context)) error {
	if c.Identity == "" || c.Name == "" || c.Namespace == "" {
		return fmt.Errorf("leader election needs a namespace, a lease name and an identity")
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 15 * time.Second
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = 10 * time.Second
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = 2 * time.Second
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
		Client:     c.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
	}
	for ctx.Err() == nil {
		started := make(chan context.Context, 1)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   c.LeaseDuration,
			RenewDeadline:   c.RenewDeadline,
			RetryPeriod:     c.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            c.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				// client-go starts this in a goroutine it does not wait for; lead runs
				// below instead, where the loop can wait for it.
				OnStartedLeading: func(lctx context.Context) { started <- lctx },
				OnStoppedLeading: func() {},
				OnNewLeader: func(id string) {
					if c.OnNewLeader != nil {
						c.OnNewLeader(id)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		done := make(chan struct{})
		go func() { defer close(done); le.Run(ctx) }() // returns when leadership is lost or ctx is done
		select {
		case lctx := <-started:
			lead(lctx) // lctx ends with the term
			<-done
		case <-done:
		}
	}
	return nil
}
