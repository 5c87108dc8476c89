package nodeattr

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/faultline-dev/faultline/collector/nodeauth"
)

// authed is the client.AuthData the nodeauth authenticator gives an exporter of node.
type authed string

func (a authed) GetAttribute(name string) any {
	if name == nodeauth.AttrNode {
		return string(a)
	}
	return nil
}
func (a authed) GetAttributeNames() []string { return []string{nodeauth.AttrNode} }

// logs builds one resource per claimed node, two records each; the second record
// of the first two resources also names a node in its own attributes.
func logs(nodes ...string) plog.Logs {
	ld := plog.NewLogs()
	for i, n := range nodes {
		rl := ld.ResourceLogs().AppendEmpty()
		if n != "" {
			rl.Resource().Attributes().PutStr("k8s.node.name", n)
			rl.Resource().Attributes().PutStr("node", n)
		}
		lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
		lrs.AppendEmpty().Body().SetStr("line")
		r := lrs.AppendEmpty()
		r.Body().SetStr("line")
		if i < 2 {
			r.Attributes().PutStr("host.name", "elsewhere")
		}
	}
	return ld
}

func TestProcessor(t *testing.T) {
	p, sink, reader := newProcessor(t)
	ctx := client.NewContext(context.Background(), client.Info{Auth: authed("gpu-1")})

	// Resource 0 claims gpu-1 (one record claims elsewhere), resource 1 claims
	// gpu-9 (one record elsewhere too), resource 2 claims nothing.
	if err := p.ConsumeLogs(ctx, logs("gpu-1", "gpu-9", "")); err != nil {
		t.Fatal(err)
	}
	got := sink.AllLogs()[0]
	for i := 0; i < got.ResourceLogs().Len(); i++ {
		rl := got.ResourceLogs().At(i)
		for _, k := range []string{"k8s.node.name", "host.name", "node"} {
			if v, _ := rl.Resource().Attributes().Get(k); v.AsString() != "gpu-1" {
				t.Errorf("resource %d: %s = %q, want the sender's gpu-1", i, k, v.AsString())
			}
		}
		lrs := rl.ScopeLogs().At(0).LogRecords()
		for j := 0; j < lrs.Len(); j++ {
			if v, ok := lrs.At(j).Attributes().Get("host.name"); ok && v.AsString() != "gpu-1" {
				t.Errorf("resource %d record %d: host.name %q", i, j, v.AsString())
			}
		}
	}
	// Relabelled: the record that named elsewhere, both records under gpu-9 (each
	// once). The resource without a node claimed nothing and is not counted.
	if n := counter(t, reader, "faultline_nodeattr_relabelled_log_records"); n != 3 {
		t.Errorf("relabelled %d records, want 3", n)
	}

	// No authenticated node: refused for good, counted, nothing passed on.
	err := p.ConsumeLogs(context.Background(), logs("gpu-1"))
	if !errors.Is(err, ErrNoNode) || !consumererror.IsPermanent(err) {
		t.Errorf("unauthenticated request: %v, want a permanent ErrNoNode", err)
	}
	if sink.LogRecordCount() != 6 {
		t.Errorf("%d records passed on, want the 6 of the authenticated request", sink.LogRecordCount())
	}
	if n := counter(t, reader, "faultline_nodeattr_unauthenticated_log_records"); n != 2 {
		t.Errorf("unauthenticated %d records, want 2", n)
	}
}

func counter(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				var n int64
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					n += dp.Value
				}
				return n
			}
		}
	}
	return 0
}

// A node named in an instrumentation scope's attributes (Loki keeps them as
// structured metadata) is the sender's too, and its records count as relabelled.
func TestScopeAttributes(t *testing.T) {
	p, sink, reader := newProcessor(t)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("node", "gpu-0")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().Attributes().PutStr("node", "gpu-4")
	sl.Scope().Attributes().PutStr("k8s.node.name", "gpu-4")
	sl.LogRecords().AppendEmpty().Body().SetStr("NVRM: Xid (PCI:0000:4e:00): 79, forged for gpu-4")
	honest := rl.ScopeLogs().AppendEmpty()
	honest.Scope().Attributes().PutStr("node", "gpu-0")
	honest.LogRecords().AppendEmpty().Body().SetStr("line")
	ctx := client.NewContext(context.Background(), client.Info{Auth: authed("gpu-0")})
	if err := p.ConsumeLogs(ctx, ld); err != nil {
		t.Fatal(err)
	}
	got := sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs()
	for j := 0; j < got.Len(); j++ {
		for _, k := range []string{"node", "k8s.node.name"} {
			if v, ok := got.At(j).Scope().Attributes().Get(k); ok && v.AsString() != "gpu-0" {
				t.Errorf("scope %d: %s = %q, want the sender's gpu-0", j, k, v.AsString())
			}
		}
	}
	if n := counter(t, reader, "faultline_nodeattr_relabelled_log_records"); n != 1 {
		t.Errorf("relabelled %d records, want the 1 under the forged scope", n)
	}
}

// newProcessor is the processor with its default configuration, the sink it passes
// records on to and the reader of its metrics.
func newProcessor(t *testing.T) (processor.Logs, *consumertest.LogsSink, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	set := processortest.NewNopSettings(Type)
	set.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	sink := new(consumertest.LogsSink)
	f := NewFactory()
	p, err := f.CreateLogs(context.Background(), set, f.CreateDefaultConfig(), sink)
	if err != nil {
		t.Fatal(err)
	}
	return p, sink, reader
}
