package testenv

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// KwokOptions configure the nodes kwok simulates (Options.Kwok).
type KwokOptions struct {
	// Nodes is how many GPU nodes Start creates (see AddKwokNodes).
	Nodes int
	// StatusReportPeriod is how often each node's status heartbeat is refreshed when
	// nothing changed (default 5m, the kubelet's nodeStatusReportFrequency when node
	// leases carry the liveness); up to 10 s more, as the kubelet's status loop runs
	// every 10 s.
	StatusReportPeriod time.Duration
}

// DefaultStatusReportPeriod is the kubelet's default nodeStatusReportFrequency.
const DefaultStatusReportPeriod = 5 * time.Minute

// KwokNodeAnnotation marks the Nodes kwok manages; it leaves every other Node alone.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// KwokLeaseDurationSeconds is the kubelet's default node lease duration; kwok, like the
// kubelet, renews the lease every quarter of it (10 s).
const KwokLeaseDurationSeconds = 40

// kwokConfig holds kwok's two node stages: the first makes a new Node a Ready GPU node
// (8 GPUs), the second refreshes its conditions' heartbeat every StatusReportPeriod.
//
//go:embed kwok.yaml
var kwokConfig []byte

type kwokState struct {
	mu   sync.Mutex
	next int // index of the next node AddKwokNodes creates
}

// startKwok runs kwok against the apiserver, managing the Nodes annotated
// KwokNodeAnnotation=fake.
func (e *Env) startKwok(bin string, o KwokOptions) error {
	dir := filepath.Join(e.dir, "kwok")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	period := o.StatusReportPeriod
	if period <= 0 {
		period = DefaultStatusReportPeriod
	}
	stages := strings.NewReplacer(
		"STATUS_REPORT_MS", strconv.FormatInt(period.Milliseconds(), 10),
		"STATUS_REPORT_JITTER_MS", strconv.FormatInt((period+10*time.Second).Milliseconds(), 10),
	).Replace(string(kwokConfig))
	cfg := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(cfg, []byte(stages), 0o644); err != nil {
		return err
	}
	e.mu.Lock()
	kubeconfig := e.kube.kubeconfig
	e.kwok = &kwokState{}
	e.mu.Unlock()
	return e.launch(Kwok, func() (procSpec, error) {
		ports, err := freePorts(1)
		if err != nil {
			return procSpec{}, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(ports[0])
		return procSpec{
			name: Kwok, path: bin, dir: dir, logPath: e.LogPath(Kwok),
			args: []string{
				"--config=" + cfg,
				"--kubeconfig=" + kubeconfig,
				"--manage-all-nodes=false",
				"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
				"--node-lease-duration-seconds=" + strconv.Itoa(KwokLeaseDurationSeconds),
				"--node-ip=127.0.0.1",
				"--server-address=" + addr,
			},
			ready:        httpReady(http.DefaultClient, "http://"+addr+"/healthz", nil, "ok"),
			readyTimeout: 60 * time.Second,
			stopGrace:    5 * time.Second,
		}, nil
	})
}

// AddKwokNodes creates n more GPU Nodes for kwok to simulate (Options.Kwok), named
// kwok-gpu-00000, kwok-gpu-00001, … in creation order, and returns their names. kwok
// makes each Ready and keeps its lease and status fresh; AddKwokNodes does not wait
// for that. Nodes are created concurrently, with a client allowed bursts, so that tens
// of thousands take seconds, not minutes.
func (e *Env) AddKwokNodes(t TB, n int) []string {
	t.Helper()
	e.mu.Lock()
	ks := e.kwok
	e.mu.Unlock()
	if ks == nil {
		t.Fatalf("testenv: AddKwokNodes: kwok was not started (set Options.Kwok)")
	}
	ks.mu.Lock()
	first := ks.next
	ks.next += n
	ks.mu.Unlock()

	rc := e.RESTConfig()
	rc.QPS, rc.Burst = 2000, 4000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatalf("testenv: kwok nodes client: %v", err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("kwok-gpu-%05d", first+i)
	}
	const workers = 16
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if _, err := cs.CoreV1().Nodes().Create(context.Background(), kwokNode(names[i]), metav1.CreateOptions{}); err != nil {
					errs[w] = fmt.Errorf("create node %s: %w", names[i], err)
					return
				}
				// The apiserver taints a new Node not-ready (TaintNodesByCondition); the
				// node lifecycle controller, which the harness does not run, would lift
				// it once the node reports Ready.
				if _, err := cs.CoreV1().Nodes().Patch(context.Background(), names[i], types.MergePatchType,
					[]byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
					errs[w] = fmt.Errorf("untaint node %s: %w", names[i], err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("testenv: kwok nodes: %v", err)
	}
	return names
}

// kwokNode is a GPU node as the NVIDIA GPU operator labels one: 8 × A100.
func kwokNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"type": "kwok", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
				"nvidia.com/gpu.count": "8",
			},
		},
	}
}
