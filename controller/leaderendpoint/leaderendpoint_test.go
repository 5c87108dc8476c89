package leaderendpoint_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/controller/leaderendpoint"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

const (
	ns       = "faultline"
	sa       = "faultline-controller"
	portName = "intake"
	port     = int32(9404)
)

// fixture is one apiserver, and the controller's client bound to a Role that grants
// get and update on the slice "intake" only (what the chart grants).
type fixture struct {
	admin kubernetes.Interface
	ctrl  kubernetes.Interface
}

func setup(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Start(t, testenv.Options{Kubernetes: true})
	f := &fixture{admin: env.Clientset()}
	token := env.ServiceAccountToken(t, ns, sa)
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "intake-endpoint", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"},
			ResourceNames: []string{"intake"}, Verbs: []string{"get", "update"}}},
	}
	if _, err := f.admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.RESTConfigForToken(token))
	if err != nil {
		t.Fatal(err)
	}
	f.ctrl = cs
	for _, name := range []string{"intake", "other"} {
		f.slice(t, name, discoveryv1.AddressTypeIPv4, map[string]string{discoveryv1.LabelManagedBy: leaderendpoint.ManagedBy})
	}
	// The authorizer learns the binding a moment after it is created.
	eventually.NoError(t, 15*time.Second, "the controller may read the slice", func() error {
		_, err := f.ctrl.DiscoveryV1().EndpointSlices(ns).Get(ctx, "intake", metav1.GetOptions{})
		return err
	})
	return f
}

// slice creates, as admin, the Service name and its empty EndpointSlice name, as
// the chart does.
func (f *fixture) slice(t *testing.T, name string, at discoveryv1.AddressType, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: portName, Port: port, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l := map[string]string{discoveryv1.LabelServiceName: name, "app.kubernetes.io/part-of": "faultline"}
	for k, v := range labels {
		l[k] = v
	}
	if _, err := f.admin.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: l},
		AddressType: at,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) read(t *testing.T, name string) *discoveryv1.EndpointSlice {
	t.Helper()
	s, err := f.admin.DiscoveryV1().EndpointSlices(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// published fails unless the slice's only endpoint is address, ready, on the port.
func published(t *testing.T, s *discoveryv1.EndpointSlice, address string) {
	t.Helper()
	if len(s.Endpoints) != 1 || len(s.Endpoints[0].Addresses) != 1 || s.Endpoints[0].Addresses[0] != address {
		t.Fatalf("endpoints %+v, want only %s", s.Endpoints, address)
	}
	if c := s.Endpoints[0].Conditions; c.Ready == nil || !*c.Ready {
		t.Errorf("endpoint %s not ready: %+v", address, c)
	}
	if len(s.Ports) != 1 || s.Ports[0].Port == nil || *s.Ports[0].Port != port || s.Ports[0].Name == nil || *s.Ports[0].Name != portName ||
		s.Ports[0].Protocol == nil || *s.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports %+v, want only %s %d/TCP", s.Ports, portName, port)
	}
	if s.Labels[discoveryv1.LabelServiceName] != "intake" || s.Labels["app.kubernetes.io/part-of"] != "faultline" ||
		s.Labels[discoveryv1.LabelManagedBy] != leaderendpoint.ManagedBy {
		t.Errorf("labels not kept: %v", s.Labels)
	}
}

// TestPublish: with get and update on its slice only, the controller publishes its
// address there; a second leader's publish replaces it; an unchanged publish writes
// nothing; any other slice, present or not, is refused.
func TestPublish(t *testing.T) {
	f := setup(t)
	ctx := context.Background()

	if err := leaderendpoint.Publish(ctx, f.ctrl, ns, "intake", "10.0.0.1", port, portName); err != nil {
		t.Fatal(err)
	}
	published(t, f.read(t, "intake"), "10.0.0.1")

	// The next leader overwrites the previous one's address: one endpoint only.
	if err := leaderendpoint.Publish(ctx, f.ctrl, ns, "intake", "10.0.0.2", port, portName); err != nil {
		t.Fatal(err)
	}
	s := f.read(t, "intake")
	published(t, s, "10.0.0.2")
	if err := leaderendpoint.Publish(ctx, f.ctrl, ns, "intake", "10.0.0.2", port, portName); err != nil {
		t.Fatal(err)
	}
	if rv := f.read(t, "intake").ResourceVersion; rv != s.ResourceVersion {
		t.Errorf("an unchanged publish wrote the slice (resourceVersion %s -> %s)", s.ResourceVersion, rv)
	}

	// The Role names one slice: another in the same namespace is not the controller's.
	err := leaderendpoint.Publish(ctx, f.ctrl, ns, "other", "10.0.0.1", port, portName)
	if !apierrors.IsForbidden(err) {
		t.Errorf("publish to another slice: %v, want forbidden", err)
	}
	if _, err := f.ctrl.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list slices: %v, want forbidden", err)
	}
	if got := f.read(t, "other"); len(got.Endpoints) != 0 {
		t.Errorf("the other slice was written: %+v", got.Endpoints)
	}

	// A slice that does not exist is never created: it says so.
	err = leaderendpoint.Publish(ctx, f.admin, ns, "absent", "10.0.0.1", port, portName)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("publish to a missing slice: %v, want an error saying it does not exist", err)
	}
	if _, err := f.admin.DiscoveryV1().EndpointSlices(ns).Get(ctx, "absent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the missing slice: %v, want not found", err)
	}
}

