package intake

import (
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/faultline-dev/faultline/logstream"
)

// Converter turns OTLP log records into lines as the Loki source would read them
// after Loki's OTLP ingestion: attribute names with Loki's label spelling (every
// character other than a letter, digit or underscore becomes "_"), the node from
// NodeLabel, the source from the source attribute.
type Converter struct {
	// NodeLabel names the attribute holding the node (the controller's --node-label,
	// as Loki spells it; the collector's node processor writes it from the sender's
	// identity).
	NodeLabel string
	// Sources are the log sources the controller reads (its queries' names); a
	// record of another source is skipped: only Loki's reading can select it.
	Sources []string
	// Now dates the records that carry no time, and bounds those ahead of it
	// (default time.Now).
	Now func() time.Time
}

// Skip reasons, the label of faultline_controller_intake_records_skipped_total.
const (
	SkipNoNode   = "no_node"
	SkipNoText   = "no_text"
	SkipNoSource = "source_not_read"
)

// Lines converts ld, in order, and counts the records skipped by reason.
func (c Converter) Lines(ld plog.Logs) (lines []logstream.Line, skipped map[string]int) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	at := now()
	lines = make([]logstream.Line, 0, ld.LogRecordCount())
	skip := func(reason string) {
		if skipped == nil {
			skipped = map[string]int{}
		}
		skipped[reason]++
	}
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		rl := rls.At(i)
		res := labels(nil, rl.Resource().Attributes())
		stream := logstream.CanonicalLabels(res)
		sls := rl.ScopeLogs()
		for j := range sls.Len() {
			sl := sls.At(j)
			scope := labels(maps(res), sl.Scope().Attributes())
			lrs := sl.LogRecords()
			for k := range lrs.Len() {
				lr := lrs.At(k)
				l := labels(maps(scope), lr.Attributes())
				// A resource attribute (an index label in Loki) wins over metadata of
				// the same name, as in the Loki source.
				for n, v := range res {
					l[n] = v
				}
				line := logstream.Line{Labels: l, Stream: stream, Node: l[c.NodeLabel], Source: l[logstream.LabelSource]}
				line.Text = lr.Body().AsString()
				switch {
				case line.Node == "":
					skip(SkipNoNode)
					continue
				case line.Text == "":
					skip(SkipNoText)
					continue
				case !slices.Contains(c.Sources, line.Source):
					skip(SkipNoSource)
					continue
				}
				line.Query = line.Source
				line.Time = recordTime(lr, at)
				lines = append(lines, line)
			}
		}
	}
	return lines, skipped
}

// recordTime is when the record was logged (its observed time when it has none, as
// Loki dates it), never after now: a node clock ahead cannot make evidence from the
// future.
func recordTime(lr plog.LogRecord, now time.Time) time.Time {
	ts := lr.Timestamp()
	if ts == 0 {
		ts = lr.ObservedTimestamp()
	}
	if ts == 0 {
		return now
	}
	t := ts.AsTime()
	if t.After(now) {
		return now
	}
	return t
}

// maps copies m (nil stays empty but writable).
func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+8)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// labels adds attrs to into (a new map when nil), with Loki's names.
func labels(into map[string]string, attrs pcommon.Map) map[string]string {
	if into == nil {
		into = make(map[string]string, attrs.Len())
	}
	for k, v := range attrs.All() {
		into[LabelName(k)] = v.AsString()
	}
	return into
}

// LabelName is an attribute's name as Loki's OTLP ingestion spells it as a label or
// structured metadata: letters, digits and underscores kept, every other character
// an underscore, a leading digit prefixed with "key_".
func LabelName(attr string) string {
	var b strings.Builder
	b.Grow(len(attr) + 4)
	for i, r := range attr {
		if i == 0 && r >= '0' && r <= '9' {
			b.WriteString("key_")
		}
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
