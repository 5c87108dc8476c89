package main

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/faultline-dev/faultline/controller/lokisource"
)

// The selector flags come from the table of log sources; their names, defaults and
// help are the controller's interface and stay as they were.
func TestSelectorFlags(t *testing.T) {
	f := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var lf lokiFlags
	lf.register(f, &lokisource.Config{})
	for name, want := range map[string][2]string{
		"kernel-selector": {`{source="kernel"}`, "LogQL stream selector of kernel logs"},
		"pod-selector":    {`{source="pod"}`, "LogQL stream selector of training-pod logs"},
		"nvml-selector":   {`{source="nvml"}`, "LogQL stream selector of the GPU events the probe agents read through NVML"},
		"probe-selector":  {`{source="probe"}`, "LogQL stream selector of the probe agents' verdict lines, one per check they run"},
	} {
		fl := f.Lookup(name)
		if fl == nil {
			t.Errorf("no --%s", name)
			continue
		}
		if fl.DefValue != want[0] || fl.Usage != want[1] {
			t.Errorf("--%s: default %s, help %q; want %s, %q", name, fl.DefValue, fl.Usage, want[0], want[1])
		}
	}
	if err := f.Parse([]string{`--pod-selector={app="x"}`}); err != nil {
		t.Fatal(err)
	}
	got := lf.selectors()
	if len(got) != 4 || got["pod"] != `{app="x"}` || got["kernel"] != `{source="kernel"}` || got["nvml"] != `{source="nvml"}` ||
		got["probe"] != `{source="probe"}` {
		t.Errorf("selectors() = %v", got)
	}
}
