package chart

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/faultline-dev/faultline/test/testenv"
)

// ingressTo says who may reach port of a pod with podLabels under objs' NetworkPolicies:
// covered is whether any policy isolates the pod for ingress (otherwise anyone may),
// open whether a rule admits every source, and peers the sources the rules name.
func ingressTo(t *testing.T, objs objects, podLabels map[string]string, port int32) (covered, open bool, peers []networkingv1.NetworkPolicyPeer) {
	t.Helper()
	for _, u := range objs.ofKind("NetworkPolicy") {
		np := convert[networkingv1.NetworkPolicy](t, u)
		sel := labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels)
		if len(np.Spec.PodSelector.MatchExpressions) > 0 || !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		for _, pt := range np.Spec.PolicyTypes {
			covered = covered || pt == networkingv1.PolicyTypeIngress
		}
		for _, r := range np.Spec.Ingress {
			match := len(r.Ports) == 0
			for _, p := range r.Ports {
				match = match || (p.Port != nil && p.Port.IntVal == port)
			}
			if !match {
				continue
			}
			if len(r.From) == 0 {
				open = true
			}
			peers = append(peers, r.From...)
		}
	}
	return covered, open, peers
}

// TestNetworkPolicies: every port of every pod the chart runs is behind a
// NetworkPolicy by default, and each admits only the peers that need it: the
// collector's OTLP port the exporters, the controller's intake the collector, the
// agents' API port the controller, the metrics ports and the controller's API only
// the peers the values name; only the agents' iperf3 port is open (its peer is
// another agent, on the host network).
func TestNetworkPolicies(t *testing.T) {
	testenv.Integration(t)
	objs := parse(t, render(t, caseNamed(t, "defaults")))
	pods := podTemplates(t, objs)
	labelsOf := func(w string) map[string]string {
		tmpl := pods[w]
		if tmpl == nil {
			t.Fatalf("no %s", w)
		}
		return tmpl.Labels
	}
	type want struct {
		peers []string // the workloads allowed in, "open" for anyone
	}
	expect := map[string]map[int32]want{
		"Deployment/faultline-controller":     {9401: {}, 9404: {peers: []string{"Deployment/faultline-otel-collector"}}},
		"DaemonSet/faultline-dmesg-exporter":  {9400: {}},
		"Deployment/faultline-otel-collector": {4318: {peers: []string{"DaemonSet/faultline-dmesg-exporter"}}, 8888: {}},
		"DaemonSet/faultline-probe-agent":     {9402: {peers: []string{"Deployment/faultline-controller"}}, 5201: {peers: []string{"open"}}},
	}
	for w, tmpl := range pods {
		ports := expect[w]
		if ports == nil {
			t.Errorf("%s: no expectation; add its ports here", w)
			continue
		}
		for _, c := range tmpl.Spec.Containers {
			for _, p := range c.Ports {
				exp, ok := ports[p.ContainerPort]
				if !ok {
					t.Errorf("%s port %d: no expectation", w, p.ContainerPort)
					continue
				}
				covered, open, peers := ingressTo(t, objs, tmpl.Labels, p.ContainerPort)
				if !covered {
					t.Errorf("%s port %d: no NetworkPolicy isolates it", w, p.ContainerPort)
					continue
				}
				var got []string
				if open {
					got = append(got, "open")
				}
				for _, peer := range peers {
					if peer.NamespaceSelector != nil || peer.IPBlock != nil || peer.PodSelector == nil {
						got = append(got, fmt.Sprintf("%+v", peer))
						continue
					}
					sel := labels.SelectorFromSet(peer.PodSelector.MatchLabels)
					for other, ot := range pods {
						if sel.Matches(labels.Set(ot.Labels)) {
							got = append(got, other)
						}
					}
				}
				sort.Strings(got)
				if strings.Join(got, ",") != strings.Join(exp.peers, ",") {
					t.Errorf("%s port %d admits %v, want %v", w, p.ContainerPort, got, exp.peers)
				}
			}
		}
	}

	// The values' peers are what they add, on the port they are for.
	ns := "monitoring"
	with := parse(t, render(t, renderCase{name: "netpol-from", release: "faultline", namespace: "faultline", sets: []string{
		"controller.networkPolicy.from[0].namespaceSelector.matchLabels.team=" + ns,
		"exporter.networkPolicy.from[0].namespaceSelector.matchLabels.team=" + ns,
		"collector.networkPolicy.from[0].namespaceSelector.matchLabels.team=" + ns,
	}}))
	for w, port := range map[string]int32{"Deployment/faultline-controller": 9401, "DaemonSet/faultline-dmesg-exporter": 9400,
		"Deployment/faultline-otel-collector": 8888} {
		covered, open, peers := ingressTo(t, with, labelsOf(w), port)
		if !covered || open || len(peers) != 1 || peers[0].NamespaceSelector == nil || peers[0].NamespaceSelector.MatchLabels["team"] != ns {
			t.Errorf("%s port %d with networkPolicy.from: covered=%v open=%v peers %+v", w, port, covered, open, peers)
		}
	}
	// The collector's OTLP port still admits the exporters only.
	if _, open, peers := ingressTo(t, with, labelsOf("Deployment/faultline-otel-collector"), 4318); open || len(peers) != 1 || peers[0].NamespaceSelector != nil {
		t.Errorf("collector OTLP port with collector.networkPolicy.from: open=%v peers %+v", open, peers)
	}
	// The controller's intake still admits the collector only.
	if _, open, peers := ingressTo(t, with, labelsOf("Deployment/faultline-controller"), 9404); open || len(peers) != 1 || peers[0].NamespaceSelector != nil {
		t.Errorf("controller intake port with controller.networkPolicy.from: open=%v peers %+v", open, peers)
	}
}
