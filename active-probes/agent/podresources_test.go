package agent_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/test/testenv"
)

// The guard asks the kubelet over gRPC on its unix socket and counts every GPU
// device the kubelet allocated: whole GPUs, MIG slices, renamed resources of a
// configured prefix and DRA devices of a GPU driver; a NIC, a DRA device of another
// driver or a container holding no device is not a GPU.
func TestKubeletGPUPods(t *testing.T) {
	k := testenv.StartPodResources(t)
	k.SetPods(
		testenv.PodWithDevices("training", "whole", map[string][]string{"nvidia.com/gpu": {"GPU-a", "GPU-b"}}, nil),
		testenv.PodWithDevices("training", "mig", map[string][]string{"nvidia.com/mig-1g.10gb": {"MIG-1"}}, nil),
		testenv.PodWithDevices("training", "dra", nil, map[string][]string{"gpu.nvidia.com": {"gpu-0"}}),
		testenv.PodWithDevices("training", "amd", map[string][]string{"amd.com/gpu": {"0"}}, nil),
		testenv.PodWithDevices("training", "nic", map[string][]string{"rdma/hca_shared_devices_a": {"mlx5_0"}}, map[string][]string{"dra.example.com": {"nic-0"}}),
		testenv.PodWithDevices("training", "empty-grant", map[string][]string{"nvidia.com/gpu": nil}, nil),
		&podresourcesv1.PodResources{Name: "cpu-only", Namespace: "web", Containers: []*podresourcesv1.ContainerResources{{Name: "app", CpuIds: []int64{2, 3}}}},
	)
	ctx := context.Background()
	got, err := agent.KubeletGPUPods(agent.GPUResources{Socket: k.Socket})(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"training/dra (DRA gpu.nvidia.com: 1)", "training/mig (nvidia.com/mig-1g.10gb: 1)", "training/whole (nvidia.com/gpu: 2)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("default resources: got %q, want %q", got, want)
	}

	got, err = agent.KubeletGPUPods(agent.GPUResources{Socket: k.Socket, Prefixes: []string{"amd.com/gpu"}, DRADrivers: []string{}})(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"training/amd (amd.com/gpu: 1)"}; !reflect.DeepEqual(got, want) {
		t.Errorf("configured prefixes: got %q, want %q", got, want)
	}

	k.SetPods()
	if got, err := agent.KubeletGPUPods(agent.GPUResources{Socket: k.Socket})(ctx); err != nil || len(got) != 0 {
		t.Errorf("idle node: %q %v", got, err)
	}

	_, err = agent.KubeletGPUPods(agent.GPUResources{Socket: k.Socket + ".missing"})(ctx)
	if err == nil || !strings.Contains(err.Error(), "kubelet pod resources") {
		t.Errorf("no kubelet: %v", err)
	}
}
