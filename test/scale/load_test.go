package scale_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/faultline-dev/faultline/logstream"
)

// Lines the background sends. The benign ones are what a healthy node's kernel says
// and no pack matches; the candidates pass the controller's LogQL filter and reach
// the matcher (a corrected AER error is an info rule whose storm threshold no node
// reaches; a link-up is the companion of the link-flap rule) but taint nothing.
const (
	benignLine = "EXT4-fs (md0): mounted filesystem with ordered data mode. Quota mode: none."
	aerLine    = "pcieport 0000:00:02.0: AER: Corrected error received: 0000:00:02.%d"
	linkUpLine = "mlx5_core 0000:b5:00.0 ens6f%d: Link up"
	xid79Line  = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
)

// pusher sends kernel lines to Loki's push API as the dmesg-exporter's pipeline does,
// or, with otlp, to the collector's OTLP/HTTP receiver as the dmesg-exporter does.
type pusher struct {
	url      string
	nodeMeta bool // see kernelStream
	otlp     bool
	client   *http.Client
	sent     atomic.Int64 // candidate and benign lines accepted
	failed   atomic.Int64 // lines in pushes Loki refused or that did not arrive
	mu       sync.Mutex
	errs     []error // the first few push failures, for the report
}

func newPusher(lokiURL string, nodeMeta bool) *pusher {
	return &pusher{url: lokiURL + "/loki/api/v1/push", nodeMeta: nodeMeta, client: &http.Client{Timeout: 30 * time.Second}}
}

// newOTLPPusher sends to the collector at otlpURL (its receiver's base URL).
func newOTLPPusher(otlpURL string) *pusher {
	return &pusher{url: otlpURL + "/v1/logs", nodeMeta: true, otlp: true, client: &http.Client{Timeout: 30 * time.Second}}
}

// kernelStream is one node's kernel log stream with lines stamped from at on: the
// node is a stream label, or with p.nodeMeta structured metadata of each line.
func (p *pusher) kernelStream(node string, at time.Time, lines ...string) push.Stream {
	entries := make([]push.Entry, len(lines))
	for i, l := range lines {
		entries[i] = push.Entry{Timestamp: at.Add(time.Duration(i) * time.Microsecond), Line: l}
		if p.nodeMeta {
			entries[i].StructuredMetadata = push.LabelsAdapter{{Name: logstream.LabelNode, Value: node}}
		}
	}
	if p.nodeMeta {
		return push.Stream{Labels: `{source="kernel"}`, Entries: entries}
	}
	return push.Stream{Labels: fmt.Sprintf(`{%s=%q, source="kernel"}`, logstream.LabelNode, node), Entries: entries}
}

// byLabels merges streams of the same labels, in order, as a collector's push
// carries them (one stream per label set).
func byLabels(streams []push.Stream) []push.Stream {
	at := map[string]int{}
	var out []push.Stream
	for _, s := range streams {
		if i, ok := at[s.Labels]; ok {
			out[i].Entries = append(out[i].Entries, s.Entries...)
			continue
		}
		at[s.Labels] = len(out)
		out = append(out, s)
	}
	return out
}

// push sends streams in one request; a failure is counted and kept, not fatal, as the
// background runs on its own goroutine.
func (p *pusher) push(ctx context.Context, streams []push.Stream) error {
	n := 0
	for _, s := range streams {
		n += len(s.Entries)
	}
	err := p.send(ctx, byLabels(streams))
	if err != nil && ctx.Err() != nil {
		return err // the run is over, not a refusal
	}
	if err != nil {
		p.failed.Add(int64(n))
		p.mu.Lock()
		if len(p.errs) < 5 {
			p.errs = append(p.errs, err)
		}
		p.mu.Unlock()
		return err
	}
	p.sent.Add(int64(n))
	return nil
}

func (p *pusher) send(ctx context.Context, streams []push.Stream) error {
	var body []byte
	if p.otlp {
		raw, err := plogotlp.NewExportRequestFromLogs(otlpLogs(streams)).MarshalProto()
		if err != nil {
			return fmt.Errorf("marshal OTLP request: %w", err)
		}
		body = raw
	} else {
		raw, err := (&push.PushRequest{Streams: streams}).Marshal()
		if err != nil {
			return fmt.Errorf("marshal push request: %w", err)
		}
		body = snappy.Encode(nil, raw)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("push %d streams: %w", len(streams), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("push %d streams: %s: %s", len(streams), resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

// otlpLogs is the OTLP form of streams whose node is metadata, as the
// dmesg-exporter sends them: a resource per node with its node attributes.
func otlpLogs(streams []push.Stream) plog.Logs {
	ld := plog.NewLogs()
	byNode := map[string]plog.LogRecordSlice{}
	for _, s := range streams {
		for _, e := range s.Entries {
			node := ""
			for _, m := range e.StructuredMetadata {
				if m.Name == logstream.LabelNode {
					node = m.Value
				}
			}
			lrs, ok := byNode[node]
			if !ok {
				rl := ld.ResourceLogs().AppendEmpty()
				ra := rl.Resource().Attributes()
				ra.PutStr(logstream.AttrK8sNodeName, node)
				ra.PutStr(logstream.AttrNode, node)
				ra.PutStr(logstream.AttrSource, logstream.SourceKernel)
				lrs = rl.ScopeLogs().AppendEmpty().LogRecords()
				byNode[node] = lrs
			}
			lr := lrs.AppendEmpty()
			lr.SetTimestamp(pcommon.NewTimestampFromTime(e.Timestamp))
			lr.Body().SetStr(e.Line)
			lr.Attributes().PutStr(logstream.AttrLogSource, logstream.SourceKernel)
		}
	}
	return ld
}

// background sends, ten times a second until ctx ends, candRate/10 candidate lines
// spread over candNodes and benignRate/10 benign lines, round robin over all nodes.
// It returns when ctx ends.
func (p *pusher) background(ctx context.Context, nodes, candNodes []string, candRate, benignRate int) {
	const ticks = 10
	tick := time.NewTicker(time.Second / ticks)
	defer tick.Stop()
	var cand, benign int
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		var streams []push.Stream
		for i := 0; i < candRate/ticks && len(candNodes) > 0; i++ {
			// One in four is an AER line: spread over the fleet, no node reaches the
			// storm rule's 50 in 10 minutes within a run.
			line := fmt.Sprintf(linkUpLine, cand%4)
			if cand%4 == 0 {
				line = fmt.Sprintf(aerLine, cand%8)
			}
			streams = append(streams, p.kernelStream(candNodes[cand%len(candNodes)], now.Add(time.Duration(i)), line))
			cand++
		}
		for i := 0; i < benignRate/ticks; i++ {
			streams = append(streams, p.kernelStream(nodes[benign%len(nodes)], now.Add(time.Duration(i)), benignLine))
			benign++
		}
		if len(streams) > 0 {
			_ = p.push(ctx, streams) // counted in failed
		}
	}
}

// report says how many lines were pushed and why any were not.
func (p *pusher) report() (sent, failed int64, errs []error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent.Load(), p.failed.Load(), append([]error(nil), p.errs...)
}
