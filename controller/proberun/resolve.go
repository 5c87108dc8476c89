package proberun

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// AgentResolver finds a node's agent: a fixed URL when one is configured for the
// node (local setups, tests), else scheme://<node address>:<port>, the agent
// listening on the node's host network.
type AgentResolver struct {
	Static  map[string]string
	Scheme  string // default http
	Port    int    // default agent.DefaultPort
	Address func(ctx context.Context, node string) (string, error)
}

// Endpoint implements Resolver.
func (r AgentResolver) Endpoint(ctx context.Context, node string) (string, error) {
	if u := r.Static[node]; u != "" {
		return u, nil
	}
	if r.Address == nil {
		return "", fmt.Errorf("no agent address configured for node %s", node)
	}
	addr, err := r.Address(ctx, node)
	if err != nil {
		return "", err
	}
	scheme, port := r.Scheme, r.Port
	if scheme == "" {
		scheme = "http"
	}
	if port == 0 {
		port = 9402
	}
	return scheme + "://" + net.JoinHostPort(addr, strconv.Itoa(port)), nil
}
