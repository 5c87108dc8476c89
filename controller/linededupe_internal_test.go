package controller

import (
	"testing"
	"time"

	"github.com/faultline-dev/faultline/logstream"
)

// A line is remembered by node, time and text for one to two windows, then
// forgotten.
func TestLineDedupe(t *testing.T) {
	now := time.Unix(1000, 0)
	d := newLineDedupe(time.Minute, func() time.Time { return now })
	at := time.Unix(999, 5)
	l := logstream.Line{Node: "n1", Time: at, Text: "NVRM: Xid 79", Stream: `{a="1"}`}
	d.add(l)
	for _, other := range []logstream.Line{
		{Node: "n2", Time: at, Text: l.Text},
		{Node: "n1", Time: at.Add(time.Nanosecond), Text: l.Text},
		{Node: "n1", Time: at, Text: "NVRM: Xid 48"},
	} {
		if d.seen(other) {
			t.Errorf("%+v seen as %+v", other, l)
		}
	}
	// The stream's spelling is not part of the key: the two paths differ there.
	if !d.seen(logstream.Line{Node: "n1", Time: at, Text: l.Text, Stream: `{b="2"}`}) {
		t.Error("the same line from the other path not seen")
	}
	now = now.Add(90 * time.Second) // one rotation: in the previous generation
	if !d.seen(l) {
		t.Error("forgotten within two windows")
	}
	now = now.Add(time.Minute) // a second rotation
	if d.seen(l) {
		t.Error("still seen after two windows")
	}
}
