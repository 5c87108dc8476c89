package testenv

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// PodResources serves the kubelet's PodResources API (the generated gRPC service of
// k8s.io/kubelet) on a unix socket, as the kubelet does for the probe agent's
// GPUs-in-use guard; List answers with the pods a test sets (none at first). There is
// no kubelet in the harness: this is the API's server side, speaking the real
// protocol.
type PodResources struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	// Socket is the path to give the agent (--pod-resources-socket).
	Socket string

	mu   sync.Mutex
	pods []*podresourcesv1.PodResources
}

// StartPodResources serves a PodResources API until the test ends.
func StartPodResources(t TB) *PodResources {
	t.Helper()
	// A short directory: a unix socket's path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "kubelet")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	k := &PodResources{Socket: filepath.Join(dir, "kubelet.sock")}
	ln, err := net.Listen("unix", k.Socket)
	if err != nil {
		t.Fatalf("testenv: pod resources socket: %v", err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, k)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return k
}

// List implements the PodResources API.
func (k *PodResources) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

// SetPods sets what List answers.
func (k *PodResources) SetPods(pods ...*podresourcesv1.PodResources) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods = pods
}

// PodWithDevices is a pod whose one container holds devices (device-plugin resource
// name -> device ids) and DRA devices (driver -> device names).
func PodWithDevices(namespace, name string, devices, dra map[string][]string) *podresourcesv1.PodResources {
	c := &podresourcesv1.ContainerResources{Name: "main"}
	for res, ids := range devices {
		c.Devices = append(c.Devices, &podresourcesv1.ContainerDevices{ResourceName: res, DeviceIds: ids})
	}
	for driver, names := range dra {
		dr := &podresourcesv1.DynamicResource{ClaimName: name + "-claim", ClaimNamespace: namespace}
		for _, n := range names {
			dr.ClaimResources = append(dr.ClaimResources, &podresourcesv1.ClaimResource{DriverName: driver, DeviceName: n})
		}
		c.DynamicResources = append(c.DynamicResources, dr)
	}
	return &podresourcesv1.PodResources{Name: name, Namespace: namespace, Containers: []*podresourcesv1.ContainerResources{c}}
}