// TestPublishRefuses: a slice Kubernetes' controllers manage, an address of the
// other family, or an address that is not one are refused, and nothing is written.
func TestPublishRefuses(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.slice(t, "selected", discoveryv1.AddressTypeIPv4, map[string]string{discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"})
	for _, c := range []struct{ name, slice, address, want string }{
		{"managed by another", "selected", "10.0.0.1", "managed by"},
		{"IPv6 on an IPv4 slice", "intake", "fd00::1", "IPv6"},
		{"not an address", "intake", "controller-0", "address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := leaderendpoint.Publish(ctx, f.admin, ns, c.slice, c.address, port, portName)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("publish %s to %s: %v, want an error with %q", c.address, c.slice, err, c.want)
			}
			if s := f.read(t, c.slice); len(s.Endpoints) != 0 {
				t.Errorf("written: %+v", s.Endpoints)
			}
		})
	}
	// An IPv4 address written as IPv6 is the IPv4 address.
	if err := leaderendpoint.Publish(ctx, f.ctrl, ns, "intake", "::ffff:10.0.0.3", port, portName); err != nil {
		t.Fatal(err)
	}
	published(t, f.read(t, "intake"), "10.0.0.3")
}

// TestKeep: Keep publishes at once, sets the slice back to itself at its next check
// after another leader wrote it, and returns when its context ends, leaving the
// endpoint in place.
func TestKeep(t *testing.T) {
	f := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		leaderendpoint.Keep(ctx, f.ctrl, ns, "intake", "10.0.0.4", port, portName, slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(done)
	}()
	eventually.True(t, 15*time.Second, "the leader's address is published", func() bool {
		s := f.read(t, "intake")
		return len(s.Endpoints) == 1 && s.Endpoints[0].Addresses[0] == "10.0.0.4"
	})
	if err := leaderendpoint.Publish(context.Background(), f.admin, ns, "intake", "10.0.0.5", port, portName); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, leaderendpoint.Interval+15*time.Second, "the next check publishes the address again", func() bool {
		s := f.read(t, "intake")
		return len(s.Endpoints) == 1 && s.Endpoints[0].Addresses[0] == "10.0.0.4"
	})
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Keep did not return when its context ended")
	}
	published(t, f.read(t, "intake"), "10.0.0.4")
}
