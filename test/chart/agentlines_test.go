package chart

import (
	"reflect"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/test/testenv"
)

// TestAgentLines: the probe agents ship their verdict lines to the collector even
// with NVML events off, and ship nothing (nor does the collector take their token)
// with both off.
func TestAgentLines(t *testing.T) {
	testenv.Integration(t)
	for _, tc := range []struct {
		name            string
		sets            []string
		receiver        bool
		nvml, noVerdict bool // --nvml-events, --verdict-lines=false
	}{
		{"defaults", nil, true, true, false},
		{"verdicts only", []string{"probeAgent.nvmlEvents.enabled=false"}, true, false, false},
		{"events only", []string{"probeAgent.verdictLines.enabled=false"}, true, true, true},
		{"neither", []string{"probeAgent.nvmlEvents.enabled=false", "probeAgent.verdictLines.enabled=false"}, false, false, false},
	} {
		c := caseNamed(t, "defaults")
		c.sets = tc.sets
		objs := parse(t, render(t, c))
		agc := &daemonSet(t, objs, "faultline-probe-agent").Spec.Template.Spec.Containers[0]
		receiver := false
		for _, a := range agc.Args {
			receiver = receiver || strings.HasPrefix(a, "--events-otlp-endpoint=")
		}
		if receiver != tc.receiver || hasArg(agc, "--nvml-events") != tc.nvml || hasArg(agc, "--verdict-lines=false") != tc.noVerdict {
			t.Errorf("%s: probe agent args %v", tc.name, agc.Args)
		}
		want := []any{"faultline/faultline-dmesg-exporter"}
		if tc.receiver {
			want = append(want, "faultline/faultline-probe-agent")
		}
		ccfg := collectorConfig(t, objs, "faultline-otel-collector")
		if sas := lookup(ccfg, "extensions", "faultlineauth", "service_accounts"); !reflect.DeepEqual(sas, want) {
			t.Errorf("%s: the collector takes %v, want %v", tc.name, sas, want)
		}
	}
}
