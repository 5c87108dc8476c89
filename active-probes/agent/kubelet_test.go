package agent_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// kubelet serves the kubelet's PodResources API (the generated service of
// k8s.io/kubelet) on a unix socket, answering List with the pods a test sets.
type kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	socket string

	mu   sync.Mutex
	pods []*podresourcesv1.PodResources
}

func startKubelet(t *testing.T) *kubelet {
	t.Helper()
	// A short directory: a unix socket's path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "kubelet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	k := &kubelet{socket: filepath.Join(dir, "kubelet.sock")}
	ln, err := net.Listen("unix", k.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, k)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return k
}

func (k *kubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

func (k *kubelet) setPods(pods ...*podresourcesv1.PodResources) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods = pods
}

// podWith is a pod of namespace training whose one container holds devices
// (resource name -> device ids) and DRA devices (driver -> device names).
func podWith(name string, devices map[string][]string, dra map[string][]string) *podresourcesv1.PodResources {
	c := &podresourcesv1.ContainerResources{Name: "main"}
	for res, ids := range devices {
		c.Devices = append(c.Devices, &podresourcesv1.ContainerDevices{ResourceName: res, DeviceIds: ids})
	}
	for driver, names := range dra {
		dr := &podresourcesv1.DynamicResource{ClaimName: name + "-claim", ClaimNamespace: "training"}
		for _, n := range names {
			dr.ClaimResources = append(dr.ClaimResources, &podresourcesv1.ClaimResource{DriverName: driver, PoolName: "gpu-1", DeviceName: n})
		}
		c.DynamicResources = append(c.DynamicResources, dr)
	}
	return &podresourcesv1.PodResources{Name: name, Namespace: "training", Containers: []*podresourcesv1.ContainerResources{c}}
}
