package scale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/controller/nodefault"
	"github.com/faultline-dev/faultline/test/testenv"
)

// BenchmarkFenceWrites measures what the writes of a taint cost the API server, in
// its own CPU time per request: on an apiserver with no CPU to spare (a burst on a
// busy control plane, or `make bench-scale` on two cores) that is what bounds how
// many nodes a second are fenced. Each kind of write goes to Nodes of its own, each
// Node once, 8 at a time; the Nodes are copies of a kwok Node (its labels,
// annotations and status), without kwok running, whose heartbeats would be most of
// the apiserver's CPU. The baseline, in the same run, is a read of a Node from the
// watch cache (resourceVersion 0), which every write below also makes first, as the
// controller's writes start from its cache; each write reports its cost as a ratio to
// it (x-read).
//
//	FAULTLINE_TOOLS_PATH="$(test/tools/build.sh path)" go test -run '^$' -bench FenceWrites -benchtime 500x ./test/scale
func BenchmarkFenceWrites(b *testing.B) {
	testenv.Integration(b)
	env := testenv.Start(b, testenv.Options{Kwok: &testenv.KwokOptions{}})
	env.InstallCRD(b, v1alpha1.CRDYAML)
	ctx := context.Background()
	rc := env.RESTConfig()
	rc.QPS, rc.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	// A Node as kwok keeps it (Ready, capacity, addresses, images), then kwok stops.
	model := env.AddKwokNodes(b, 1)[0]
	var tmpl *corev1.Node
	deadline := time.Now().Add(time.Minute)
	for tmpl == nil || len(tmpl.Status.Conditions) == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("kwok did not report the status of %s", model)
		}
		time.Sleep(200 * time.Millisecond)
		if tmpl, err = cs.CoreV1().Nodes().Get(ctx, model, metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	env.Stop(b, testenv.Kwok)
	pid := env.PID(testenv.APIServer)

	var created atomic.Int64
	newNodes := func(n int) []string {
		names := make([]string, n)
		for i := range names {
			nd := tmpl.DeepCopy()
			nd.ObjectMeta = metav1.ObjectMeta{Name: fmt.Sprintf("fence-%06d", created.Add(1)), Labels: tmpl.Labels, Annotations: tmpl.Annotations}
			c, err := cs.CoreV1().Nodes().Create(ctx, nd, metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			c.Status = tmpl.Status
			if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
			names[i] = c.Name
		}
		return names
	}
	const pack, rule = "nvidia-xid", "xid-79"
	taint := corev1.Taint{Key: "faultline.io/gpu", Value: rule, Effect: corev1.TaintEffectNoSchedule}
	record := func(node string) string { return nodefault.Name(node, pack, rule) }
	cached := func(name string) (*corev1.Node, error) {
		return cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
	}
	const writers = 8
	var readMs float64
	run := func(name string, write func(node string) error) {
		b.Run(name, func(b *testing.B) {
			nodes := newNodes(b.N)
			var next atomic.Int64
			var wg sync.WaitGroup
			cpu0 := testenv.CPUTime(pid)
			b.ResetTimer()
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1) - 1; i < int64(len(nodes)); i = next.Add(1) - 1 {
						if err := write(nodes[i]); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			ms := float64((testenv.CPUTime(pid) - cpu0).Microseconds()) / 1000 / float64(b.N)
			b.ReportMetric(ms, "apiserver-ms/op")
			if name == "read" {
				readMs = ms
			} else if readMs > 0 {
				b.ReportMetric(ms/readMs, "x-read")
			}
		})
	}
	run("read", func(node string) error {
		_, err := cached(node)
		return err
	})
	// The controller's Node write: a merge patch of the taints, the pointer
	// annotation and the resourceVersion it was planned on.
	run("merge-patch", func(node string) error {
		n, err := cached(node)
		if err != nil {
			return err
		}
		p, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": n.ResourceVersion,
				"annotations": map[string]string{fault.AnnotationFaults: record(node)}},
			"spec": map[string]any{"taints": append(n.Spec.Taints, taint)},
		})
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	})
	// The same write as a JSON patch (RFC 6902).
	run("json-patch", func(node string) error {
		n, err := cached(node)
		if err != nil {
			return err
		}
		p, err := json.Marshal([]map[string]any{
			{"op": "replace", "path": "/metadata/resourceVersion", "value": n.ResourceVersion},
			{"op": "add", "path": "/metadata/annotations/" + strings.ReplaceAll(fault.AnnotationFaults, "/", "~1"), "value": record(node)},
			{"op": "add", "path": "/spec/taints", "value": append(n.Spec.Taints, taint)},
		})
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType, p, metav1.PatchOptions{})
		return err
	})
	// The whole Node sent back (what the controller did before it kept only the
	// fields it reads).
	run("update", func(node string) error {
		n, err := cached(node)
		if err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, taint)
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	// A new fault's record created Placing, the fence's other write.
	run("record-create", func(node string) error {
		if _, err := cached(node); err != nil {
			return err
		}
		nf := &v1alpha1.NodeFault{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodeFault"},
			ObjectMeta: metav1.ObjectMeta{Name: record(node), Labels: map[string]string{nodefault.LabelNode: node},
				Annotations: map[string]string{nodefault.AnnotationPlacing: taint.ToString()}},
			Spec: v1alpha1.NodeFaultSpec{Node: node, Pack: pack, Rule: rule, Severity: "critical", Action: "taint",
				Description: "GPU has fallen off the bus", Taint: taint.ToString()}}
		body, err := json.Marshal(nf)
		if err != nil {
			return err
		}
		return cs.CoreV1().RESTClient().Post().AbsPath("/apis", v1alpha1.Group, v1alpha1.Version, v1alpha1.Resource).
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
	})
}
