package dashboards_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// window is the time range of a query: Grafana's dashboard time range and step.
type window struct {
	start, end time.Time
	step       time.Duration
}

// series is one series (metric queries) or stream (log queries) of a result.
type series struct {
	Labels map[string]string
	Values []float64
	Lines  []string
}

func (s series) last() float64 {
	if len(s.Values) == 0 {
		return math.NaN()
	}
	return s.Values[len(s.Values)-1]
}

func (s series) sum() float64 {
	t := 0.0
	for _, v := range s.Values {
		if !math.IsNaN(v) {
			t += v
		}
	}
	return t
}

func (s series) max() float64 {
	m := math.Inf(-1)
	for _, v := range s.Values {
		if v > m {
			m = v
		}
	}
	return m
}

type result struct {
	Type   string
	Series []series
}

// key joins the values of the given labels.
func key(s series, labels ...string) string {
	var parts []string
	for _, l := range labels {
		parts = append(parts, s.Labels[l])
	}
	return strings.Join(parts, " ")
}

// totals sums every point of every series per key: for count_over_time over
// [$__interval] with step $__interval the windows tile the range, so this is the
// number of lines in the range.
func (r result) totals(labels ...string) map[string]int {
	m := map[string]int{}
	for _, s := range r.Series {
		m[key(s, labels...)] += int(math.Round(s.sum()))
	}
	return m
}

func (r result) lasts(labels ...string) map[string]float64 {
	m := map[string]float64{}
	for _, s := range r.Series {
		m[key(s, labels...)] = s.last()
	}
	return m
}

func (r result) lines() []string {
	var out []string
	for _, s := range r.Series {
		out = append(out, s.Lines...)
	}
	return out
}

// apiResponse is Loki's and Prometheus's query response.
type apiResponse struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

func parseResult(u string) (result, error) {
	var resp apiResponse
	if err := getJSON(u, &resp); err != nil {
		return result{}, err
	}
	if resp.Status != "success" {
		return result{}, fmt.Errorf("status %q", resp.Status)
	}
	r := result{Type: resp.Data.ResultType}
	num := func(v any) float64 {
		s, _ := v.(string)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return math.NaN()
		}
		return f
	}
	switch r.Type {
	case "matrix":
		var m []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		}
		if err := json.Unmarshal(resp.Data.Result, &m); err != nil {
			return r, err
		}
		for _, e := range m {
			s := series{Labels: e.Metric}
			for _, v := range e.Values {
				s.Values = append(s.Values, num(v[1]))
			}
			r.Series = append(r.Series, s)
		}
	case "vector":
		var m []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(resp.Data.Result, &m); err != nil {
			return r, err
		}
		for _, e := range m {
			r.Series = append(r.Series, series{Labels: e.Metric, Values: []float64{num(e.Value[1])}})
		}
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(resp.Data.Result, &v); err != nil {
			return r, err
		}
		r.Series = []series{{Labels: map[string]string{}, Values: []float64{num(v[1])}}}
	case "streams":
		var m []struct {
			Stream map[string]string `json:"stream"`
			Values [][2]string       `json:"values"`
		}
		if err := json.Unmarshal(resp.Data.Result, &m); err != nil {
			return r, err
		}
		for _, e := range m {
			s := series{Labels: e.Stream}
			for _, v := range e.Values {
				s.Lines = append(s.Lines, v[1])
			}
			r.Series = append(r.Series, s)
		}
	default:
		return r, fmt.Errorf("result type %q", r.Type)
	}
	return r, nil
}

// lokiQuery runs a LogQL query as Grafana does: /query for an instant query at the
// end of the range, /query_range otherwise (zero window: the last hour, now).
func lokiQuery(base, expr string, instant bool, w window) (result, error) {
	if w.end.IsZero() {
		w = window{start: time.Now().Add(-time.Hour), end: time.Now(), step: 15 * time.Second}
	}
	q := url.Values{"query": {expr}}
	if instant {
		q.Set("time", strconv.FormatInt(w.end.UnixNano(), 10))
		return parseResult(base + "/loki/api/v1/query?" + q.Encode())
	}
	q.Set("start", strconv.FormatInt(w.start.UnixNano(), 10))
	q.Set("end", strconv.FormatInt(w.end.UnixNano(), 10))
	q.Set("step", fmt.Sprint(w.step.Seconds()))
	q.Set("limit", "1000")
	q.Set("direction", "backward")
	return parseResult(base + "/loki/api/v1/query_range?" + q.Encode())
}

