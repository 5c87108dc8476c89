package act

import (
	"bytes"
	"encoding/json"
	"sort"
	"unicode/utf8"

	"github.com/faultline-dev/faultline/controller/fault"
	"github.com/faultline-dev/faultline/logstream"
)

// limits bound the evidence annotation.
type limits struct {
	maxLines, maxLineBytes, maxBytes int
}

func (a *Actor) limits() limits {
	return limits{maxLines: a.opts.MaxLines, maxLineBytes: a.opts.MaxLineBytes, maxBytes: a.opts.MaxAnnotationBytes}
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// trimEntry applies the per-entry limits: the newest maxLines lines, each at most
// maxLineBytes, and capture values no longer than a line.
func trimEntry(e fault.Evidence, l limits) fault.Evidence {
	lines := e.Lines
	if len(lines) > l.maxLines {
		lines = lines[len(lines)-l.maxLines:]
	}
	e.Lines = make([]logstream.Line, len(lines))
	for i, ln := range lines {
		e.Lines[i] = logstream.Line{Time: ln.Time, Text: truncate(ln.Text, l.maxLineBytes)}
	}
	if len(e.Captures) > 0 {
		c := make(map[string]string, len(e.Captures))
		for k, v := range e.Captures {
			c[truncate(k, l.maxLineBytes)] = truncate(v, l.maxLineBytes)
		}
		e.Captures = c
	}
	return e
}

func encodeEntry(e fault.Evidence) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // kernel lines are full of <unknown>; keep them readable
	if err := enc.Encode(e); err != nil {
		// Evidence holds only strings, numbers and times: it always encodes.
		panic(err)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// encodeEvidence renders entries as the annotation value: a JSON array, at most
// l.maxBytes long if that can be done without losing which taints faultline placed.
// To fit it drops, oldest entry first and the entry of keep (pack/rule) last: lines
// down to none, then captures, then whole entries that own no taint (keep is never
// dropped). It returns the entries as encoded.
func encodeEvidence(entries []fault.Evidence, keep string, l limits) (string, []fault.Evidence) {
	evs := make([]fault.Evidence, len(entries))
	enc := make([][]byte, len(entries))
	total := 2 // [ and ]
	for i, e := range entries {
		evs[i] = trimEntry(e, l)
		enc[i] = encodeEntry(evs[i])
		total += len(enc[i])
	}
	if len(evs) > 1 {
		total += len(evs) - 1 // commas
	}
	// Reduction order: oldest first, keep last.
	order := make([]int, len(evs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(x, y int) bool {
		ex, ey := evs[order[x]], evs[order[y]]
		if kx, ky := ex.ID() == keep, ey.ID() == keep; kx != ky {
			return ky
		}
		return ex.Time.Before(ey.Time)
	})
	resize := func(i int) {
		total -= len(enc[i])
		enc[i] = encodeEntry(evs[i])
		total += len(enc[i])
	}
	for n := l.maxLines - 1; n >= 0 && total > l.maxBytes; n-- {
		for _, i := range order {
			if total <= l.maxBytes {
				break
			}
			if len(evs[i].Lines) > n {
				evs[i].Lines = evs[i].Lines[len(evs[i].Lines)-n:]
				resize(i)
			}
		}
	}
	for _, i := range order {
		if total <= l.maxBytes {
			break
		}
		if len(evs[i].Captures) > 0 {
			evs[i].Captures = nil
			resize(i)
		}
	}
	dropped := make([]bool, len(evs))
	for _, i := range order {
		if total <= l.maxBytes {
			break
		}
		if evs[i].TaintPlaced || evs[i].ID() == keep {
			continue
		}
		dropped[i] = true
		total -= len(enc[i]) + 1
	}
	var b bytes.Buffer
	b.WriteByte('[')
	out := evs[:0:0]
	for i := range evs {
		if dropped[i] {
			continue
		}
		if len(out) > 0 {
			b.WriteByte(',')
		}
		b.Write(enc[i])
		out = append(out, evs[i])
	}
	b.WriteByte(']')
	return b.String(), out
}
