package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// podFiles lays out, under a local directory, the files a container of a pod
// template sees at a path, for paths backed by ConfigMap, Secret and projected
// volumes: the objects are read (get) once per volume and written as the kubelet
// writes them (every key, or the volume's items, at their paths).
type podFiles struct {
	client    kubernetes.Interface
	namespace string
	spec      *corev1.PodSpec
	container *corev1.Container
	dir       string
	// volumes maps a volume's name to its local directory and the objects it holds.
	volumes map[string]*localVolume
}

// localVolume is one volume written out locally.
type localVolume struct {
	dir     string
	objects []objectRef
}

// objectRef names an object a volume was read from, at the version read.
type objectRef struct {
	Kind            string `json:"kind"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion,omitempty"` // empty: optional and absent
}

func (o objectRef) String() string {
	if o.ResourceVersion == "" {
		return fmt.Sprintf("%s %s (optional, absent)", o.Kind, o.Name)
	}
	return fmt.Sprintf("%s %s (resourceVersion %s)", o.Kind, o.Name, o.ResourceVersion)
}

// mountedPath is where a container path lies locally, and what backs it.
type mountedPath struct {
	local     string
	volume    string
	mountPath string
	objects   []objectRef
}

// local returns where the container's path p lies under the local directory: in the
// volume mounted at p or the closest above it.
func (pf *podFiles) local(ctx context.Context, p string) (mountedPath, error) {
	if !path.IsAbs(p) {
		return mountedPath{}, fmt.Errorf("%s is not an absolute path: which volume backs it depends on the container's working directory", p)
	}
	p = path.Clean(p)
	var m *corev1.VolumeMount
	for i := range pf.container.VolumeMounts {
		vm := &pf.container.VolumeMounts[i]
		mp := path.Clean(vm.MountPath)
		if (p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/")) && (m == nil || len(mp) > len(path.Clean(m.MountPath))) {
			m = vm
		}
	}
	if m == nil {
		return mountedPath{}, fmt.Errorf("%s: no volume of container %q is mounted at or above it (a file of the image cannot be read from here)", p, pf.container.Name)
	}
	v, err := pf.volume(ctx, m.Name)
	if err != nil {
		return mountedPath{}, fmt.Errorf("%s: %w", p, err)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, path.Clean(m.MountPath)), "/")
	return mountedPath{local: filepath.Join(v.dir, filepath.FromSlash(m.SubPath), filepath.FromSlash(rel)),
		volume: m.Name, mountPath: m.MountPath, objects: v.objects}, nil
}

// volume writes out the pod's volume name, once.
func (pf *podFiles) volume(ctx context.Context, name string) (*localVolume, error) {
	if v := pf.volumes[name]; v != nil {
		return v, nil
	}
	var vol *corev1.Volume
	for i := range pf.spec.Volumes {
		if pf.spec.Volumes[i].Name == name {
			vol = &pf.spec.Volumes[i]
		}
	}
	if vol == nil {
		return nil, fmt.Errorf("volume %q is mounted but not in the pod template", name)
	}
	v := &localVolume{dir: filepath.Join(pf.dir, name)}
	if err := os.MkdirAll(v.dir, 0o700); err != nil {
		return nil, err
	}
	var err error
	switch {
	case vol.ConfigMap != nil:
		err = pf.configMap(ctx, v, vol.ConfigMap.Name, vol.ConfigMap.Items, vol.ConfigMap.Optional)
	case vol.Secret != nil:
		err = pf.secret(ctx, v, vol.Secret.SecretName, vol.Secret.Items, vol.Secret.Optional)
	case vol.Projected != nil:
		for _, s := range vol.Projected.Sources {
			switch {
			case s.ConfigMap != nil:
				err = pf.configMap(ctx, v, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional)
			case s.Secret != nil:
				err = pf.secret(ctx, v, s.Secret.Name, s.Secret.Items, s.Secret.Optional)
			default:
				err = fmt.Errorf("projected volume %q has a source other than a ConfigMap or a Secret: replay cannot read it", name)
			}
			if err != nil {
				break
			}
		}
	default:
		err = fmt.Errorf("volume %q is neither a ConfigMap, a Secret nor a projected volume of them: replay cannot read it", name)
	}
	if err != nil {
		return nil, err
	}
	pf.volumes[name] = v
	return v, nil
}

func (pf *podFiles) configMap(ctx context.Context, v *localVolume, name string, items []corev1.KeyToPath, optional *bool) error {
	cm, err := pf.client.CoreV1().ConfigMaps(pf.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return pf.getError("ConfigMap", "configmaps", name, optional, v, err)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, s := range cm.Data {
		data[k] = []byte(s)
	}
	for k, b := range cm.BinaryData {
		data[k] = b
	}
	v.objects = append(v.objects, objectRef{Kind: "ConfigMap", Name: name, ResourceVersion: cm.ResourceVersion})
	return writeKeys(v.dir, "ConfigMap "+name, data, items, optional)
}

func (pf *podFiles) secret(ctx context.Context, v *localVolume, name string, items []corev1.KeyToPath, optional *bool) error {
	s, err := pf.client.CoreV1().Secrets(pf.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return pf.getError("Secret", "secrets", name, optional, v, err)
	}
	v.objects = append(v.objects, objectRef{Kind: "Secret", Name: name, ResourceVersion: s.ResourceVersion})
	return writeKeys(v.dir, "Secret "+name, s.Data, items, optional)
}

// getError explains a failed get; an optional object that does not exist is an
// empty source, as for the kubelet.
func (pf *podFiles) getError(kind, resource, name string, optional *bool, v *localVolume, err error) error {
	switch {
	case apierrors.IsNotFound(err) && optional != nil && *optional:
		v.objects = append(v.objects, objectRef{Kind: kind, Name: name})
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s %s/%s not found: %w", kind, pf.namespace, name, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("get %s %s/%s: forbidden: --from-cluster needs get on the %s the controller's packs are mounted from: %w",
			kind, pf.namespace, name, resource, err)
	}
	return fmt.Errorf("get %s %s/%s: %w", kind, pf.namespace, name, err)
}

// writeKeys writes data's keys (or items' keys at their paths) into dir.
func writeKeys(dir, what string, data map[string][]byte, items []corev1.KeyToPath, optional *bool) error {
	files := map[string][]byte{}
	if len(items) == 0 {
		for k, b := range data {
			files[k] = b
		}
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return fmt.Errorf("%s has no key %q (an item of the volume)", what, it.Key)
		}
		files[it.Path] = b
	}
	for p, b := range files {
		if !filepath.IsLocal(p) {
			return fmt.Errorf("%s: path %q leaves its volume", what, p)
		}
		f := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(f, b, 0o600); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}
