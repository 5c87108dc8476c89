// Package checkpoint keeps the controller's read position and the storm hold's
// state in a ConfigMap, so a new leader resumes where the old one stopped.
package checkpoint

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Key is the ConfigMap data key holding the position (Unix nanoseconds).
const Key = "position-unix-nano"

// StateKey is the ConfigMap data key holding the Loki source's full position (JSON).
const StateKey = "loki-position.json"

// StormsKey is the ConfigMap data key holding the storm hold's state (JSON). It is
// written with the position, in one update: the next leader reads both as of the
// same moment, and decides again only the lines after that position.
const StormsKey = "storms.json"

// Store reads and writes the position.
type Store struct {
	client    kubernetes.Interface
	namespace string
	name      string
}

// New returns a Store for the ConfigMap namespace/name.
func New(c kubernetes.Interface, namespace, name string) *Store {
	return &Store{client: c, namespace: namespace, name: name}
}

// LoadState returns the saved source position (JSON) and storm state (JSON), each
// nil when none was saved.
func (s *Store) LoadState(ctx context.Context) (position, storms []byte, err error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load checkpoint %s/%s: %w", s.namespace, s.name, err)
	}
	if v, ok := cm.Data[StateKey]; ok {
		position = []byte(v)
	}
	if v, ok := cm.Data[StormsKey]; ok {
		storms = []byte(v)
	}
	return position, storms, nil
}

// SaveState stores the source position (JSON), its overall time t (readable by
// people) and, when not nil, the storm state (JSON), in one write. Only
// the leader writes, so the last write wins.
func (s *Store) SaveState(ctx context.Context, state []byte, t time.Time, storms []byte) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cms := s.client.CoreV1().ConfigMaps(s.namespace)
		cm, err := cms.Get(ctx, s.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			data := map[string]string{StateKey: string(state), Key: strconv.FormatInt(t.UnixNano(), 10)}
			if storms != nil {
				data[StormsKey] = string(storms)
			}
			_, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace,
					Labels: map[string]string{"app.kubernetes.io/name": "faultline", "app.kubernetes.io/component": "controller"}},
				Data: data,
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), s.name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if cm.Data[StateKey] == string(state) && (storms == nil || cm.Data[StormsKey] == string(storms)) {
			return nil
		}
		cm.Data[StateKey] = string(state)
		cm.Data[Key] = strconv.FormatInt(t.UnixNano(), 10)
		if storms != nil {
			cm.Data[StormsKey] = string(storms)
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("save checkpoint %s/%s: %w", s.namespace, s.name, err)
	}
	return nil
}
