package controller

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/act"
)

// TestFaultViewJSON: GET /api/v1/faults shows a record's fault in the JSON it
// always served.
func TestFaultViewJSON(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := &v1alpha1.NodeFault{
		Spec: v1alpha1.NodeFaultSpec{Node: "gpu-1", Pack: "nvidia-xid", Rule: "xid-gpu-lost", Severity: "critical",
			Action: "taint", Taint: "faultline.io/faulty=xid-gpu-lost:NoSchedule"},
		Status: v1alpha1.NodeFaultStatus{Count: 1, LastSeen: &metav1.Time{Time: t0}, BootID: "b1", Recover: "manual",
			Captures: map[string]string{"xid": "79"},
			Evidence: []v1alpha1.EvidenceLine{{Time: metav1.Time{Time: t0}, Text: "NVRM: Xid 79"}},
			Taint:    &v1alpha1.TaintRecord{Taint: "faultline.io/faulty=xid-gpu-lost:NoSchedule", State: v1alpha1.TaintPlaced, Time: metav1.Time{Time: t0.Add(-time.Second)}}},
	}
	b, err := json.Marshal(nodeView(act.NodeFaults{Node: "gpu-1", Faults: []*v1alpha1.NodeFault{rec}}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"node":"gpu-1","faults":[{"rule":"xid-gpu-lost","pack":"nvidia-xid","severity":"critical","action":"taint",` +
		`"taint":"faultline.io/faulty=xid-gpu-lost:NoSchedule","captures":{"xid":"79"},"count":1,"time":"2026-01-02T03:04:05Z",` +
		`"lines":[{"time":"2026-01-02T03:04:05Z","text":"NVRM: Xid 79"}],"recover":"manual","bootID":"b1","taintPlaced":true}]}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
	// Existing: not faultline's; a record without a firing yet is dated by its taint entry.
	rec.Status.Taint.State, rec.Status.LastSeen = v1alpha1.TaintExisting, nil
	if f := nodeView(act.NodeFaults{Faults: []*v1alpha1.NodeFault{rec}}).Faults[0]; f.TaintPlaced || !f.Time.Equal(t0.Add(-time.Second)) {
		t.Errorf("Existing record shown as %+v", f)
	}
}
