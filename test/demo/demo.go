// Package demo is faultline-demo (cmd/faultline-demo, started by make demo): faultline's
// main job on one machine, with the real parts. It starts etcd + kube-apiserver, Loki and
// the OpenTelemetry Collector on 127.0.0.1 (the project's test harness, test/testenv, with
// the cached components), registers simulated GPU nodes, runs one dmesg-exporter per node
// reading its own kmsg-format file, the controller (both as processes of the faultline
// binary), and one probe agent per node, then plays a scenario and narrates it. With Once
// it checks every outcome and returns an error if one did not hold; otherwise it stays up
// until ctx ends, then cleans up.
//
// It lives apart from cmd/faultline so that the production binary links neither the
// harness nor the testing package.
//
// Files: demo.go runs it (options, narration, summary); cluster.go sets up the
// apiserver's side (nodes, ServiceAccounts, RBAC); components.go starts faultline's
// processes and agents; scenario.go plays the faults and checks the outcomes; query.go
// reads the results back (the controller API, Loki, the Nodes).
package demo

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/rules/packs"
	"github.com/faultline-dev/faultline/test/testenv"
)

//go:embed packs/demo.yaml
var demoPack []byte

// Options configure Run.
type Options struct {
	// Once plays the scenario, checks every outcome, prints a summary and returns.
	Once bool
	Out  io.Writer
	// Binary is the faultline executable the exporters and the controller run as
	// (default: the faultline next to this program's executable, else on $PATH).
	Binary string
	// Dir holds the components' data, logs and the kubeconfig (default: a new
	// temporary directory, removed at the end).
	Dir string
	// Nodes is the number of simulated GPU nodes (default DefaultNodes, at least
	// DefaultNodes: the scenario uses each).
	Nodes int
	// StepTimeout bounds each step of the scenario (default 90s).
	StepTimeout time.Duration
}

const ns = "faultline"

// DefaultNodes is the number of simulated GPU nodes of a run (Options.Nodes).
const DefaultNodes = 7

// demo is one run.
type demo struct {
	o           Options
	out         io.Writer
	tb          *runTB
	env         *testenv.Env
	cs          kubernetes.Interface
	nodes       []string
	kmsg        map[string]*kmsgFile
	machines    map[string]*machine   // by node
	tokens      map[string]nodeTokens // by node
	probeToken  string                // the file of the controller's token for the agents
	api         string                // controller API
	apiToken    string                // a faultline-operator's token
	viewerToken string                // a faultline-viewer's
	start       time.Time
	results     []result
}

type result struct {
	what string
	ok   bool
	note string
}

// Run runs the demo.
func Run(ctx context.Context, o Options) (err error) {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.Nodes < DefaultNodes {
		return fmt.Errorf("demo: at least %d nodes", DefaultNodes)
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 90 * time.Second
	}
	if o.Binary == "" {
		if o.Binary, err = faultlineBinary(); err != nil {
			return err
		}
	}
	keep := o.Dir != ""
	if !keep {
		if o.Dir, err = os.MkdirTemp("", "faultline-demo-"); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "logs"), 0o755); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(o.Dir, "logs", "harness.log"))
	if err != nil {
		return err
	}
	d := &demo{o: o, out: o.Out, tb: &runTB{dir: o.Dir, log: logf}, kmsg: map[string]*kmsgFile{}, machines: map[string]*machine{}, tokens: map[string]nodeTokens{}, start: time.Now()}
	defer func() {
		d.say("\nCleaning up: stopping every process the demo started.")
		d.tb.cleanup()
		logf.Close()
		if !keep {
			os.RemoveAll(o.Dir)
		}
	}()
	defer func() {
		if v := recover(); v != nil {
			f, ok := v.(fatal)
			if !ok {
				panic(v)
			}
			err = fmt.Errorf("demo: %s (logs in %s)", f.msg, filepath.Join(o.Dir, "logs"))
			keep = true
		}
	}()
	d.up(ctx)
	d.scenario(ctx)
	if o.Once {
		return d.summary()
	}
	d.tryIt()
	<-ctx.Done()
	return nil
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

func (d *demo) step(format string, args ...any) {
	fmt.Fprintf(d.out, "\n[%5.1fs] ", time.Since(d.start).Seconds())
	fmt.Fprintf(d.out, format+"\n", args...)
}

func (d *demo) check(what string, ok bool, note string) {
	d.results = append(d.results, result{what, ok, note})
	mark := "✓"
	if !ok {
		mark = "✗"
	}
	d.say("        %s %s%s", mark, what, suffix(note))
}

