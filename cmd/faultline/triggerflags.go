package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/active-probes/agentapi"
	"github.com/faultline-dev/faultline/active-probes/probe"
	"github.com/faultline-dev/faultline/controller/autopilot"
	"github.com/faultline-dev/faultline/controller/proberun"
	"github.com/faultline-dev/faultline/controller/trigger"
)

// inClusterTokenFile is where Kubernetes mounts a pod's ServiceAccount token.
const inClusterTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// probeFlags are the controller's probe-trigger settings (the agents to reach,
// schedules, confirmation and recovery): they make the trigger.Config.
type probeFlags struct {
	port           int
	static         map[string]string
	agentSelector  string
	agentNS        string
	caFile         string
	serverName     string
	nodeCerts      bool
	tokenFile      string
	schedules      map[string]string
	nodeSelector   string
	confirmTimeout time.Duration
	recoverEvery   time.Duration
	idleEvery      time.Duration
	noHealthLabel  bool
	batch          int
	pvc            bool
	autopilot      bool
	deepEvery      time.Duration
}

func (p *probeFlags) register(f *pflag.FlagSet) {
	f.IntVar(&p.port, "probe-agent-port", agentapi.DefaultPort, "HTTPS port of the in-cluster probe agents, at their pods' addresses (0: only --probe-agent URLs)")
	f.StringVar(&p.caFile, "probe-agent-ca-file", "", "CA that signed the agents' serving certificate: turns on the in-cluster agents (found by --probe-agent-selector), called over TLS verified against it")
	f.StringVar(&p.serverName, "probe-agent-server-name", "", "name the agents' shared certificate must carry (the chart's probeAgent.tls.mode=shared: the agent Service's DNS name); default the host of the URL")
	f.BoolVar(&p.nodeCerts, "probe-agent-node-certs", false, "each agent's certificate must name the node the controller calls, <node>.node.probe-agent.faultline.io (per-node certificates from the CSR API, signed with --probe-agent-ca-file's CA), instead of one shared name")
	f.StringVar(&p.agentSelector, "probe-agent-selector", "app.kubernetes.io/name=faultline,app.kubernetes.io/component=probe-agent", "label selector of the agent pods: a node is probed only through its Running and Ready agent pod")
	f.StringVar(&p.agentNS, "probe-agent-namespace", "", "namespace of the agent pods (default --namespace)")
	f.StringToStringVar(&p.static, "probe-agent", nil, "fixed agent URL for a node, node=URL (repeatable; local setups; https URLs are verified against --probe-agent-ca-file)")
	f.StringVar(&p.tokenFile, "probe-token-file", "", "bearer token sent to the agents (default: the pod's ServiceAccount token, else the kubeconfig's token)")
	f.StringToStringVar(&p.schedules, "probe-schedule", nil, "run a check on a schedule, check=interval[?param=value&...] (default: each non-invasive default check hourly; check=0 turns one off; nvml's expected_gpus defaults to each node's nvidia.com/gpu capacity)")
	f.StringVar(&p.nodeSelector, "probe-node-selector", "nvidia.com/gpu.present=true", "the GPU nodes (label selector): scheduled probes run on them (the agents' nodes), and they are the population of --budget-percent and --storm-share")
	f.DurationVar(&p.confirmTimeout, "probe-confirm-timeout", 15*time.Minute, "how long a rule's confirming probes may take before its onTimeout policy applies")
	f.DurationVar(&p.recoverEvery, "probe-recover-interval", 10*time.Minute, "how often a tainted node's recovery probes are retried")
	f.DurationVar(&p.idleEvery, "probe-idle-retry-interval", time.Minute, "how often invasive checks refused while pods hold a node's GPUs (confirming or recovery ones) are asked for again")
	f.BoolVar(&p.noHealthLabel, "no-health-label", false, "do not set the faultline.io/health node label")
	f.IntVar(&p.batch, "probe-batch", 10, "nodes probed at once in a run")
	f.BoolVar(&p.pvc, "pvc-probe", true, "offer the pvc check (claims in --namespace; needs the Role faultline-pvc-probe there)")
	f.BoolVar(&p.autopilot, "autopilot-compat", false, "IBM Autopilot compatibility: its check names (remapped, gpumem, gpupower, iperf) wherever a check is named, its node labels autopilot.ibm.com/gpuhealth and autopilot.ibm.com/dcgm.level.3, and its periodic deep checks (dcgm level 3, pciebw, dgemm) on idle nodes")
	f.DurationVar(&p.deepEvery, "autopilot-deep-interval", autopilot.DeepEvery, "with --autopilot-compat, how often each probe node gets the deep checks, spread over the interval, skipped while containers hold its GPUs (0: never)")
}

// eligible is the selector of the nodes that make up the budget's and the storm
// hold's population: the probes' GPU nodes, whether or not probes are enabled.
func (p *probeFlags) eligible() (labels.Selector, error) {
	sel, err := labels.Parse(p.nodeSelector)
	if err != nil {
		return nil, fmt.Errorf("--probe-node-selector: %w", err)
	}
	return sel, nil
}

