package controller_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/intake"
	"github.com/faultline-dev/faultline/kubeauth"
	"github.com/faultline-dev/faultline/logstream"
)

// anyone lets every token push (the intake's own tests check the refusals; kubeauth's
// the reviews against the apiserver).
type anyone struct{}

func (anyone) Authorize(context.Context, string, kubeauth.Action) (string, error) {
	return "system:serviceaccount:faultline:collector", nil
}

// pushIntake posts lines of node, as the collector sends them (the dmesg-exporter's
// attributes after the node processor), to an intake that delivers to deliver, and
// returns the status code.
func pushIntake(t *testing.T, deliver func(context.Context, []logstream.Line) error, node string, at time.Time, lines ...string) int {
	t.Helper()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	ra := rl.Resource().Attributes()
	for _, k := range []string{logstream.AttrK8sNodeName, logstream.AttrHostName, logstream.AttrNode} {
		ra.PutStr(k, node)
	}
	ra.PutStr(logstream.AttrSource, logstream.SourceKernel)
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i, l := range lines {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Duration(i) * time.Microsecond)))
		lr.Body().SetStr(l)
		lr.Attributes().PutStr(logstream.AttrLogSource, logstream.SourceKernel)
	}
	body, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := intake.New(intake.Config{Auth: anyone{}, Deliver: deliver, Metrics: intake.NewMetrics(nil),
		Lines: intake.Converter{NodeLabel: logstream.LabelNode, Sources: []string{logstream.SourceKernel}},
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, intake.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf")
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec.Code
}

// TestPushedLines: lines pushed to the intake are decided at once by the leader, and
// each line is decided once whichever path (the push, Loki's reading) brings it
// first: a threshold rule counts a line that came both ways once.
func TestPushedLines(t *testing.T) {
	cl := newCluster(t, "push-a", "push-b", "push-c", "push-d")
	r := cl.start(options{decide: decide.Config{MaxPercent: 100, DisableStorm: true}})

	// A replica that does not lead refuses, so the collector retries elsewhere.
	follower := cl.launch(options{identity: "replica-b"})
	if err := follower.c.Push(context.Background(), []logstream.Line{{Node: "push-a", Text: xid79, Time: time.Now()}}); !errors.Is(err, intake.ErrNotLeading) {
		t.Errorf("a follower's Push = %v, want ErrNotLeading", err)
	}
	if code := pushIntake(t, follower.c.Push, "push-a", time.Now(), xid79); code != http.StatusServiceUnavailable {
		t.Errorf("a follower's intake answered %d, want 503", code)
	}

	// Pushed: tainted without Loki holding the line at all.
	t0 := time.Now()
	if code := pushIntake(t, r.c.Push, "push-a", t0, xid79); code != http.StatusOK {
		t.Fatalf("intake answered %d", code)
	}
	cl.waitFor("push-a tainted", 10*time.Second, func() bool { return cl.tainted("push-a") })
	t.Logf("pushed line → taint seen: %s", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	pushIntake(t, r.c.Push, "push-d", t0, xid79)
	cl.waitFor("push-d tainted", 10*time.Second, func() bool { return cl.tainted("push-d") })
	t.Logf("2nd pushed line → taint seen: %s", time.Since(t0).Round(time.Millisecond))

	// Two link flaps pushed, then the same four lines written to Loki as the
	// collector does: counted once, so no third flap, no taint. A third flap
	// through Loki alone reaches the threshold.
	t1 := time.Now()
	flaps := linkFlap(2)
	if code := pushIntake(t, r.c.Push, "push-b", t1, flaps...); code != http.StatusOK {
		t.Fatalf("intake answered %d", code)
	}
	cl.push("push-b", t1, flaps...)
	// Every line of the flaps (each a part of the link-flap rule) is skipped.
	cl.waitFor("the flaps' lines read from Loki skipped", 15*time.Second, func() bool {
		return testutil.ToFloat64(r.m.DuplicateLines().WithLabelValues("loki")) == 4
	})
	time.Sleep(500 * time.Millisecond) // any decision on them is carried out by now
	if cl.tainted("push-b") {
		t.Fatal("push-b tainted: lines that came both ways were counted twice")
	}
	cl.push("push-b", t1.Add(time.Second), linkFlap(1)...)
	cl.waitFor("push-b tainted by the third flap", 15*time.Second, func() bool { return cl.tainted("push-b") })

	// The other way round: read from Loki first, then pushed late (a retry), skipped.
	t2 := time.Now()
	read := testutil.ToFloat64(r.m.LinesRead().WithLabelValues(logstream.SourceKernel))
	cl.push("push-c", t2, linkFlap(2)...)
	cl.waitFor("push-c's lines read from Loki", 15*time.Second, func() bool {
		return testutil.ToFloat64(r.m.LinesRead().WithLabelValues(logstream.SourceKernel)) >= read+4
	})
	if code := pushIntake(t, r.c.Push, "push-c", t2, linkFlap(2)...); code != http.StatusOK {
		t.Fatalf("intake answered %d", code)
	}
	if got := testutil.ToFloat64(r.m.DuplicateLines().WithLabelValues("intake")); got != 4 {
		t.Errorf("%v pushed lines skipped as read from Loki first, want 4", got)
	}
	time.Sleep(500 * time.Millisecond)
	if cl.tainted("push-c") {
		t.Error("push-c tainted: lines read from Loki and then pushed were counted twice")
	}
}
