package lokisource

import (
	"testing"
	"time"
)

func TestBootTracker(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	current := map[string]string{"n1": "b1"}
	b := newBootTracker(func(n string) string { return current[n] })
	steps := []struct {
		name       string
		node, boot string
		at, now    time.Time
		want       bool
	}{
		{"a line of the current boot", "n1", "b1", t0.Add(-time.Hour), t0, false},
		{"an older boot, before the current one was first seen", "n1", "b0", t0.Add(-time.Minute), t0.Add(time.Second), true},
		{"a newer boot the Node does not show yet", "n1", "b2", t0.Add(time.Minute), t0.Add(time.Minute), false},
		{"a line without a boot ID", "n1", "", t0.Add(-time.Hour), t0.Add(time.Minute), false},
		{"a node without a boot ID", "n2", "b9", t0.Add(-time.Hour), t0.Add(time.Minute), false},
	}
	for _, s := range steps {
		if got := b.earlier(s.node, s.boot, s.at, s.now); got != s.want {
			t.Errorf("%s: earlier = %v, want %v", s.name, got, s.want)
		}
	}
	// The Node reports the reboot: lines of b1 dated before that moment are from an
	// earlier boot, b2's are not.
	current["n1"] = "b2"
	reported := t0.Add(2 * time.Minute)
	if !b.earlier("n1", "b1", t0.Add(90*time.Second), reported) {
		t.Error("a line of the previous boot passed after the Node reported the new one")
	}
	if b.earlier("n1", "b2", t0.Add(time.Minute), reported.Add(time.Second)) {
		t.Error("a line of the current boot was skipped")
	}
	if (*bootTracker)(nil).earlier("n1", "b0", t0, t0) {
		t.Error("without Config.BootID a line was skipped")
	}
}