// promQuery runs a PromQL query: /api/v1/query or /api/v1/query_range.
func promQuery(base, expr string, instant bool, w window) (result, error) {
	if w.end.IsZero() {
		w = window{start: time.Now().Add(-10 * time.Minute), end: time.Now(), step: 15 * time.Second}
	}
	q := url.Values{"query": {expr}}
	if instant {
		q.Set("time", strconv.FormatFloat(float64(w.end.UnixMilli())/1000, 'f', 3, 64))
		return parseResult(base + "/api/v1/query?" + q.Encode())
	}
	q.Set("start", strconv.FormatFloat(float64(w.start.UnixMilli())/1000, 'f', 3, 64))
	q.Set("end", strconv.FormatFloat(float64(w.end.UnixMilli())/1000, 'f', 3, 64))
	q.Set("step", fmt.Sprint(w.step.Seconds()))
	return parseResult(base + "/api/v1/query_range?" + q.Encode())
}

// substitute replaces variables the way Grafana interpolates them before it sends a
// query; a variable with no value is an error.
func substitute(expr string, vals map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(expr, func(m string) string {
		sm := varRef.FindStringSubmatch(m)
		name := sm[1] + sm[2] + sm[3]
		v, ok := vals[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("no value for variables %v", missing)
	}
	return out, nil
}

// selection is a value of the dashboards' node variable.
type selection struct {
	name, value string
}

type targetKey struct{ uid, panel, ref string }

func TestDashboardQueries(t *testing.T) {
	t0 := time.Now()
	ds := loadDashboards(t)
	s := startStack(t)
	// The range ends now and holds a whole number of steps, so the last point of a
	// range query is now: a series that began less than a step ago is still there.
	step := 15 * time.Second
	end := time.Now().Truncate(time.Second)
	w := window{start: end.Add(-(end.Sub(t0.Add(-time.Minute))/step + 1) * step), end: end, step: step}
	rangeS := int(w.end.Sub(w.start).Seconds())
	builtins := map[string]string{
		"__interval": "15s", "__interval_ms": "15000", "__rate_interval": "1m",
		"__range": fmt.Sprintf("%ds", rangeS), "__range_s": strconv.Itoa(rangeS), "__range_ms": strconv.Itoa(rangeS * 1000),
	}
	run := func(kind, expr string, instant bool) (result, error) {
		if kind == "loki" {
			return lokiQuery(s.env.LokiURL(), expr, instant, w)
		}
		return promQuery(s.env.PrometheusURL(), expr, instant, w)
	}

	results := map[targetKey]result{} // the "All nodes" results, as Grafana runs each query
	queries := 0
	for _, d := range ds {
		dsVars := d.datasourceVars()
		for _, sel := range []selection{{"All", ".+"}, {"gpu-2", "gpu-2"}} {
			vals := map[string]string{}
			for k, v := range builtins {
				vals[k] = v
			}
			for name, kind := range dsVars {
				vals[name] = kind // the datasource is chosen by the test, not in the query
			}
			vals["node"] = sel.value
			for _, p := range d.allPanels() {
				if p.Datasource == nil {
					continue // TestDashboardFiles reports it
				}
				kind := p.Datasource.Type
				for _, tg := range p.Targets {
					where := fmt.Sprintf("%s / %s / %s (node=%s)", d.Title, p.Title, tg.RefID, sel.name)
					expr, err := substitute(tg.Expr, vals)
					if err != nil {
						t.Errorf("%s: %v\n  query: %s", where, err, tg.Expr)
						continue
					}
					instant := tg.instant(kind)
					r, err := run(kind, expr, instant)
					queries++
					if err != nil {
						t.Errorf("%s: %s query refused: %v\n  query: %s", where, kind, err, expr)
						continue
					}
					if instant {
						// A user may switch the query to a range query: it must be accepted too.
						queries++
						if _, err := run(kind, expr, false); err != nil {
							t.Errorf("%s: %s query refused as a range query: %v\n  query: %s", where, kind, err, expr)
						}
					}
					if sel.name == "All" {
						results[targetKey{d.UID, p.Title, tg.RefID}] = r
						if len(r.Series) == 0 {
							t.Errorf("%s: no data\n  query: %s", where, expr)
						} else {
							t.Logf("%s: %d series", where, len(r.Series))
						}
						continue
					}
					// A node selected: whatever is about a node is about that one.
					for _, se := range r.Series {
						n, ok := se.Labels["fault_node"]
						if !ok {
							n, ok = se.Labels["node"]
						}
						if ok && n != sel.value {
							t.Errorf("%s: a series of node %q (labels %v)\n  query: %s", where, n, se.Labels, expr)
							break
						}
					}
				}
			}
		}
		checkVariables(t, s, d, w)
	}
	t.Logf("%d queries executed", queries)

	// What the panels that count something must count.
	checked := map[targetKey]bool{}
	for k, check := range valueChecks(t, s) {
		r, ok := results[k]
		if !ok {
			t.Errorf("%s / %s / %s: no result (refused above, or no such query in the dashboards)", k.uid, k.panel, k.ref)
			continue
		}
		checked[k] = true
		if err := check(r, results); err != nil {
			t.Errorf("%s / %s / %s: %v", k.uid, k.panel, k.ref, err)
		}
	}
	t.Logf("%d of %d queries checked for their values", len(checked), len(results))
}

// checkVariables runs each query variable as Grafana does and checks the node
// variable lists both nodes.
func checkVariables(t *testing.T, s *stack, d dashboard, w window) {
	for _, v := range d.Templating.List {
		if v.Type != "query" || v.Datasource == nil {
			continue
		}
		where := fmt.Sprintf("%s / variable %s", d.Title, v.Name)
		var u string
		switch v.Datasource.Type {
		case "loki":
			var q struct {
				Label  string `json:"label"`
				Stream string `json:"stream"`
				Type   int    `json:"type"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil || q.Type != 1 || q.Label == "" {
				t.Errorf("%s: not a label-values query: %s", where, v.Query)
				continue
			}
			u = s.env.LokiURL() + "/loki/api/v1/label/" + url.PathEscape(q.Label) + "/values?" + url.Values{"query": {q.Stream},
				"start": {strconv.FormatInt(w.start.UnixNano(), 10)}, "end": {strconv.FormatInt(w.end.UnixNano(), 10)}}.Encode()
		case "prometheus":
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				_ = json.Unmarshal(v.Query, &q.Query)
			}
			var metric, label string
			if m := strings.TrimSuffix(strings.TrimPrefix(q.Query, "label_values("), ")"); m != q.Query {
				metric, label, _ = strings.Cut(m, ",")
			}
			if label = strings.TrimSpace(label); label == "" {
				t.Errorf("%s: not a label_values(metric, label) query: %s", where, v.Query)
				continue
			}
			u = s.env.PrometheusURL() + "/api/v1/label/" + url.PathEscape(label) + "/values?" + url.Values{"match[]": {strings.TrimSpace(metric)},
				"start": {strconv.FormatInt(w.start.Unix(), 10)}, "end": {strconv.FormatInt(w.end.Unix(), 10)}}.Encode()
		default:
			t.Errorf("%s: datasource %s", where, v.Datasource.Type)
			continue
		}
		var resp struct {
			Status string   `json:"status"`
			Data   []string `json:"data"`
		}
		if err := getJSON(u, &resp); err != nil || resp.Status != "success" {
			t.Errorf("%s: %v (status %q)", where, err, resp.Status)
			continue
		}
		sort.Strings(resp.Data)
		if v.Name == "node" && strings.Join(resp.Data, ",") != "gpu-1,gpu-2" {
			t.Errorf("%s: values %v, want gpu-1 and gpu-2", where, resp.Data)
		}
		t.Logf("%s: %v", where, resp.Data)
	}
}

type check func(r result, all map[targetKey]result) error

func equalCounts(got, want map[string]int) error {
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("counts %v, want %v (%q: %d, want %d)", got, want, k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok && v != 0 {
			return fmt.Errorf("counts %v, want %v (%q unexpected)", got, want, k)
		}
	}
	return nil
}

func countLines(lines map[string][]string, match func(string) bool) map[string]int {
	m := map[string]int{}
	for node, ls := range lines {
		for _, l := range ls {
			if match(l) {
				m[node]++
			}
		}
	}
	return m
}

// valueChecks are what the panels must show for the logs and probes of the stack.
func valueChecks(t *testing.T, s *stack) map[targetKey]check {
	logs := s.written
	kernel := map[string][]string{}
	for node := range logs.kernel {
		kernel[node] = logs.texts(node)
	}
	xids := logs.codes(func(l kline) string { return l.xid })
	sxids := logs.codes(func(l kline) string { return l.sxid })
	faults := func(panel, ref string) targetKey { return targetKey{"faultline-faults", panel, ref} }
	probesKey := func(panel, ref string) targetKey { return targetKey{"faultline-probes", panel, ref} }
	linkDownsByNode := map[string]int{}
	linksByNIC := map[string]int{}
	for node, ls := range kernel {
		for nic, n := range linkDowns(t, ls) {
			linkDownsByNode[node] += n
			linksByNIC[node+" "+nic] += n
		}
	}
	nested := func(m map[string]map[string]int) map[string]int {
		out := map[string]int{}
		for a, inner := range m {
			for b, n := range inner {
				out[a+" "+b] = n
			}
		}
		return out
	}
	// AER events by severity, as the kernel prints them: "PCIe Bus Error: severity=<s>,".
	aer := map[string]int{}
	for node, ls := range kernel {
		for _, l := range ls {
			if _, rest, ok := strings.Cut(strings.ToLower(l), "pcie bus error: severity="); ok {
				sev, _, _ := strings.Cut(l[len(l)-len(rest):], ",")
				aer[node+" "+sev]++
			}
		}
	}
	kind := func(match func(string) bool) check {
		return func(r result, _ map[targetKey]result) error {
			return equalCounts(r.totals("node"), countLines(kernel, match))
		}
	}
	contains := func(subs ...string) func(string) bool {
		return func(l string) bool {
			for _, s := range subs {
				if strings.Contains(l, s) {
					return true
				}
			}
			return false
		}
	}
	hasLine := func(want ...string) check {
		return func(r result, _ map[targetKey]result) error {
			for _, w := range want {
				found := false
				for _, l := range r.lines() {
					if strings.HasPrefix(l, w) {
						found = true
						break
					}
				}
				if !found {
					return fmt.Errorf("no line starting with %q in %d lines", w, len(r.lines()))
				}
			}
			return nil
		}
	}
	lastIs := func(want map[string]float64, labels ...string) check {
		return func(r result, _ map[targetKey]result) error {
			got := r.lasts(labels...)
			for k, v := range want {
				if g, ok := got[k]; !ok || g != v {
					return fmt.Errorf("%s: %v, want %v (all: %v)", k, g, v, got)
				}
			}
			return nil
		}
	}
	present := func(label string, values ...string) check {
		return func(r result, _ map[targetKey]result) error {
			got := map[string]float64{}
			for _, se := range r.Series {
				got[se.Labels[label]] = math.Max(got[se.Labels[label]], se.max())
			}
			for _, v := range values {
				if g, ok := got[v]; !ok || !(g > 0) {
					return fmt.Errorf("%s=%q: %v, want > 0 (all: %v)", label, v, g, got)
				}
			}
			return nil
		}
	}
	perNode := func(n int) check {
		return func(r result, _ map[targetKey]result) error {
			got := map[string]int{}
			for _, se := range r.Series {
				got[se.Labels["node"]]++
			}
			if got["gpu-1"] != n || got["gpu-2"] != n {
				return fmt.Errorf("series per node %v, want %d each", got, n)
			}
			return nil
		}
	}

	return map[targetKey]check{
		// Faults: every count is what the nodes logged.
		faults("Fault lines by node and kind", "A"): kind(contains("NVRM: Xid")),
		faults("Fault lines by node and kind", "B"): kind(contains("SXid")),
		faults("Fault lines by node and kind", "C"): kind(contains("fallen off the bus")),
		faults("Fault lines by node and kind", "D"): kind(contains("AER:", "PCIe Bus Error")),
		faults("Fault lines by node and kind", "E"): func(r result, _ map[targetKey]result) error {
			return equalCounts(r.totals("node"), linkDownsByNode)
		},
		faults("Fault lines by node and kind", "F"): func(r result, _ map[targetKey]result) error {
			return equalCounts(r.totals("node"), map[string]int{"gpu-1": len(nvmlXids)})
		},
		faults("Top Xid codes", "B"): func(r result, _ map[targetKey]result) error {
			return equalCounts(r.totals("xid"), s.nvml)
		},
		faults("Xid codes by node and GPU", "B"): func(r result, _ map[targetKey]result) error {
			want := map[string]int{}
			for x, n := range s.nvml {
				want["gpu-1 "+x] = n
			}
			for _, se := range r.Series {
				if se.Labels["pci"] == "" {
					return fmt.Errorf("no pci label: %v", se.Labels)
				}
			}
			return equalCounts(r.totals("node", "xid"), want)
		},
		faults("Top Xid codes", "A"): func(r result, _ map[targetKey]result) error {
			want := xids["gpu-1"]
			got := r.totals("xid")
			if len(got) != min(10, len(want)) {
				return fmt.Errorf("%d codes, want %d: %v", len(got), min(10, len(want)), got)
			}
			least := math.MaxInt
			for x, n := range got {
				if want[x] != n {
					return fmt.Errorf("Xid %s: %d lines, the corpus has %d", x, n, want[x])
				}
				least = min(least, n)
			}
			for x, n := range want {
				if _, shown := got[x]; !shown && n > least {
					return fmt.Errorf("Xid %s (%d lines) not in the top 10 %v", x, n, got)
				}
			}
			return nil
		},
		faults("Xid codes by node and GPU", "A"): func(r result, _ map[targetKey]result) error {
			for _, se := range r.Series {
				if se.Labels["pci"] == "" {
					return fmt.Errorf("no pci label: %v", se.Labels)
				}
			}
			return equalCounts(r.totals("node", "xid"), nested(xids))
		},
		faults("SXid codes by node and NVSwitch", "A"): func(r result, _ map[targetKey]result) error {
			return equalCounts(r.totals("node", "sxid"), nested(sxids))
		},
		faults("Link flaps per NIC", "A"): func(r result, _ map[targetKey]result) error {
			return equalCounts(r.totals("node", "nic"), linksByNIC)
		},
		faults("PCIe AER errors by severity", "A"): func(r result, _ map[targetKey]result) error {
			return equalCounts(r.totals("node", "severity"), aer)
		},
		faults("Training-pod fault lines", "A"): func(r result, _ map[targetKey]result) error {
			return equalCounts(r.totals("node"), map[string]int{"gpu-2": len(logs.podFaults)})
		},
		faults("Training-pod error lines", "A"): func(r result, _ map[targetKey]result) error {
			if n := len(r.lines()); n != len(logs.podFaults) {
				return fmt.Errorf("%d lines, want the %d fault lines and none of the NCCL INFO traces", n, len(logs.podFaults))
			}
			return nil
		},
		faults("Probe failures", "A"): func(r result, _ map[targetKey]result) error {
			got := r.totals("node", "check", "status")
			if got["gpu-1 pciebw fail"] == 0 {
				return fmt.Errorf("no pciebw failure on gpu-1 (GPU 3 is slow): %v", got)
			}
			for k := range got {
				if strings.Contains(k, " ping ") || strings.Contains(k, " iperf3 ") {
					return fmt.Errorf("%s counted as a failure: %v", k, got)
				}
			}
			return nil
		},
		faults("Latest evidence lines", "A"): func(r result, _ map[targetKey]result) error {
			got := map[string]int{}
			for _, se := range r.Series {
				got[se.Labels["node"]] += len(se.Lines)
			}
			if got["gpu-1"] == 0 || got["gpu-2"] == 0 {
				return fmt.Errorf("lines per node %v", got)
			}
			return nil
		},
		faults("Probe results", "A"): hasLine("gpu-1 ping pass in", "gpu-1 iperf3 pass in", "gpu-1 pciebw fail in",
			"gpu-2 ping pass in", "gpu-2 pciebw pass in"),
		faults("Controller decisions", "A"): func(r result, _ map[targetKey]result) error {
			for _, l := range r.lines() {
				if strings.Contains(l, `"msg":"tainted"`) && strings.Contains(l, `"node":"gpu-1"`) {
					return nil
				}
			}
			return fmt.Errorf("no line of gpu-1 tainted in %d lines", len(r.lines()))
		},

		// Probes and controller.
		probesKey("Probe verdicts", "A"): lastIs(map[string]float64{"gpu-1 ping": 1, "gpu-1 iperf3": 1, "gpu-1 dgemm": 1,
			"gpu-1 pciebw": 0, "gpu-2 ping": 1, "gpu-2 pciebw": 1, "gpu-2 dgemm": 1}, "node", "check"),
		probesKey("Failing devices", "A"): func(r result, _ map[targetKey]result) error {
			for _, se := range r.Series {
				if se.Labels["node"] == "gpu-1" && se.Labels["check"] == "pciebw" && se.Labels["device"] == "3" && se.last() == 0 {
					return nil
				}
			}
			return fmt.Errorf("GPU 3 of gpu-1 not failing pciebw: %v", r.Series)
		},
		probesKey("PCIe bandwidth per GPU (GB/s)", "A"): func(r result, all map[targetKey]result) error {
			if err := perNode(16)(r, all); err != nil {
				return err
			}
			bw := r.lasts("node", "device", "metric")
			minimum := all[probesKey("PCIe bandwidth per GPU (GB/s)", "B")].lasts("node")
			if !(bw["gpu-1 3 h2d_gbps"] < minimum["gpu-1"]) || !(bw["gpu-1 0 h2d_gbps"] > minimum["gpu-1"]) {
				return fmt.Errorf("gpu-1 GPU 3 %.2f GB/s and GPU 0 %.2f GB/s against the minimum %.2f",
					bw["gpu-1 3 h2d_gbps"], bw["gpu-1 0 h2d_gbps"], minimum["gpu-1"])
			}
			return nil
		},
		probesKey("DGEMM (TFLOPS)", "A"):              perNode(8),
		probesKey("HBM bandwidth, DAXPY (GB/s)", "A"): perNode(8),
		probesKey("Network throughput, iperf3 (Gbit/s)", "A"): func(r result, _ map[targetKey]result) error {
			if v := r.lasts("node", "device")["gpu-1 127.0.0.1"]; !(v > 0) {
				return fmt.Errorf("gpu-1 → 127.0.0.1 received %v Gbit/s", v)
			}
			return nil
		},
		probesKey("Ping loss (%)", "A"): lastIs(map[string]float64{"gpu-1 127.0.0.1": 0, "gpu-2 127.0.0.1": 0}, "node", "device"),
		probesKey("Ping RTT (ms)", "A"): perNode(1),
		// increase() over the range is 0 for a counter whose first scrape already held
		// its final value (Prometheus cannot see that step): the series must be there.
		probesKey("Probe results by trigger", "A"): has("trigger", "manual"),
		probesKey("Lines read from Loki", "A"):     present("query", "kernel", "pod"),
		probesKey("Decisions", "A"):                has("action", "taint"),
		probesKey("Taints, budget, rules", "A"):    func(r result, _ map[targetKey]result) error { return atLeast(r, 1) },
		probesKey("Taints, budget, rules", "C"):    func(r result, _ map[targetKey]result) error { return atLeast(r, 1) },
		probesKey("Leader", "A"):                   lastIs(map[string]float64{"": 1}),
		probesKey("Exporter records", "A"):         present("source", "kernel", "pod"),
		probesKey("Exporter records", "B"):         present("source", "kernel", "pod"),
		probesKey("Exporter records", "C"):         present("reason", "malformed"),
		probesKey("Exporter buffer fill", "A"):     countSeries(2),
		probesKey("Probe agent requests", "A"):     present("code", "200"),
		probesKey("Probe durations (s)", "A"):      present("check", "pciebw", "dgemm", "ping", "iperf3"),
		probesKey("Loki lag (s)", "A"):             has("query", "kernel", "pod"),
		probesKey("Held faults", "A"):              has("reason", "budget", "storm"),
		// The lifecycle seed (seedLifecycle): one fault at the service step, one rule on
		// trial in annotate, one fleet fault of the pack dashboards-fleet.
		probesKey("Faults by escalation step", "A"): func(r result, _ map[targetKey]result) error {
			if got := r.lasts("action", "state"); len(got) != 1 || got["service Done"] != 1 {
				return fmt.Errorf("%v, want only service Done = 1", got)
			}
			return nil
		},
		probesKey("Faults by escalation step", "B"): has("action", "escalate-service"),
		probesKey("Node faults by phase", "A"):      lastAtLeast(map[string]float64{"Tainted": 2, "Observed": 1}, "phase"),
		probesKey("Open node faults by mode", "A"):  lastAtLeast(map[string]float64{"enforce": 2, "annotate": 1}, "mode"),
		probesKey("Open node faults by mode", "B"):  has("mode", "enforce", "annotate"),
		probesKey("Fleet faults", "A"):              lastIs(map[string]float64{"topology.kubernetes.io/rack dashboards-fleet": 1}, "label", "family"),
		probesKey("Fleet faults", "B"):              lastIs(map[string]float64{"Held": 1}, "phase"),
		probesKey("Taints, budget, rules", "B"):     countSeries(1),
		probesKey("Matches by rule", "A"): func(r result, _ map[targetKey]result) error {
			for _, se := range r.Series {
				if strings.HasPrefix(se.Labels["rule"], "nvidia-xid/") && se.max() > 0 {
					return nil
				}
			}
			return fmt.Errorf("no Xid rule matching: %v", r.Series)
		},
		probesKey("Exporter batch latency p99 (s)", "A"): quantileWithin(10),
		probesKey("Probe runs by outcome", "A"):          present("status", "pass", "fail"),
		probesKey("Line → taint p99 (s)", "A"):           quantileWithin(60),
		probesKey("Line → taint p99 (s)", "B"):           quantileWithin(60),
		probesKey("Line → taint p99 (s)", "C"):           quantileWithin(60),
		probesKey("Time since the last probe run (s)", "A"): func(r result, _ map[targetKey]result) error {
			for _, se := range r.Series {
				if v := se.last(); !(v >= 0 && v < 600) {
					return fmt.Errorf("%v: %v s", se.Labels, v)
				}
			}
			return nil
		},
	}
}

// quantileWithin checks a quantile's one series reached a value above 0 and below
// limit (seconds) within the range.
func quantileWithin(limit float64) check {
	return func(r result, _ map[targetKey]result) error {
		if len(r.Series) != 1 {
			return fmt.Errorf("%d series, want 1", len(r.Series))
		}
		if v := r.Series[0].max(); !(v > 0 && v < limit) {
			return fmt.Errorf("quantile at most %v s, want above 0 and below %v", v, limit)
		}
		return nil
	}
}

// has checks the series of each value exist, whatever their values.
func has(label string, values ...string) check {
	return func(r result, _ map[targetKey]result) error {
		got := map[string]bool{}
		for _, se := range r.Series {
			got[se.Labels[label]] = true
		}
		for _, v := range values {
			if !got[v] {
				return fmt.Errorf("no series with %s=%q: %v", label, v, got)
			}
		}
		return nil
	}
}

// lastAtLeast checks the last value of each series named (by labels) is at least want's.
func lastAtLeast(want map[string]float64, labels ...string) check {
	return func(r result, _ map[targetKey]result) error {
		got := r.lasts(labels...)
		for k, v := range want {
			if got[k] < v {
				return fmt.Errorf("%s: %v, want at least %v (all: %v)", k, got[k], v, got)
			}
		}
		return nil
	}
}

func atLeast(r result, n float64) error {
	for _, se := range r.Series {
		if se.last() >= n {
			return nil
		}
	}
	return fmt.Errorf("no series at %v or more: %v", n, r.Series)
}

func countSeries(n int) check {
	return func(r result, _ map[targetKey]result) error {
		if len(r.Series) != n {
			return fmt.Errorf("%d series, want %d", len(r.Series), n)
		}
		return nil
	}
}
