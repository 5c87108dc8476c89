package correlate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/correlate"
)

func engine(t *testing.T, doc string) *rules.Engine {
	t.Helper()
	ps, err := rules.Loader{}.ParseFile("t.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	return rules.NewEngine(set)
}

const pack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: c}
spec:
  defaults: {severity: warning, action: taint}
  rules:
    - id: flap
      match: {regex: '(?P<dev>\w+): Link down'}
      threshold: {count: 3, window: 10m}
      cooldown: 1h
    - id: group
      match:
        regex: 'fallen off the bus'
        companion: {regex: 'The GPU (?P<pci>\S+)', position: before, within: {lines: 2, duration: 5s}}
    - id: alpha
      match:
        regex: 'alpha fault'
        companion: {regex: 'alpha ready', position: before, within: {duration: 2h}}
    - id: beta
      match:
        regex: 'beta fault'
        companion: {regex: 'beta ready', position: before, within: {duration: 2h}}
`

// feeder returns a new Correlator and a function that feeds it one line of node
// n's kernel stream, at that long after a fixed base time, with the engine's hits.
func feeder(e *rules.Engine, node string) (*correlate.Correlator, func(at time.Duration, text string) []correlate.Outcome) {
	c := correlate.New()
	k := correlate.Key{Node: node, Stream: "kernel"}
	return c, func(at time.Duration, text string) []correlate.Outcome {
		return c.Observe(k, feedStart.Add(at), text, e.Match(&logstream.Line{Text: text}, nil), nil)
	}
}

// feedStart is the time of a feeder's line at 0.
var feedStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type step struct {
	at    time.Duration
	node  string
	text  string
	fired bool
	count int
}

func run(t *testing.T, e *rules.Engine, steps []step) {
	t.Helper()
	c := correlate.New()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, s := range steps {
		hits := e.Match(&logstream.Line{Text: s.text}, nil)
		outs := c.Observe(correlate.Key{Node: s.node, Stream: "kernel"}, base.Add(s.at), s.text, hits, nil)
		fired, count := false, 0
		for _, o := range outs {
			fired = fired || o.Fired
			count = o.Count
		}
		if fired != s.fired || count != s.count {
			t.Errorf("step %d %q on %s: fired=%v count=%d, want fired=%v count=%d", i, s.text, s.node, fired, count, s.fired, s.count)
		}
	}
}

func TestThresholdWindowAndCooldown(t *testing.T) {
	e := engine(t, pack)
	run(t, e, []step{
		{0, "n1", "eth0: Link down", false, 1},
		{time.Minute, "n1", "eth0: Link down", false, 2},
		{time.Minute, "n2", "eth0: Link down", false, 1}, // per node
		{2 * time.Minute, "n1", "eth0: Link down", true, 3},
		{3 * time.Minute, "n1", "eth0: Link down", false, 1}, // window restarts after firing
		{4 * time.Minute, "n1", "eth0: Link down", false, 2},
		{5 * time.Minute, "n1", "eth0: Link down", false, 3},  // reached, but in cooldown
		{20 * time.Minute, "n2", "eth0: Link down", false, 1}, // n2's first line left the window
	})
}

func TestTwoDownsDoNotTaint(t *testing.T) {
	e := engine(t, pack)
	run(t, e, []step{
		{0, "n1", "eth0: Link down", false, 1},
		{11 * time.Minute, "n1", "eth0: Link down", false, 1},
		{12 * time.Minute, "n1", "eth0: Link down", false, 2},
	})
}

func TestCompanionGroup(t *testing.T) {
	c, feed := feeder(engine(t, pack), "n1")
	if o := feed(0, "fallen off the bus"); len(o) != 0 {
		t.Fatalf("primary without companion fired: %+v", o)
	}
	feed(time.Second, "The GPU 0000:3b:00.0")
	o := feed(2*time.Second, "fallen off the bus")
	if len(o) != 1 || !o[0].Fired || o[0].Captures["pci"] != "0000:3b:00.0" || len(o[0].Evidence) != 2 {
		t.Fatalf("group outcome = %+v", o)
	}
	// Too far apart in lines: the companion is 3 lines before.
	feed(3*time.Second, "The GPU 0000:5e:00.0")
	feed(3*time.Second, "noise")
	feed(3*time.Second, "more noise")
	if o := feed(4*time.Second, "fallen off the bus"); len(o) != 0 {
		t.Fatalf("group beyond the line window fired: %+v", o)
	}
	// Too far apart in time.
	feed(10*time.Second, "The GPU 0000:5e:00.0")
	if o := feed(20*time.Second, "fallen off the bus"); len(o) != 0 {
		t.Fatalf("group beyond the time window fired: %+v", o)
	}
	c.Prune(feedStart.Add(time.Hour), time.Minute)
	feed(time.Hour, "The GPU 0000:3b:00.0")
	if o := feed(time.Hour+time.Second, "fallen off the bus"); len(o) != 1 || !o[0].Fired {
		t.Fatalf("a group after Prune = %+v", o)
	}
}

// TestObserveLineIsObserve: a caller numbering the lines itself and calling only
// for lines with hits gets what calling Observe on every line gets, distances in
// lines included.
func TestObserveLineIsObserve(t *testing.T) {
	e := engine(t, pack)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	lines := []string{"noise", "The GPU 0000:3b:00.0", "noise", "fallen off the bus", "The GPU 0000:5e:00.0",
		"noise", "noise", "fallen off the bus", "eth0: Link down", "The GPU 0000:86:00.0", "noise", "fallen off the bus",
		"eth0: Link down", "eth0: Link down"}
	every, only := correlate.New(), correlate.New()
	k := correlate.Key{Node: "n", Stream: "s"}
	fired := 0
	for i, l := range lines {
		at := base.Add(time.Duration(i) * time.Second)
		hits := e.Match(&logstream.Line{Text: l}, nil)
		a := every.Observe(k, at, l, hits, nil)
		b := only.ObserveLine(k, int64(i+1), at, l, hits, nil)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("line %d: Observe %+v, ObserveLine %+v", i, a, b)
		}
		for _, o := range a {
			if o.Fired {
				fired++
			}
		}
	}
	if fired != 3 { // two groups within 2 lines, one flap
		t.Errorf("%d firings, want 3", fired)
	}
}

const groupPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: g}
spec:
  defaults: {severity: critical, action: taint}
  rules:
    - id: sxid
      match:
        regex: 'SXid (?P<sxid>\d+), Fatal'
        companions:
          - {regex: 'SXid \d+, Severity (?P<sev>\d+)', position: after, within: {lines: 2, duration: 5s}}
          - {regex: 'SXid \d+, Data \{', position: after, within: {lines: 3}}
          - {regex: 'switch (?P<switch>\d+) reset', position: before, within: {lines: 5}}
`

