package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/faultline-dev/faultline/controller/workloads"
)

// newWorkloads builds the tracker of the GPU pods a fault touches. Its Events go
// through the Actor's recorder (built after the NodeFault store that asks the
// tracker, before any record is written).
func (c *Controller) newWorkloads() (*workloads.Tracker, error) {
	t, err := workloads.New(c.cfg.Client, workloads.Options{
		Post: func(obj runtime.Object, eventType, reason, message string) error {
			return c.actor.EventOn(obj, eventType, reason, message)
		},
		Events: c.m.podEvents,
	})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	return t, nil
}
