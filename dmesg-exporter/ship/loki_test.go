package ship

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLokiSendEncodesEveryField(t *testing.T) {
	rc := newReceiver(t, reply{status: http.StatusNoContent})
	s := NewLoki(rc.URL, LokiOptions{Tenant: "team-a", Username: "u", Password: "p:w",
		Headers: map[string]string{"X-Extra": "1"}})
	recs := sampleRecords()
	if err := s.Send(context.Background(), recs); err != nil {
		t.Fatalf("Send: %v", err)
	}
	reqs := rc.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	c := reqs[0]
	if c.Method != http.MethodPost || c.Path != "/loki/api/v1/push" {
		t.Errorf("request %s %s, want POST /loki/api/v1/push", c.Method, c.Path)
	}
	for k, want := range map[string]string{
		"Content-Type":  "application/x-protobuf",
		"X-Scope-OrgID": "team-a",
		"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p:w")),
		"X-Extra":       "1",
	} {
		if got := c.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if ce := c.Header.Get("Content-Encoding"); ce != "" {
		t.Errorf("Content-Encoding %q: snappy is implied, none expected", ce)
	}
	req := decodeLoki(t, c)

	type wantStream struct {
		labels map[string]string
		recs   []int // indexes into recs, sorted by time
	}
	kernel := func(node string) map[string]string { return map[string]string{"node": node, "source": "kernel"} }
	pod := func(container string) map[string]string {
		return map[string]string{"node": "gpu-1", "source": "pod", "namespace": "train", "pod": "llm-0", "container": container}
	}
	want := []wantStream{
		{kernel("gpu-1"), []int{1, 0, 6, 7}}, // sorted by time; 0 and 6 share a timestamp and keep their order
		{pod("trainer"), []int{2, 3}},
		{pod("sidecar"), []int{4}},
		{kernel("gpu-2"), []int{5}},
	}
	if len(req.Streams) != len(want) {
		t.Fatalf("%d streams, want %d", len(req.Streams), len(want))
	}
	for i, w := range want {
		st := req.Streams[i]
		if got := parseLabels(t, st.Labels); !equalMaps(got, w.labels) {
			t.Errorf("stream %d labels %s = %v, want %v", i, st.Labels, got, w.labels)
		}
		if len(st.Entries) != len(w.recs) {
			t.Fatalf("stream %d: %d entries, want %d", i, len(st.Entries), len(w.recs))
		}
		for j, ri := range w.recs {
			r, e := recs[ri], st.Entries[j]
			if !e.Timestamp.Equal(r.Time) {
				t.Errorf("%q: timestamp %v, want %v", r.Body, e.Timestamp, r.Time)
			}
			if e.Line != r.Body {
				t.Errorf("entry %d/%d line %q, want %q", i, j, e.Line, r.Body)
			}
			var meta map[string]string
			if r.Source == SourceKernel {
				meta = map[string]string{"seq": itoa(r.Seq), "boot_id": r.BootID, "level": LevelName(r.Level), "facility": itoa(uint64(r.Facility))}
			} else {
				meta = map[string]string{"stream": r.Stream}
			}
			if got := metaMap(e.StructuredMetadata); !equalMaps(got, meta) {
				t.Errorf("%q: structured metadata %v, want %v", r.Body, got, meta)
			}
			if len(e.Parsed) != 0 {
				t.Errorf("%q: parsed labels %v", r.Body, e.Parsed)
			}
		}
	}
	// The exact label string of a stream, as Loki's docs spell it.
	if got, want := req.Streams[1].Labels, `{container="trainer", namespace="train", node="gpu-1", pod="llm-0", source="pod"}`; got != want {
		t.Errorf("labels %s, want %s", got, want)
	}
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }

func TestLevelName(t *testing.T) {
	want := []string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}
	for i, w := range want {
		if got := LevelName(i); got != w {
			t.Errorf("LevelName(%d) = %q, want %q", i, got, w)
		}
	}
	if got := LevelName(9); got != "9" {
		t.Errorf("LevelName(9) = %q", got)
	}
}

func TestLokiLabelsEscaping(t *testing.T) {
	for _, r := range []Record{
		{Node: `n"1`, Source: "kernel"},
		{Node: `back\slash`, Source: "pod", Namespace: "ns\nnewline", Pod: "tab\there", Container: "ünïcødé ✓"},
		{Node: "ctl\x00\x1f\x7f", Source: "pod", Pod: "invalid \xff utf8", Container: `}, x="y`},
		{Node: "only-node"},
	} {
		s := LokiLabels(&r)
		got := parseLabels(t, s)
		want := map[string]string{}
		for k, v := range map[string]string{"node": r.Node, "source": r.Source, "namespace": r.Namespace, "pod": r.Pod, "container": r.Container} {
			if v != "" {
				want[k] = validUTF8(v)
			}
		}
		if !equalMaps(got, want) {
			t.Errorf("LokiLabels = %s, parses to %v, want %v", s, got, want)
		}
	}
}

func TestLokiBearerAndZeroTime(t *testing.T) {
	rc := newReceiver(t, reply{status: http.StatusNoContent})
	s := NewLoki(rc.URL+"/loki/api/v1/push", LokiOptions{BearerToken: "tok", Username: "ignored"})
	now := t0.Add(time.Hour)
	s.(*Loki).now = func() time.Time { return now }
	if err := s.Send(context.Background(), []Record{{Body: "x \xff", Source: SourcePod, Node: "n1"}}); err != nil {
		t.Fatal(err)
	}
	c := rc.requests()[0]
	if got := c.Header.Get("Authorization"); got != "Bearer tok" {
		t.Errorf("Authorization %q", got)
	}
	if c.Path != "/loki/api/v1/push" {
		t.Errorf("path %q", c.Path)
	}
	e := decodeLoki(t, c).Streams[0].Entries[0]
	if !e.Timestamp.Equal(now) {
		t.Errorf("zero time sent as %v, want the send time %v", e.Timestamp, now)
	}
	if e.Line != "x \uFFFD" {
		t.Errorf("line %q", e.Line)
	}
	if len(e.StructuredMetadata) != 0 {
		t.Errorf("metadata %v for a pod record without stream", e.StructuredMetadata)
	}
	if got := s.Name(); got != "loki "+rc.URL+"/loki/api/v1/push" {
		t.Errorf("Name() = %q", got)
	}
}

func TestNameHidesCredentials(t *testing.T) {
	s := NewLoki("http://user:secret@127.0.0.1:1", LokiOptions{})
	if got := s.Name(); got != "loki http://user:xxxxx@127.0.0.1:1/loki/api/v1/push" {
		t.Errorf("Name() = %q", got)
	}
	err := s.Send(context.Background(), sampleRecords()[:1])
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("err = %v", err)
	}
}
