// Package leaderendpoint publishes the leader's address as the only endpoint of a
// named discovery.k8s.io/v1 EndpointSlice behind a selector-less Service, so that
// clients of that Service (the collector pushing lines to the intake) reach the
// leader alone. The slice exists beforehand (the chart creates it), so the
// controller needs only get and update on that one name.
package leaderendpoint

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// ManagedBy is the value of the slice's endpointslice.kubernetes.io/managed-by
// label: it keeps Kubernetes' EndpointSlice controllers off the slice.
const ManagedBy = "faultline.io-controller"

// Interval is how often Keep checks that the slice still names this leader.
const Interval = 30 * time.Second

// Publish makes address:port (TCP, named portName) the only endpoint of the
// EndpointSlice namespace/name, ready, keeping its labels (the
// kubernetes.io/service-name that ties it to its Service). It writes only when
// the slice says something else, and retries an update that lost a race.
func Publish(ctx context.Context, client kubernetes.Interface, namespace, name, address string, port int32, portName string) error {
	addr, err := netip.ParseAddr(address)
	if err != nil {
		return fmt.Errorf("leader endpoint %s/%s: address %q: %w", namespace, name, address, err)
	}
	addr = addr.Unmap() // an IPv4 address written as IPv6 is published as IPv4
	slices := client.DiscoveryV1().EndpointSlices(namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := slices.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("EndpointSlice %s/%s does not exist: it is created with the controller's Service, not by the controller", namespace, name)
		}
		if err != nil {
			return err
		}
		if m := s.Labels[discoveryv1.LabelManagedBy]; m != "" && m != ManagedBy {
			return fmt.Errorf("EndpointSlice %s/%s is managed by %q, not %q: its endpoints would be overwritten", namespace, name, m, ManagedBy)
		}
		if want := addressType(addr); s.AddressType != want {
			return fmt.Errorf("EndpointSlice %s/%s holds %s addresses, the leader's address %s is %s", namespace, name, s.AddressType, address, want)
		}
		endpoints := []discoveryv1.Endpoint{{
			Addresses: []string{addr.String()},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false),
			},
		}}
		ports := []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}}
		if apiequality.Semantic.DeepEqual(s.Endpoints, endpoints) && apiequality.Semantic.DeepEqual(s.Ports, ports) {
			return nil
		}
		s.Endpoints, s.Ports = endpoints, ports
		_, err = slices.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("publish the leader's endpoint %s:%d in %s/%s: %w", address, port, namespace, name, err)
	}
	return nil
}

// Keep publishes at once, then every Interval again (a slice another leader
// overwrote, or someone edited, is set back), until ctx ends. It does not clear
// the endpoint when it returns: the next leader overwrites it, and until then a
// dead leader's address stops answering, which its clients retry. Failures are
// logged and retried at the next check.
func Keep(ctx context.Context, client kubernetes.Interface, namespace, name, address string, port int32, portName string, log *slog.Logger) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := Publish(ctx, client, namespace, name, address, port, portName); err != nil && ctx.Err() == nil {
			log.Error("leader endpoint not published", "err", err)
		}
	}, Interval)
}

func addressType(a netip.Addr) discoveryv1.AddressType {
	if a.Is4() {
		return discoveryv1.AddressTypeIPv4
	}
	return discoveryv1.AddressTypeIPv6
}
