package proberun

import (
	"context"
	"fmt"
)

// AgentResolver finds a node's agent: a fixed URL when one is configured for the
// node (local setups, tests), else the node's agent pod (AgentPods). A node with
// neither gets an error wrapping ErrNoAgent: the controller calls no address it
// was not given by its flags or by the apiserver.
type AgentResolver struct {
	Static map[string]string
	Pods   Resolver
}

// Endpoint implements Resolver.
func (r AgentResolver) Endpoint(ctx context.Context, node string) (string, error) {
	if u := r.Static[node]; u != "" {
		return u, nil
	}
	if r.Pods == nil {
		return "", fmt.Errorf("%w on node %s: no agent URL configured for it (--probe-agent), and in-cluster agents are off", ErrNoAgent, node)
	}
	return r.Pods.Endpoint(ctx, node)
}