// config makes the trigger configuration; the agent pods' informer it returns (nil
// when in-cluster agents are off) must be started.
func (p *probeFlags) config(rc *rest.Config, client kubernetes.Interface, namespace string) (trigger.Config, *proberun.AgentPods, error) {
	pc, err := p.triggers(rc)
	if err != nil || (pc.AgentURLs == nil && p.caFile == "") {
		return pc, nil, err
	}
	switch {
	case p.nodeCerts && p.serverName != "":
		return pc, nil, errors.New("--probe-agent-node-certs or --probe-agent-server-name, not both")
	case p.caFile != "" && p.nodeCerts:
		if pc.HTTP, err = proberun.NodeAgentClient(p.caFile); err != nil {
			return pc, nil, err
		}
	case p.caFile != "":
		if pc.HTTP, err = proberun.AgentClient(p.caFile, p.serverName); err != nil {
			return pc, nil, err
		}
	case p.serverName != "" || p.nodeCerts:
		return pc, nil, errors.New("--probe-agent-server-name and --probe-agent-node-certs need --probe-agent-ca-file")
	}
	if p.caFile == "" || p.port == 0 {
		return pc, nil, nil
	}
	pods, err := proberun.NewAgentPods(client, p.agentNamespace(namespace), p.agentSelector, p.port)
	if err != nil {
		return pc, nil, fmt.Errorf("--probe-agent-selector: %w", err)
	}
	pc.Agents = pods
	return pc, pods, nil
}

// agentNamespace is the namespace of the agent pods (and their ServiceAccount).
func (p *probeFlags) agentNamespace(namespace string) string {
	if p.agentNS != "" {
		return p.agentNS
	}
	return namespace
}

// triggers makes the settings of the trigger configuration that do not depend on
// where the agents are.
func (p *probeFlags) triggers(rc *rest.Config) (trigger.Config, error) {
	if p.caFile == "" && len(p.static) == 0 {
		// In-cluster agents serve TLS only: without their CA there is no one to call.
		return trigger.Config{}, nil
	}
	sel, err := labels.Parse(p.nodeSelector)
	if err != nil {
		return trigger.Config{}, fmt.Errorf("--probe-node-selector: %w", err)
	}
	pc := trigger.Config{NodeSelector: sel, ConfirmTimeout: p.confirmTimeout, RecoverEvery: p.recoverEvery, IdleEvery: p.idleEvery,
		NoHealthLabel: p.noHealthLabel, Batch: p.batch}
	var aliases map[string]proberun.Alias
	if p.autopilot {
		if p.deepEvery < 0 || (p.deepEvery > 0 && p.deepEvery < time.Minute) {
			return pc, fmt.Errorf("--autopilot-deep-interval %s: want at least 1m, or 0", p.deepEvery)
		}
		pc.Autopilot = &trigger.Autopilot{DeepEvery: p.deepEvery}
		aliases = autopilot.Aliases()
	}
	pc.Token, err = tokenSource(p.tokenFile, rc)
	if err != nil {
		return pc, err
	}
	scheds := map[string]string{}
	for _, s := range probe.Default().List() {
		if s.DefaultEnabled && !s.IsInvasive(nil) {
			scheds[s.Name] = "1h"
		}
	}
	for k, v := range p.schedules {
		scheds[k] = v
	}
	names := make([]string, 0, len(scheds))
	for k := range scheds {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		s, err := parseSchedule(name, scheds[name], aliases)
		if err != nil {
			return pc, fmt.Errorf("--probe-schedule %s=%s: %w", name, scheds[name], err)
		}
		if s.Every > 0 {
			pc.Schedules = append(pc.Schedules, s)
		}
	}
	pc.AgentURLs = p.static
	return pc, nil
}

// parseSchedule reads one --probe-schedule entry: an interval, then optionally
// the check's parameters as a query string ("1h?expected_gpus=8"), checked
// against the check's schema now rather than at the first round an hour later.
// The check may be one of aliases (Autopilot's names, with --autopilot-compat).
func parseSchedule(check, v string, aliases map[string]proberun.Alias) (trigger.Schedule, error) {
	target, fixed := check, probe.Params(nil)
	if a, ok := aliases[check]; ok {
		target, fixed = a.Check, a.Params
	}
	spec, ok := probe.Default().Get(target)
	if !ok {
		return trigger.Schedule{}, errors.New("unknown check")
	}
	every, query, _ := strings.Cut(v, "?")
	d, err := time.ParseDuration(every)
	if err != nil || d < 0 || (d > 0 && d < time.Minute) {
		return trigger.Schedule{}, errors.New("want a duration of at least 1m, or 0, then optionally ?param=value&...")
	}
	s := trigger.Schedule{Check: check, Every: d}
	if query == "" {
		return s, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return s, fmt.Errorf("parameters: %w", err)
	}
	s.Params = probe.Params{}
	for k, vs := range q {
		if len(vs) != 1 {
			return s, fmt.Errorf("parameter %s given %d times", k, len(vs))
		}
		s.Params[k] = vs[0]
	}
	p := fixed.Clone()
	if p == nil {
		p = probe.Params{}
	}
	for k, v := range s.Params {
		p[k] = v
	}
	if _, err := spec.Params.Resolve(p); err != nil {
		return s, err
	}
	return s, nil
}

// tokenSource reads the token file at every call (projected tokens rotate).
func tokenSource(file string, rc *rest.Config) (func() (string, error), error) {
	if file == "" && rc.BearerTokenFile != "" {
		file = rc.BearerTokenFile
	}
	if file == "" {
		if _, err := os.Stat(inClusterTokenFile); err == nil {
			file = inClusterTokenFile
		}
	}
	if file != "" {
		return func() (string, error) {
			b, err := os.ReadFile(file)
			if err != nil {
				return "", fmt.Errorf("probe token: %w", err)
			}
			return strings.TrimSpace(string(b)), nil
		}, nil
	}
	if rc.BearerToken != "" {
		tok := rc.BearerToken
		return func() (string, error) { return tok, nil }, nil
	}
	// Without a token the controller still starts; each probe run says why it failed.
	return func() (string, error) {
		return "", fmt.Errorf("no token for the probe agents: set --probe-token-file (the kubeconfig has no bearer token)")
	}, nil
}
