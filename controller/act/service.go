package act

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/controller/nodefault"
)

// The service step's marks on a Node, for the hardware team.
const (
	// LabelService is set to "required" on a node an escalation sent to service.
	LabelService = "faultline.io/service"
	// ConditionService is the node condition that carries the evidence summary.
	ConditionService = "FaultlineService"
)

// MarkForService labels node LabelService=required and sets its condition
// ConditionService True (reason Escalated) with message (the rule and the
// evidence summary), so the hardware team's tools find it by label and read why. The label
// stays until somebody removes it: returning a node from service is a person's call.
func (a *Actor) MarkForService(ctx context.Context, node, message string) error {
	if _, err := a.SetNodeMeta(ctx, node, map[string]string{LabelService: "required"}, nil); err != nil {
		return err
	}
	now := metav1.NewTime(a.opts.Now())
	c := corev1.NodeCondition{Type: ConditionService, Status: corev1.ConditionTrue, Reason: "Escalated",
		Message: nodefault.Truncate(message, messageLimit), LastHeartbeatTime: now, LastTransitionTime: now}
	if _, err := a.writer.setCondition(ctx, node, c); err != nil {
		return fmt.Errorf("node %s: condition %s: %w", node, ConditionService, err)
	}
	return nil
}
