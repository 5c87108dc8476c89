package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/lokisource"
)

func TestShardFlags(t *testing.T) {
	const key = "faultline.io/shard"
	cases := []struct {
		name  string
		flags shardFlags
		owns  map[string]bool // node label value ("" unlabelled) → owned
	}{
		{"shard", shardFlags{label: key, value: "a"}, map[string]bool{"a": true, "b": false, "": false}},
		{"default shard", shardFlags{label: key, value: "b", others: []string{"a"}}, map[string]bool{"a": false, "b": true, "": true, "c": true}},
	}
	for _, tc := range cases {
		cfg := controller.Config{Selectors: lokisource.DefaultSelectors()}
		if err := tc.flags.apply(&cfg); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for v, want := range tc.owns {
			set := labels.Set{}
			if v != "" {
				set[key] = v
			}
			if got := cfg.Act.Shard.Matches(set); got != want {
				t.Errorf("%s: node labelled %q owned %v, want %v", tc.name, v, got, want)
			}
		}
		if want := "faultline-controller-" + tc.flags.value; cfg.LeaseName != want {
			t.Errorf("%s: Lease %q, want %q", tc.name, cfg.LeaseName, want)
		}
		if want := "faultline-checkpoint-" + tc.flags.value; cfg.CheckpointName != want {
			t.Errorf("%s: checkpoint %q, want %q", tc.name, cfg.CheckpointName, want)
		}
	}
	for _, bad := range []shardFlags{
		{value: "a"},               // no label
		{label: key},               // no value
		{label: key, value: "A_1"}, // not a DNS label: it names the Lease
		{label: key, value: "a", others: []string{"a"}}, // its own value excluded
		{label: key, value: "a", matcher: "node"},       // not a matcher
	} {
		cfg := controller.Config{Selectors: lokisource.DefaultSelectors()}
		if err := bad.apply(&cfg); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	named := shardFlags{label: key, value: "Pool_A", name: "pool-a"}
	cfg := controller.Config{Selectors: lokisource.DefaultSelectors()}
	if err := named.apply(&cfg); err != nil || cfg.LeaseName != "faultline-controller-pool-a" || cfg.CheckpointName != "faultline-checkpoint-pool-a" ||
		!cfg.Act.Shard.Matches(labels.Set{key: "Pool_A"}) {
		t.Errorf("--shard Pool_A --shard-name pool-a: err %v, Lease %q, checkpoint %q, selector %v", err, cfg.LeaseName, cfg.CheckpointName, cfg.Act.Shard)
	}
	cfg = controller.Config{}
	if err := (&shardFlags{}).apply(&cfg); err != nil || cfg.Act.Shard != nil || cfg.LeaseName != "" {
		t.Errorf("no shard: err %v, selector %v, lease %q; want one controller for every node", err, cfg.Act.Shard, cfg.LeaseName)
	}
}
