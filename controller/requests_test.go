package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/faultline-dev/faultline/api/v1alpha1"
	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/rbac"
	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// request asks for action on the NodeFault name as the bearer of token (the API
// server's RBAC on nodefaults), naming them as the chart's admission policy
// requires, and waits for the controller's answer.
func (cl *cluster) request(token, name string, action v1alpha1.RequestAction) *v1alpha1.RequestStatus {
	cl.t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cl.env.RESTConfigForToken(token))
	if err != nil {
		cl.t.Fatal(err)
	}
	me, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		cl.t.Fatal(err)
	}
	rc, err := v1alpha1.NewRESTClient(cs)
	if err != nil {
		cl.t.Fatal(err)
	}
	req := v1alpha1.Request{Action: action, RequestedBy: me.Status.UserInfo.Username, Time: metav1.NewTime(time.Now().Truncate(time.Second))}
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"request": req}})
	if err := rc.Patch(types.MergePatchType).Resource("nodefaults").Name(name).Body(b).Do(ctx).Error(); err != nil {
		cl.t.Fatalf("request %s on %s: %v", action, name, err)
	}
	var answer *v1alpha1.RequestStatus
	eventually.NoError(cl.t, 30*time.Second, "the answer to "+string(action)+" on "+name, func() error {
		var nf v1alpha1.NodeFault
		if err := rc.Get().Resource("nodefaults").Name(name).Do(ctx).Into(&nf); err != nil {
			return err
		}
		if nf.Pending() {
			return fmt.Errorf("not answered yet (status.request %+v)", nf.Status.Request)
		}
		answer = nf.Status.Request
		return nil
	})
	return answer
}

// TestRequests: an operator resolves a tainted node's fault with `faultline untaint`
// (a request on its NodeFault, with their kubeconfig): the taint goes, the record is
// Resolved and says who asked and why; a request that does not fit the fault is
// answered Refused; a viewer may not make requests (RBAC).
func TestRequests(t *testing.T) {
	cl := newCluster(t, "gpu-1", "gpu-2", "gpu-3")
	cl.start(options{decide: decide.Config{MaxPercent: 100}})
	viewer, _, err := rbac.APIRoles()
	if err != nil {
		t.Fatal(err)
	}
	opToken := cl.operator()
	op := cl.kubeconfigFor(opToken)
	cl.push("gpu-1", time.Now(), xid79)
	cl.waitFor("gpu-1 tainted", 30*time.Second, func() bool { return cl.tainted("gpu-1") })
	bin := testenv.BuildFaultline(t)

	out, err := exec.Command(bin, "untaint", "gpu-1", "--kubeconfig", op, "--reason", "GPU reseated", "-o", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("faultline untaint: %v\n%s", err, out)
	}
	var answers []struct {
		Fault  string                  `json:"fault"`
		Answer *v1alpha1.RequestStatus `json:"answer"`
	}
	if err := json.Unmarshal(out, &answers); err != nil || len(answers) != 1 || answers[0].Answer == nil {
		t.Fatalf("faultline untaint -o json: %v\n%s", err, out)
	}
	const who = "system:serviceaccount:" + ns + ":operator"
	a := answers[0].Answer
	if a.Result != v1alpha1.RequestDone || a.RequestedBy != who || a.Action != v1alpha1.RequestResolve ||
		!strings.Contains(a.Message, "removed faultline.io/faulty=xid-gpu-lost:NoSchedule") || !strings.Contains(a.Message, "GPU reseated") {
		t.Errorf("the answer: %+v", a)
	}
	if cl.tainted("gpu-1") {
		t.Error("gpu-1 still tainted after its fault was resolved")
	}
	nf, err := cl.record("gpu-1", "nvidia-xid", xid79Rule)
	if err != nil {
		t.Fatal(err)
	}
	if st := nf.Status; st.Phase != v1alpha1.PhaseResolved || st.Request == nil || st.Request.RequestedBy != who ||
		!strings.Contains(st.Message, "by request of "+who+": GPU reseated") {
		t.Errorf("gpu-1's record after the request: phase %s (%s), request %+v", st.Phase, st.Message, st.Request)
	}

	// A fleet fault's verdict on a node fault is refused, and says why.
	if a := cl.request(opToken, nf.Name, v1alpha1.RequestDismiss); a.Result != v1alpha1.RequestRefused || !strings.Contains(a.Message, "fleet fault's verdict") {
		t.Errorf("Dismiss on a node fault: %+v", a)
	}
	// A viewer may read the fault but not ask anything of it.
	vk := cl.kubeconfigFor(cl.apiUser("viewer", viewer))
	if out, err := exec.Command(bin, "fault", "resolve", nf.Name, "--kubeconfig", vk).CombinedOutput(); err == nil || !strings.Contains(string(out), "forbidden") {
		t.Errorf("a viewer's request: %v\n%s", err, out)
	}
}
