package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// peerNodesTTL is how long a list of the agent nodes serves peer checks: a node that
// just joined waits at most this long to become a peer.
const peerNodesTTL = 30 * time.Second

// KubePeerNodes returns the addresses and host names (status.addresses) of the nodes
// that match selector (the nodes the agent runs on), for AllowList.PeerNodes: by
// default a check may aim only at another agent's node. The list is read from the
// apiserver's cache (resourceVersion 0) and kept for peerNodesTTL.
func KubePeerNodes(client kubernetes.Interface, selector string) func(context.Context) ([]string, error) {
	var (
		mu      sync.Mutex
		hosts   []string
		fetched time.Time
	)
	return func(ctx context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if hosts != nil && time.Since(fetched) < peerNodesTTL {
			return hosts, nil
		}
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
		if err != nil {
			return nil, fmt.Errorf("list nodes %q: %w", selector, err)
		}
		out := []string{}
		for _, n := range list.Items {
			for _, addr := range n.Status.Addresses {
				out = append(out, addr.Address)
			}
		}
		hosts, fetched = out, time.Now()
		return hosts, nil
	}
}
