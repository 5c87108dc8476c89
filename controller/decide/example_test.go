package decide_test

import (
	"fmt"
	"time"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/rules"
)

func Example() {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	d, _ := decide.New(decide.Config{MaxPercent: 10, Now: func() time.Time { return now }})
	xid79 := &rules.Compiled{Pack: "nvidia-xid", ID: "xid-gpu-lost", Action: rules.ActionTaint,
		Recover: rules.Recover{Manual: true}}
	facts := decide.NodeFacts{Eligible: 20}
	for _, node := range []string{"gpu-01", "gpu-02", "gpu-03"} {
		dec := d.Decide(fault.Fault{Node: node, Rule: xid79, Time: now}, facts)
		if dec.Kind == decide.KindHold {
			fmt.Println(node, dec.Kind, dec.Reason)
		} else {
			fmt.Println(node, dec.Kind)
		}
	}
	fmt.Println("held:", len(d.Held()))
	// gpu-01 is repaired and untainted: its slot goes to the oldest held fault.
	d.Taints().Untainted("gpu-01")
	facts.Tainted = map[string][]string{"gpu-02": {"nvidia-xid/xid-gpu-lost"}}
	for _, dec := range d.Release(facts) {
		fmt.Println("released", dec.Fault.Node, dec.Kind)
	}
	// Output:
	// gpu-01 taint
	// gpu-02 taint
	// gpu-03 hold budget
	// held: 1
	// released gpu-03 taint
}
