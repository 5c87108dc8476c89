package dashboards_test

import (
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"

	"github.com/faultline-dev/faultline/test/eventually"
	"github.com/faultline-dev/faultline/test/testenv"
)

// nvmlXids are the Xid events gpu-1's probe agent read from NVML, as it ships them
// (one line each, stream {node, source="nvml"}; docs/probes.md): the Xid panels
// count them beside the kernel's lines.
var nvmlXids = []struct{ xid, line string }{
	{"79", "NVML: Xid 79 on GPU 0000:3b:00.0 (GPU-5c1a9d3e-7f2b-4c1d-9a8e-0b6f3e2d1c4a)"},
	{"79", "NVML: Xid 79 on GPU 0000:3b:00.0 (GPU-5c1a9d3e-7f2b-4c1d-9a8e-0b6f3e2d1c4a)"},
	{"48", "NVML: Xid 48 on GPU 0000:5e:00.0 (GPU-0b6f3e2d-1c4a-4c1d-9a8e-5c1a9d3e7f2b)"},
}

// pushNVML writes nvmlXids to Loki in the stream the agent's lines land in (pushed
// directly: the dashboards test has no NVML to read events from) and waits until
// Loki answers with them.
func (s *stack) pushNVML(t *testing.T) {
	st := push.Stream{Labels: `{node="gpu-1", source="nvml"}`}
	now := time.Now()
	s.nvml = map[string]int{}
	for i, x := range nvmlXids {
		st.Entries = append(st.Entries, push.Entry{Timestamp: now.Add(time.Duration(i) * time.Millisecond), Line: x.line})
		s.nvml[x.xid]++
	}
	if err := testenv.PushLoki(s.env.LokiURL(), []push.Stream{st}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, time.Minute, "the NVML lines in Loki", func() bool {
		r, err := lokiQuery(s.env.LokiURL(), `sum(count_over_time({source="nvml"} [1h]))`, true, window{})
		return err == nil && len(r.Series) == 1 && r.Series[0].last() == float64(len(nvmlXids))
	})
}
