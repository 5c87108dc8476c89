package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// GPUPods lists the pods on a node that hold GPUs, as "namespace/name"; an invasive
// probe must not run under them.
type GPUPods func(ctx context.Context) ([]string, error)

// DefaultPodResourcesSocket is where the kubelet serves its PodResources API.
const DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// GPUResources says which devices the kubelet reports count as GPUs.
type GPUResources struct {
	// Socket is the kubelet's PodResources socket (default DefaultPodResourcesSocket).
	Socket string
	// Prefixes of device-plugin resource names that are GPUs (default
	// DefaultGPUResourcePrefixes): a resource counts when its name equals a prefix or
	// starts with it.
	Prefixes []string
	// DRADrivers are the Dynamic Resource Allocation drivers whose devices are GPUs
	// (default DefaultGPUDRADrivers).
	DRADrivers []string
	// Timeout bounds one List call (default 10s).
	Timeout time.Duration
}

// Defaults of GPUResources: NVIDIA's device plugin (whole GPUs and every MIG profile,
// nvidia.com/mig-1g.10gb ...) and NVIDIA's DRA driver.
var (
	DefaultGPUResourcePrefixes = []string{"nvidia.com/gpu", "nvidia.com/mig-"}
	DefaultGPUDRADrivers       = []string{"gpu.nvidia.com"}
)

// maxPodResourcesMessage bounds the kubelet's answer (the kubelet's own client uses
// the same 16 MiB).
const maxPodResourcesMessage = 16 << 20

// KubeletGPUPods asks the kubelet which containers on this node hold GPU devices
// (the PodResources List RPC): what the kubelet allocated, whatever the pod spec
// says, so GPUs held through MIG profiles, renamed resources or DRA claims count too,
// and a pod the apiserver no longer lists but whose containers still run is seen.
func KubeletGPUPods(cfg GPUResources) GPUPods {
	if cfg.Socket == "" {
		cfg.Socket = DefaultPodResourcesSocket
	}
	if cfg.Prefixes == nil {
		cfg.Prefixes = DefaultGPUResourcePrefixes
	}
	if cfg.DRADrivers == nil {
		cfg.DRADrivers = DefaultGPUDRADrivers
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return func(ctx context.Context) ([]string, error) {
		conn, err := grpc.NewClient("unix://"+cfg.Socket,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPodResourcesMessage)))
		if err != nil {
			return nil, fmt.Errorf("kubelet pod resources %s: %w", cfg.Socket, err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			return nil, fmt.Errorf("kubelet pod resources %s: list: %w", cfg.Socket, err)
		}
		var out []string
		for _, p := range resp.GetPodResources() {
			if what := cfg.gpusHeld(p); what != "" {
				out = append(out, p.GetNamespace()+"/"+p.GetName()+" ("+what+")")
			}
		}
		sort.Strings(out)
		return out, nil
	}
}

// gpusHeld says which GPU devices the pod's containers hold ("" for none), e.g.
// "nvidia.com/gpu: 2 devices" or "DRA gpu.nvidia.com: gpu-0".
func (cfg GPUResources) gpusHeld(p *podresourcesv1.PodResources) string {
	held := map[string]int{}
	for _, c := range p.GetContainers() {
		for _, d := range c.GetDevices() {
			if len(d.GetDeviceIds()) > 0 && hasPrefix(d.GetResourceName(), cfg.Prefixes) {
				held[d.GetResourceName()] += len(d.GetDeviceIds())
			}
		}
		for _, dr := range c.GetDynamicResources() {
			for _, cr := range dr.GetClaimResources() {
				if contains(cfg.DRADrivers, cr.GetDriverName()) {
					held["DRA "+cr.GetDriverName()]++
				}
			}
		}
	}
	if len(held) == 0 {
		return ""
	}
	parts := make([]string, 0, len(held))
	for name, n := range held {
		parts = append(parts, fmt.Sprintf("%s: %d", name, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