// TestGroupOfFour: a rule with several companions fires once, when the primary
// and every companion were seen within their bounds, with all four lines as its
// evidence in time order and the captures of every line.
func TestGroupOfFour(t *testing.T) {
	_, feed := feeder(engine(t, groupPack), "n")
	group := []string{"switch 3 reset", "unrelated", "SXid 20034, Fatal", "SXid 20034, Severity 1", "SXid 20034, Data {0x1}"}
	for i, text := range group {
		outs := feed(time.Duration(i)*time.Second, text)
		if i < len(group)-1 {
			if len(outs) != 0 {
				t.Fatalf("line %d %q: fired before the group was whole: %+v", i+1, text, outs)
			}
			continue
		}
		if len(outs) != 1 || !outs[0].Fired {
			t.Fatalf("last line: outcomes %+v, want one firing", outs)
		}
		o := outs[0]
		var got []string
		for _, l := range o.Evidence {
			got = append(got, l.Text)
		}
		want := []string{"switch 3 reset", "SXid 20034, Fatal", "SXid 20034, Severity 1", "SXid 20034, Data {0x1}"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("evidence %q, want %q", got, want)
		}
		if fmt.Sprint(o.Captures) != "map[sev:1 switch:3 sxid:20034]" {
			t.Errorf("captures %v", o.Captures)
		}
	}
	// Past a companion's bounds the group does not complete: the data line comes
	// four lines after the primary (three allowed).
	late := []string{"switch 3 reset", "SXid 1, Fatal", "SXid 1, Severity 0", "x", "x", "SXid 1, Data {0x2}"}
	for i, text := range late {
		if outs := feed(time.Minute+time.Duration(i)*time.Second, text); len(outs) != 0 {
			t.Fatalf("late line %d %q fired: %+v", i+1, text, outs)
		}
	}
	// A companion that must come before the primary does not join one after it.
	after := []string{"SXid 2, Fatal", "SXid 2, Severity 0", "SXid 2, Data {0x3}", "switch 1 reset"}
	for i, text := range after {
		if outs := feed(2*time.Minute+time.Duration(i)*time.Second, text); len(outs) != 0 {
			t.Fatalf("line %d %q fired: %+v", i+1, text, outs)
		}
	}
}

// TestGroupDuration: a companion's duration bound holds as the single
// companion's does.
func TestGroupDuration(t *testing.T) {
	e := engine(t, groupPack)
	c := correlate.New()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	k := correlate.Key{Node: "n", Stream: "kernel"}
	lines := []struct {
		at   time.Duration
		text string
	}{{0, "switch 0 reset"}, {time.Second, "SXid 7, Fatal"}, {7 * time.Second, "SXid 7, Severity 2"}, {8 * time.Second, "SXid 7, Data {0x1}"}}
	for _, l := range lines {
		if outs := c.Observe(k, base.Add(l.at), l.text, e.Match(&logstream.Line{Text: l.text}, nil), nil); len(outs) != 0 {
			t.Fatalf("%q fired with the severity line 6s after the primary (5s allowed): %+v", l.text, outs)
		}
	}
	// Prune forgets the open group once it is past the horizon; a late severity
	// line then completes nothing.
	c.Prune(base.Add(time.Hour), 5*time.Second)
	if outs := c.Observe(k, base.Add(time.Hour), "SXid 7, Severity 2", e.Match(&logstream.Line{Text: "SXid 7, Severity 2"}, nil), nil); len(outs) != 0 {
		t.Fatalf("pruned group completed: %+v", outs)
	}
}
