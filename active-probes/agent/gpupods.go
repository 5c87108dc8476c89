package agent

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// GPUResource is the extended resource of NVIDIA's device plugin.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// GPUPods lists the pods on a node that hold GPUs, as "namespace/name"; an invasive
// probe must not run under them.
type GPUPods func(ctx context.Context) ([]string, error)

// KubeGPUPods asks the apiserver for the node's pods (a field selector on
// spec.nodeName, so the list is small) and keeps those that are not finished and
// request or limit nvidia.com/gpu in any container.
func KubeGPUPods(client kubernetes.Interface, node string) GPUPods {
	return func(ctx context.Context) ([]string, error) {
		list, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
		})
		if err != nil {
			return nil, fmt.Errorf("list pods on %s: %w", node, err)
		}
		var out []string
		for i := range list.Items {
			if holdsGPU(&list.Items[i]) {
				out = append(out, list.Items[i].Namespace+"/"+list.Items[i].Name)
			}
		}
		sort.Strings(out)
		return out, nil
	}
}

func holdsGPU(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	has := func(cs []corev1.Container) bool {
		for _, c := range cs {
			for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				if q, ok := l[GPUResource]; ok && q.Cmp(resource.MustParse("0")) > 0 {
					return true
				}
			}
		}
		return false
	}
	return has(p.Spec.Containers) || has(p.Spec.InitContainers)
}