func suffix(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

// up starts everything.
func (d *demo) up(ctx context.Context) {
	d.step("Starting the real components on 127.0.0.1 (built once and cached; the first run takes minutes)")
	if err := d.tools(ctx); err != nil {
		d.tb.Fatalf("components: %v", err)
	}
	t0 := time.Now()
	// The collector takes lines only with a pod-bound token of the exporters' (or
	// the agents') ServiceAccount, and writes the token's node into each record.
	d.env = testenv.Start(d.tb, testenv.Options{Kubernetes: true, Collector: true,
		CollectorAuth: &testenv.CollectorAuth{ServiceAccounts: []string{ns + "/" + exporterSA, ns + "/" + agentSA}}})
	d.env.InstallCRD(d.tb, v1alpha1.CRDYAML) // the chart ships it in crds/
	d.cs = d.env.Clientset()
	d.say("        etcd + kube-apiserver %s, Loki %s, OpenTelemetry Collector %s — up in %s",
		d.env.APIServerURL(), d.env.LokiURL(), d.env.OTLPEndpoint(), time.Since(t0).Round(10*time.Millisecond))

	d.step("Registering %d simulated GPU nodes, faultline's ServiceAccounts and least-privilege RBAC", d.o.Nodes)
	ctrlToken := d.cluster(ctx)
	policies := d.admission(ctx)
	d.say("        the chart's admission policies: %s", strings.Join(policies, ", "))
	d.daemonPods(ctx)
	d.issueTokens(ctx)
	d.say("        pod-bound tokens per node (audience %s for the collector, the API server's for the agents), issued again every %s",
		testenv.CollectorAudience, tokenRefresh)

	d.step("Two training Jobs hold GPUs (no scheduler or kubelet runs here: the demo binds their pods and plays the kubelets)")
	d.training(ctx)

	d.step("Starting one probe agent per node (NVML: %s; ping and iperf3: the real programs)", nvmlSource)
	agents := d.agents(ctx)

	d.step("Starting one dmesg-exporter per node, each reading its own kmsg-format file, shipping over OTLP to the collector → Loki")
	d.exporters()

	builtin, err := packs.Load()
	if err != nil {
		d.tb.Fatalf("the built-in packs: %v", err)
	}
	d.step("Starting the controller (its ServiceAccount's RBAC only; rule packs: the %d built-in packs + the demo's site pack)", len(builtin))
	d.controller(ctx, ctrlToken, agents)

	d.nvmlRound(ctx)
}

// faultlineBinary finds the faultline executable: make demo builds it next to this
// program; otherwise it is looked up on $PATH.
func faultlineBinary() (string, error) {
	self, err := os.Executable()
	if err == nil {
		next := filepath.Join(filepath.Dir(self), "faultline")
		if st, err := os.Stat(next); err == nil && !st.IsDir() {
			return next, nil
		}
	}
	p, err := exec.LookPath("faultline")
	if err != nil {
		return "", fmt.Errorf("demo: no faultline binary next to this program or on $PATH (build it with make build-faultline, or pass --faultline): %w", err)
	}
	return p, nil
}

func (d *demo) summary() error {
	d.step("Summary")
	failed := 0
	for _, r := range d.results {
		mark := "PASS"
		if !r.ok {
			mark = "FAIL"
			failed++
		}
		d.say("        %s  %s%s", mark, r.what, suffix(r.note))
	}
	if failed > 0 {
		return fmt.Errorf("demo: %d of %d outcomes did not hold (logs in %s)", failed, len(d.results), filepath.Join(d.o.Dir, "logs"))
	}
	d.say("        all %d outcomes held", len(d.results))
	return nil
}

// tryIt prints how to poke at the running stack.
func (d *demo) tryIt() {
	kubectl := testenv.Binary(d.tb, "kubectl")
	opConfig := d.kubeconfigFor(d.apiToken, "faultline-operator")
	d.step("Everything keeps running until Ctrl-C. Try it by hand:")
	d.say(`
  export KUBECONFIG=%s
  %s get nodes -o custom-columns='NAME:.metadata.name,HEALTH:.metadata.labels.faultline\.io/health,TAINTS:.spec.taints[*].value'
  %s get events -A --field-selector involvedObject.kind=Node
  %s get nodefaults -o wide; %s describe nodefault gpu-3.nvidia-xid.xid-gpu-lost
  %s get nodes -l faultline.io/service=required                         # the hardware team's queue

  As a faultline-operator (this kubeconfig's token), with the CLI and kubectl: every
  action is an object or a request on one, authorized and audited by the API server:
  %s probe run --kubeconfig %s --node gpu-0,gpu-1 --check nvml --wait
  %s --kubeconfig %s get proberuns                                      # every run, yours and the controller's
  %s fault dismiss NAME --kubeconfig %s --reason 'switch replaced'  # verdict on rack-a's fleet fault (NAME: kubectl get nodefaults)
  %s untaint gpu-3 --kubeconfig %s --reason 'GPU reseated'         # kubectl get nodefault gpu-3.nvidia-xid.xid-gpu-lost -o yaml: who asked
  The controller's port serves its metrics and health only (for Prometheus); what it knows is in the API server:
  %s get nodefaults -o wide                                             # held faults: PHASE Held, and their REASON
  %s -n %s get lease faultline-controller                              # which replica leads

  The collector takes a line only with a node's pod-bound token, and writes that node into it;
  a forged one without a token is refused (401):
  curl -s -o /dev/null -w '%%{http_code}\n' -X POST %s/v1/logs -H 'Content-Type: application/json' \
    -d '{"resourceLogs":[{"resource":{"attributes":[{"key":"node","value":{"stringValue":"gpu-0"}}]},"scopeLogs":[{"logRecords":[{"body":{"stringValue":"NVRM: Xid (PCI:0000:4e:00): 79, GPU has fallen off the bus."}}]}]}]}'
  A faultline-viewer reads everything and may ask nothing: KUBECONFIG=%s

  Loki (Grafana data source or logcli): %s
    {source="kernel"} |~ "Xid|SXid|AER|Link down"
  Write your own kernel line on gpu-4, as the kernel would (priority, sequence, µs since boot):
    f=%s; echo "3,$(( $(wc -l < $f) + 1 )),$(awk '{printf "%%.0f", $1*1000000}' /proc/uptime),-;NVRM: Xid (PCI:0000:07:00): 48, pid=1, name=x, An uncorrectable double bit error" >> $f

  Logs of every component: %s`,
		d.env.Kubeconfig(), kubectl, kubectl, kubectl, kubectl, kubectl,
		d.o.Binary, opConfig, kubectl, opConfig, d.o.Binary, opConfig, d.o.Binary, opConfig, kubectl, kubectl, ns,
		d.env.OTLPEndpoint(), d.kubeconfigFor(d.viewerToken, "faultline-viewer"), d.env.LokiURL(),
		d.kmsg["gpu-4"].path, filepath.Join(d.o.Dir, "logs"))
}
