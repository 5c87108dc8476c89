package ship

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
)

// nvmlRecord is an NVML event as the probe agent ships it.
func nvmlRecord() Record {
	return Record{Time: t0, Body: "NVML: Xid 79 on GPU 0000:3b:00.0 (GPU-5c1a)", Source: SourceNVML, Node: "gpu-1", Level: 3}
}

// TestNVMLRecordOTLP: source nvml as a resource attribute and log.source, a severity
// from the level, no kernel attributes.
func TestNVMLRecordOTLP(t *testing.T) {
	rc := newReceiver(t)
	if err := NewOTLP(rc.URL, OTLPOptions{}).Send(context.Background(), []Record{nvmlRecord()}); err != nil {
		t.Fatal(err)
	}
	ld := decodeOTLP(t, rc.requests()[0])
	rl := ld.ResourceLogs().At(0)
	if got, _ := rl.Resource().Attributes().Get(AttrSource); got.Str() != "nvml" {
		t.Errorf("resource source = %q, want nvml", got.Str())
	}
	lr := rl.ScopeLogs().At(0).LogRecords().At(0)
	if got := lr.Attributes().AsRaw(); len(got) != 1 || got[AttrLogSource] != "nvml" {
		t.Errorf("attributes %v, want only log.source=nvml", got)
	}
	if lr.SeverityNumber() != plog.SeverityNumberError || lr.SeverityText() != "ERROR" {
		t.Errorf("severity %v %q, want ERROR", lr.SeverityNumber(), lr.SeverityText())
	}
}

// TestNVMLRecordLoki: the stream {node, source="nvml"} and the level as metadata.
func TestNVMLRecordLoki(t *testing.T) {
	rc := newReceiver(t, reply{status: http.StatusNoContent})
	if err := NewLoki(rc.URL, LokiOptions{}).Send(context.Background(), []Record{nvmlRecord()}); err != nil {
		t.Fatal(err)
	}
	req := decodeLoki(t, rc.requests()[0])
	if len(req.Streams) != 1 {
		t.Fatalf("%d streams, want 1", len(req.Streams))
	}
	if got := parseLabels(t, req.Streams[0].Labels); !equalMaps(got, map[string]string{"node": "gpu-1", "source": "nvml"}) {
		t.Errorf("labels %v", got)
	}
	if got := metaMap(req.Streams[0].Entries[0].StructuredMetadata); !equalMaps(got, map[string]string{"level": "err"}) {
		t.Errorf("metadata %v, want level=err", got)
	}
}
