package scale_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
	"github.com/faultline-dev/faultline/controller/intake"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

const namespace = "faultline"

// TestScale: kwok simulates the fleet with heartbeats, the background load runs, and
// the controller (default flags but the budget) sees
//   - single Xid 79 lines on quiet nodes, one at a time: line → taint latency;
//   - an Xid 79 on burst distinct nodes at once, with a budget that lets three
//     quarters of the burst be tainted: time until every burst node is decided
//     (tainted or held by the budget).
//
// It prints one SCALE line and fails only on wrong decisions: a latency node not
// tainted, a burst node undecided, a node tainted without a fault, or more nodes
// tainted than the budget allows.
func TestScale(t *testing.T) {
	testenv.Integration(t)
	cfg := loadConfig(t)
	opts := testenv.Options{Loki: true, Kwok: &testenv.KwokOptions{}}
	var intakeFlags []string
	if cfg.viaCollector {
		// The collector writes each line to Loki and pushes it to the controller's
		// intake (HTTPS, a ServiceAccount token of the intake's audience).
		addr := testenv.FreeAddr(t)
		tf := testenv.WriteTLS(t, t.TempDir(), "127.0.0.1")
		opts.CollectorIntake = &testenv.CollectorIntake{Endpoint: "https://" + addr, CAFile: tf.CA, Token: intakeToken}
		if cfg.nodeMeta {
			opts.LokiIndexLabels = []string{"source"} // the node stays structured metadata
		}
		intakeFlags = []string{"--intake-listen", addr, "--intake-tls-cert-file", tf.Cert, "--intake-tls-key-file", tf.Key}
		t.Logf("lines go through the collector to Loki and to the controller's intake")
	}
	env := testenv.Start(t, opts)
	cs := env.Clientset()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// The controller records each fault as a NodeFault, as it does in a cluster.
	env.InstallCRD(t, v1alpha1.CRDYAML)
	if err := createNamespace(ctx, cs); err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	nodes := env.AddKwokNodes(t, cfg.nodes)
	t.Logf("%d kwok nodes created in %s", cfg.nodes, time.Since(t0).Round(time.Millisecond))
	if cfg.nodeMeta {
		t.Logf("the node of each line is structured metadata: one stream for every node")
	}
	// Latency samples and the burst use the last nodes, which send nothing else but
	// benign lines; candidate lines come from all the others.
	sampleNodes := nodes[cfg.nodes-cfg.samples:]
	burstNodes := nodes[cfg.nodes-cfg.samples-cfg.burst : cfg.nodes-cfg.samples]
	candNodes := nodes[:cfg.nodes-cfg.samples-cfg.burst]

	watch, err := watchTaints(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 5*time.Minute, "every kwok node Ready", func() error {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return err
		}
		ready := 0
		for i := range l.Items {
			for _, c := range l.Items[i].Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready != cfg.nodes {
			return fmt.Errorf("%d of %d Ready", ready, cfg.nodes)
		}
		return nil
	})
	t.Logf("%d nodes Ready %s after creation began", cfg.nodes, time.Since(t0).Round(time.Millisecond))

	// Every sample node is tainted; of the burst, three quarters fit the budget.
	budget := cfg.samples + cfg.burst*3/4
	wantHeld := cfg.burst - cfg.burst*3/4
	flags := []string{"--budget-percent", "100", "--budget-max", strconv.Itoa(budget)}
	if cfg.apiQPS > 0 {
		flags = append(flags, "--kube-api-qps", strconv.Itoa(cfg.apiQPS))
	}
	if cfg.actWorkers > 0 {
		flags = append(flags, "--act-workers", strconv.Itoa(cfg.actWorkers))
	}
	ctrl := startController(t, env, namespace, append(flags, intakeFlags...)...)
	// Idle: leading, its caches synced over the whole fleet, the heartbeats running.
	time.Sleep(10 * time.Second)
	idle := ctrl.rss()

	p := newPusher(env.LokiURL(), cfg.nodeMeta)
	if cfg.viaCollector {
		p = newOTLPPusher(env.OTLPEndpoint())
	}
	bgCtx, stopBackground := context.WithCancel(ctx)
	bgDone := make(chan struct{})
	go func() {
		defer close(bgDone)
		p.background(bgCtx, nodes, candNodes, cfg.candRate, cfg.benignRate)
	}()
	defer func() { stopBackground(); <-bgDone }()
	time.Sleep(5 * time.Second) // the background reaches its rate first

	// Line → taint: one quiet node every 500 ms, not waiting for each, so that a
	// controller behind its input shows as latency, not as a longer run.
	pushedAt := make(map[string]time.Time, len(sampleNodes))
	for _, n := range sampleNodes {
		at := time.Now()
		if err := p.push(ctx, []push.Stream{p.kernelStream(n, at, xid79Line)}); err != nil {
			t.Fatal(err)
		}
		pushedAt[n] = at
		time.Sleep(500 * time.Millisecond)
	}
	reading := ctrl.progress(time.Minute)
	eventually.NoError(t, 10*time.Minute, fmt.Sprintf("all %d sample nodes tainted", len(sampleNodes)), func() error {
		if err := reading(); err != nil {
			t.Fatal(err)
		}
		missing := 0
		for _, n := range sampleNodes {
			if _, ok := watch.taintedAt(n); !ok {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d not tainted yet", missing)
		}
		return nil
	})
	var latencies []time.Duration
	for _, n := range sampleNodes {
		seen, _ := watch.taintedAt(n)
		latencies = append(latencies, seen.Sub(pushedAt[n]))
	}
	ctrl.logLag(t, "after the latency samples")
	ctrl.logSplit(t, "after the latency samples")

	// The burst: one push, every node a stream of its own (or, with the node as
	// metadata, one stream of the same line at the same time from every node).
	var streams []push.Stream
	burstAt := time.Now()
	for _, n := range burstNodes {
		streams = append(streams, p.kernelStream(n, burstAt, xid79Line))
	}
	if err := p.push(ctx, streams); err != nil {
		t.Fatal(err)
	}
	var lastHold time.Time
	eventually.NoError(t, 10*time.Minute, fmt.Sprintf("all %d burst nodes decided", cfg.burst), func() error {
		if err := reading(); err != nil {
			t.Fatal(err)
		}
		held, err := ctrl.metric("faultline_controller_held_faults", map[string]string{"reason": "budget"})
		if err != nil {
			return err
		}
		if int(held) >= wantHeld && lastHold.IsZero() {
			lastHold = time.Now()
		}
		tainted := 0
		for _, n := range burstNodes {
			if _, ok := watch.taintedAt(n); ok {
				tainted++
			}
		}
		if tainted+int(held) < cfg.burst {
			return fmt.Errorf("%d tainted, %.0f held by the budget", tainted, held)
		}
		return nil
	})
	last := lastHold
	for _, n := range burstNodes {
		if at, ok := watch.taintedAt(n); ok && at.After(last) {
			last = at
		}
	}
	// A decision's books (its record's Placed and decision, its Events) are written
	// after the taints waiting (docs/controller.md): the time until every decision of
	// the run is carried out whole, the peak memory measured past it.
	eventually.NoError(t, 10*time.Minute, "every decision carried out whole", func() error {
		n, err := ctrl.histogramCount("faultline_controller_carry_seconds")
		if err != nil {
			return err
		}
		if want := cfg.samples + cfg.burst; n < want {
			return fmt.Errorf("%d decisions carried out whole, want %d", n, want)
		}
		return nil
	})
	books := time.Since(burstAt)
	// Every burst decision has its Event on the Node (client-go's recorder drops
	// Events past its queue when the apiserver is slower than the decisions).
	eventually.NoError(t, 2*time.Minute, "an Event on every burst node", func() error {
		evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"})
		if err != nil {
			return err
		}
		has := map[string]bool{}
		for _, e := range evs.Items {
			if e.Reason == act.ReasonTainted || e.Reason == act.ReasonHeld {
				has[e.InvolvedObject.Name] = true
			}
		}
		missing := 0
		for _, n := range burstNodes {
			if !has[n] {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d burst nodes have no FaultTainted or FaultHeld Event", missing, len(burstNodes))
		}
		return nil
	})
	ctrl.logLag(t, "after the burst")
	ctrl.logSplit(t, "after the burst (samples included)")
	if breaks, late := watch.seenLate(); breaks > 0 || late > 0 {
		t.Logf("the test's Node watch broke %d times; %d taints were seen more than 2 s after their write and are timed by it (to the second)", breaks, late)
	}
	stopBackground()
	<-bgDone
	peak := max(ctrl.peak.Load(), ctrl.rss())
	t.Logf("RSS at the peak sample: %s MiB anonymous (heap, stacks), %s MiB of the executable's pages",
		mib(ctrl.peakAnon.Load()), mib(ctrl.peakFile.Load()))

	// Decisions are right: the nodes with faults and no others, within the budget.
	ever, most := watch.snapshot()
	faulty := map[string]bool{}
	for _, n := range append(slices.Clone(sampleNodes), burstNodes...) {
		faulty[n] = true
	}
	for n := range ever {
		if !faulty[n] {
			t.Errorf("%s tainted without a fault", n)
		}
	}
	if most > budget {
		t.Errorf("%d nodes tainted at once, budget %d", most, budget)
	}
	if len(ever) != budget {
		t.Errorf("%d nodes tainted, want the budget's %d (every sample node and %d burst nodes)", len(ever), budget, budget-cfg.samples)
	}
	cpu, wall := ctrl.cpu()
	t.Logf("controller CPU %.1f s in %.1f s (%.0f%% of one core)", cpu.Seconds(), wall.Seconds(), 100*cpu.Seconds()/wall.Seconds())
	logLokiQueries(t, env.LokiURL())
	if cfg.viaCollector {
		ctrl.logIntake(t)
	}
	sent, failed, errs := p.report()
	t.Logf("background: %d lines pushed, %d refused (%v)", sent, failed, errs)
	if failed > 0 {
		t.Errorf("Loki or the collector refused %d lines: %v", failed, errs)
	}

	slices.Sort(latencies)
	path := "loki"
	if cfg.viaCollector {
		path = "collector"
	}
	fmt.Printf("SCALE nodes=%d burst=%d burst_last_decision_s=%.2f burst_books_s=%.2f line_to_taint_p50_ms=%d line_to_taint_p99_ms=%d rss_idle_mib=%s rss_peak_mib=%s path=%s\n",
		cfg.nodes, cfg.burst, last.Sub(burstAt).Seconds(), books.Seconds(),
		percentile(latencies, 50).Milliseconds(), percentile(latencies, 99).Milliseconds(), mib(idle), mib(peak), path)
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted) + 99) / 100
	return sorted[max(i-1, 0)]
}

// createNamespace creates the controller's namespace unless it exists (the intake's
// token may have created it).
func createNamespace(ctx context.Context, cs kubernetes.Interface) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// intakeToken is the collector's token for the controller's intake, as the chart
// grants it: a ServiceAccount allowed to create loglines.faultline.io, its token
// issued for the intake's audience.
func intakeToken(env *testenv.Env) (string, error) {
	ctx := context.Background()
	cs := env.Clientset()
	if err := createNamespace(ctx, cs); err != nil {
		return "", err
	}
	const sa = "collector"
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "faultline-intake"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"faultline.io"}, Resources: []string{"loglines"}, Verbs: []string{"create"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "faultline-intake"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: sa}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{intake.DefaultAudience}, ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}
