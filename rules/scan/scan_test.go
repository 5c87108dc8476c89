package scan

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/faultline-dev/faultline/rules"
)

// testPack: a flap counted in a window, a critical taint, a warning event and an
// info rule, so windows, streams and every --fail-on level can be told apart.
const testPack = `apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: t}
spec:
  rules:
    - id: flap
      match: {regex: '(?P<ifname>\w+): Link down'}
      threshold: {count: 3, window: 10m}
      severity: critical
      action: taint
    - id: lost
      match: {regex: 'GPU has fallen off the bus'}
      severity: critical
      action: taint
    - id: xid13
      match: {regex: 'Xid \(PCI:[0-9a-f:]+\): 13,'}
      severity: warning
      action: event
    - id: note
      match: {regex: 'hello world'}
      severity: info
      action: event
`

func testEngine(t *testing.T) *rules.Engine {
	t.Helper()
	ps, err := rules.Loader{}.ParseFile("t.yaml", []byte(testPack))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	return rules.NewEngine(set)
}

type named struct {
	*strings.Reader
	name string
}

func (n named) Name() string { return n.name }

// scanAll scans the inputs (name, text pairs) with one scanner and returns the matches.
func scanAll(t *testing.T, o Options, inputs ...string) ([]Match, *Scanner) {
	t.Helper()
	sc := New(testEngine(t), o)
	var ms []Match
	for i := 0; i+1 < len(inputs); i += 2 {
		err := sc.Scan(context.Background(), named{strings.NewReader(inputs[i+1]), inputs[i]}, func(m Match) error {
			ms = append(ms, m)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ms, sc
}

func fired(ms []Match, rule string) (n int, nodes []string) {
	for _, m := range ms {
		if m.Rule == rule && m.Action != rules.ActionNone {
			n++
			nodes = append(nodes, m.Node)
		}
	}
	return n, nodes
}

// TestWindowsUseTheLinesOwnTime: three link-downs a day apart do not make a flap,
// three within ten minutes do, whatever the prefix says the time is.
func TestWindowsUseTheLinesOwnTime(t *testing.T) {
	cases := []struct {
		name      string
		lines     []string
		wantFired int
	}{
		{"syslog, a day apart", []string{
			"Nov 21 10:00:00 gpu-1 kernel: eth0: Link down",
			"Nov 22 10:00:00 gpu-1 kernel: eth0: Link down",
			"Nov 23 10:00:00 gpu-1 kernel: eth0: Link down"}, 0},
		{"syslog, minutes apart", []string{
			"Nov 23 10:00:00 gpu-1 kernel: eth0: Link down",
			"Nov 23 10:03:00 gpu-1 kernel: eth0: Link down",
			"Nov 23 10:06:00 gpu-1 kernel: eth0: Link down"}, 1},
		{"dmesg seconds, hours apart", []string{
			"[ 1000.000000] eth0: Link down",
			"[ 9000.000000] eth0: Link down",
			"[19000.000000] eth0: Link down"}, 0},
		{"dmesg seconds, seconds apart", []string{
			"[ 1000.000000] eth0: Link down",
			"[ 1001.000000] eth0: Link down",
			"[ 1002.000000] eth0: Link down"}, 1},
		{"dmesg seconds across a reboot", []string{
			"[ 1000.000000] eth0: Link down",
			"[ 1001.000000] eth0: Link down",
			"[    5.000000] eth0: Link down"}, 0},
		{"kmsg records, hours apart", []string{
			"6,1,1000000000,-;eth0: Link down",
			"6,2,9000000000,-;eth0: Link down",
			"6,3,19000000000,-;eth0: Link down"}, 0},
		{"dmesg -T, days apart", []string{
			"[Mon Nov 23 10:00:00 2026] eth0: Link down",
			"[Tue Nov 24 10:00:00 2026] eth0: Link down",
			"[Wed Nov 25 10:00:00 2026] eth0: Link down"}, 0},
		{"RFC 3339, zones differ, minutes apart", []string{
			"2026-11-23T10:00:00+01:00 gpu-1 kernel: eth0: Link down",
			"2026-11-23T09:02:00Z gpu-1 kernel: eth0: Link down",
			"2026-11-23T04:04:00-05:00 gpu-1 kernel: eth0: Link down"}, 1},
		{"syslog across new year", []string{
			"Dec 31 23:58:00 gpu-1 kernel: eth0: Link down",
			"Dec 31 23:59:00 gpu-1 kernel: eth0: Link down",
			"Jan  1 00:01:00 gpu-1 kernel: eth0: Link down"}, 1},
		{"untimed lines: one second apart", []string{
			"eth0: Link down", "eth0: Link down", "eth0: Link down"}, 1},
		{"untimed lines take the time before them", []string{
			"Nov 21 10:00:00 gpu-1 kernel: eth0: Link down",
			"eth0: Link down",
			"Nov 23 10:00:00 gpu-1 kernel: eth0: Link down"}, 0},
	}
	for _, c := range cases {
		ms, _ := scanAll(t, Options{Year: 2026}, "in", strings.Join(c.lines, "\n")+"\n")
		if n, _ := fired(ms, "flap"); n != c.wantFired {
			t.Errorf("%s: flap fired %d times, want %d (%+v)", c.name, n, c.wantFired, ms)
		}
	}
}

// TestMergedSyslogIsOneStreamPerHost: one flap on each of three hosts is no flap;
// three on one host are, and the match names that host.
func TestMergedSyslogIsOneStreamPerHost(t *testing.T) {
	merged := strings.Join([]string{
		"Nov 23 10:00:00 gpu-1 kernel: eth0: Link down",
		"Nov 23 10:00:01 gpu-2 kernel: eth0: Link down",
		"Nov 23 10:00:02 gpu-3 kernel: eth0: Link down",
		"Nov 23 10:00:03 gpu-2 kernel: eth0: Link down",
		"Nov 23 10:00:04 gpu-2 kernel: eth0: Link down",
	}, "\n")
	ms, _ := scanAll(t, Options{Year: 2026}, "syslog", merged)
	if n, nodes := fired(ms, "flap"); n != 1 || nodes[0] != "gpu-2" {
		t.Errorf("host streams: flap fired %d times on %v, want once on gpu-2", n, nodes)
	}
	if len(ms) != 5 || ms[0].Node != "gpu-1" || ms[2].Node != "gpu-3" || ms[0].Time != "2026-11-23T10:00:00Z" {
		t.Errorf("matches: %+v", ms)
	}
	// One node for everything: the five lines are one flap count.
	ms, _ = scanAll(t, Options{Year: 2026, NodeFrom: NodeFromNone, Node: "all"}, "syslog", merged)
	if n, nodes := fired(ms, "flap"); n != 1 || nodes[0] != "all" {
		t.Errorf("--node-from none: flap fired %d times on %v, want once on all", n, nodes)
	}
	if ms[1].Node != "all" {
		t.Errorf("--node-from none: node %q", ms[1].Node)
	}
	// Per file: two rotated files of one dmesg are separate nodes with --node-from file,
	// one node (and one count) by default.
	a := "[  1.0] eth0: Link down\n[  2.0] eth0: Link down\n"
	b := "[  3.0] eth0: Link down\n"
	ms, _ = scanAll(t, Options{NodeFrom: NodeFromFile}, "a.log", a, "b.log", b)
	if n, _ := fired(ms, "flap"); n != 0 || ms[2].Node != "b.log" || ms[2].File != "b.log" {
		t.Errorf("--node-from file: %+v", ms)
	}
	ms, _ = scanAll(t, Options{}, "a.log", a, "b.log", b) // no host, no --node: per input, unnamed
	if n, _ := fired(ms, "flap"); n != 0 || ms[2].Node != "" || ms[2].File != "b.log" {
		t.Errorf("default: %+v", ms)
	}
	ms, _ = scanAll(t, Options{Node: "gpu-9"}, "a.log", a, "b.log", b)
	if n, nodes := fired(ms, "flap"); n != 1 || nodes[0] != "gpu-9" {
		t.Errorf("--node gpu-9: flap fired %d times on %v", n, nodes)
	}
}

// TestFailOn: each level fires on what it names and not below.
func TestFailOn(t *testing.T) {
	cases := []struct {
		line                  string
		taint, event, warning bool
	}{
		{"NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.", true, true, true},
		{"NVRM: Xid (PCI:0000:01:00): 13, pid=1", false, true, true},
		{"hello world", false, true, false},
		{"eth0: Link down", false, false, false}, // below its threshold: nothing fired
		{"all quiet", false, false, false},
	}
	for _, c := range cases {
		_, sc := scanAll(t, Options{}, "in", c.line)
		got := [3]bool{sc.Failed(FailOnTaint), sc.Failed(FailOnEvent), sc.Failed(FailOnWarning)}
		if want := [3]bool{c.taint, c.event, c.warning}; got != want || sc.Failed("") {
			t.Errorf("%q: taint/event/warning = %v, want %v", c.line, got, want)
		}
	}
	if _, err := ParseFailOn("critical"); err == nil {
		t.Error("ParseFailOn(critical): no error")
	}
	for _, s := range []string{"", "taint", "event", "warning"} {
		if lv, err := ParseFailOn(s); err != nil || string(lv) != s {
			t.Errorf("ParseFailOn(%q) = %q, %v", s, lv, err)
		}
	}
}

// TestTextEscapesControlCharacters: escape sequences, bidi overrides and invalid
// UTF-8 from a log cannot reach the terminal; JSON escapes them its own way.
func TestTextEscapesControlCharacters(t *testing.T) {
	line := "Nov 23 10:00:00 gpu\x1b]0;owned\x07 kernel: GPU has fallen off the bus \x1b[2J\u202e\xff\tend"
	ms, _ := scanAll(t, Options{}, "in", line)
	if len(ms) != 1 {
		t.Fatalf("matches: %+v", ms)
	}
	var out bytes.Buffer
	emit, flush := TextWriter(&out, true)
	if err := emit(ms[0]); err != nil {
		t.Fatal(err)
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\xff"} {
		if strings.Contains(s, bad) {
			t.Errorf("text output holds %q: %q", bad, s)
		}
	}
	for _, want := range []string{`gpu\x1b]0;owned\x07`, `bus \x1b[2J\u202e\xff\tend`, "in:1"} {
		if !strings.Contains(s, want) {
			t.Errorf("text output lacks %q: %q", want, s)
		}
	}
	out.Reset()
	if err := JSONLWriter(&out)(ms[0]); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07") || !strings.Contains(out.String(), `\u001b[2J`) {
		t.Errorf("jsonl: %q", out.String())
	}
	if got := Escape("plain ascii"); got != "plain ascii" {
		t.Errorf("Escape changed plain text: %q", got)
	}
	if got := Escape("déjà vu"); got != "déjà vu" {
		t.Errorf("Escape changed printable UTF-8: %q", got)
	}
}

// TestLongLinesAndCounts: a line over MaxLineBytes is cut and counted, and lines
// after it are read as usual; lines without a time are counted.
func TestLongLinesAndCounts(t *testing.T) {
	long := "GPU has fallen off the bus " + strings.Repeat("x", MaxLineBytes+10)
	in := "[ 1.0] hello world\n" + long + "\nsecond GPU has fallen off the bus\n"
	ms, sc := scanAll(t, Options{}, "in", in)
	if sc.Stats.Lines != 3 || sc.Stats.Truncated != 1 || sc.Stats.Untimed != 2 {
		t.Errorf("stats %+v", sc.Stats)
	}
	if len(ms) != 3 || len(ms[1].Text) != MaxLineBytes || ms[2].Line != 3 {
		t.Errorf("%d matches; long text %d bytes", len(ms), len(ms[1].Text))
	}
	var sum bytes.Buffer
	if err := sc.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("scanned 3 lines (1 longer than %d bytes, truncated) (2 without a time of their own); 2 rules matched", MaxLineBytes); !strings.Contains(sum.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, sum.String())
	}
}

// TestRebootGapExceedsEveryWindow: no rule's window can span two boots.
func TestRebootGapExceedsEveryWindow(t *testing.T) {
	e := testEngine(t)
	if g := rebootGap(e.Set()); g <= 10*time.Minute {
		t.Errorf("reboot gap %v is not longer than the 10m window", g)
	}
}

// TestStreamsAreBounded: a log naming ever new hosts cannot grow the scanner's state
// past MaxStreams; the lines of the hosts past it are counted.
func TestStreamsAreBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; i < MaxStreams+10; i++ {
		fmt.Fprintf(&b, "Nov 23 10:00:00 h%d kernel: x\n", i)
	}
	b.WriteString("Nov 23 10:00:01 h-new kernel: GPU has fallen off the bus\n")
	ms, sc := scanAll(t, Options{Year: 2026}, "in", b.String())
	if len(sc.streams) > MaxStreams+1 || sc.Stats.Merged != 11 {
		t.Errorf("%d streams kept, %d lines merged", len(sc.streams), sc.Stats.Merged)
	}
	if len(ms) != 1 || ms[0].Node != "" {
		t.Errorf("the line of a host past the cap is reported with its input's hostless lines: %+v", ms)
	}
}

// bigInput is several chunks of a merged syslog with faults, flaps, untimed lines, a
// line longer than MaxLineBytes and no line end at the very end.
func bigInput() string {
	var b strings.Builder
	hosts := []string{"gpu-1", "gpu-2", "gpu-3"}
	for i := 0; b.Len() < 3*chunkSize+12345; i++ {
		h := hosts[i%len(hosts)]
		ts := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7 * time.Second).Format(time.Stamp)
		switch {
		case i%997 == 0:
			fmt.Fprintf(&b, "%s %s kernel: eth%d: Link down\n", ts, h, i%2)
		case i%4001 == 0:
			fmt.Fprintf(&b, "%s %s kernel: NVRM: GPU 0000:%02x:00.0: GPU has fallen off the bus.\n", ts, h, i%256)
		case i%3001 == 0:
			b.WriteString("hello world, said a line without a time\n")
		case i == 20000:
			b.WriteString("GPU has fallen off the bus " + strings.Repeat("y", MaxLineBytes+chunkSize/2) + "\n")
		default:
			fmt.Fprintf(&b, "%s %s kernel: cni0: port %d(veth%x) entered forwarding state\n", ts, h, i%16, i)
		}
	}
	b.WriteString("Nov 23 23:59:59 gpu-1 kernel: eth0: Link down")
	return b.String()
}

// TestParallelScanIsSequentialScan: parsing and matching on workers changes nothing
// of what a scan reports, in which order, or what it counts.
func TestParallelScanIsSequentialScan(t *testing.T) {
	in := bigInput()
	seq, seqSc := scanAll(t, Options{Year: 2026, Workers: 1}, "big", in)
	for _, w := range []int{2, 5} {
		par, parSc := scanAll(t, Options{Year: 2026, Workers: w}, "big", in)
		if len(seq) < 20 || len(par) != len(seq) {
			t.Fatalf("workers %d: %d matches, sequential %d", w, len(par), len(seq))
		}
		for i := range seq {
			if fmt.Sprint(par[i]) != fmt.Sprint(seq[i]) {
				t.Fatalf("workers %d: match %d differs:\n%+v\n%+v", w, i, par[i], seq[i])
			}
		}
		a, b := seqSc.Stats, parSc.Stats
		if a.Lines != b.Lines || a.Truncated != 1 || b.Truncated != 1 || a.Untimed != b.Untimed || fmt.Sprint(a.Fired) != fmt.Sprint(b.Fired) {
			t.Errorf("workers %d: stats %+v, sequential %+v", w, b, a)
		}
	}
}

// TestParallelScanStopsOnError: an error from the output ends the scan at once.
func TestParallelScanStopsOnError(t *testing.T) {
	sc := New(testEngine(t), Options{Workers: 3})
	stop := fmt.Errorf("output closed")
	n := 0
	err := sc.Scan(context.Background(), strings.NewReader(bigInput()), func(Match) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Errorf("err %v after %d matches", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := New(testEngine(t), Options{Workers: 3}).Scan(ctx, strings.NewReader(bigInput()), func(Match) error { return nil }); err == nil {
		t.Error("a cancelled scan returned no error")
	}
}

// TestRebase: the fields of a line with hits move onto the line's copy; a string
// that is no part of the line is copied.
func TestRebase(t *testing.T) {
	buf := []byte("Nov 23 00:00:01 gpu-001 kernel: [1.0] eno1: Link up")
	orig := string(buf)
	clone := strings.Clone(orig)
	for _, sub := range []string{orig[16:23], orig[len(orig)-8:], orig, orig[:0]} {
		got := rebase(sub, orig, clone)
		if got != sub {
			t.Fatalf("rebase(%q) = %q", sub, got)
		}
		if sub != "" && !inside(got, clone) {
			t.Fatalf("rebase(%q) is not part of the copy", sub)
		}
	}
	other := strings.Clone("gpu-001")
	if got := rebase(other, orig, clone); got != other || inside(got, clone) || inside(got, other) {
		t.Fatalf("rebase of a foreign string: %q, want a copy of its own", got)
	}
}

func inside(sub, s string) bool {
	p, q := uintptr(unsafe.Pointer(unsafe.StringData(sub))), uintptr(unsafe.Pointer(unsafe.StringData(s)))
	return p >= q && p+uintptr(len(sub)) <= q+uintptr(len(s))
}

// TestGroupLines: a multi-line group's match carries all its lines.
func TestGroupLines(t *testing.T) {
	ps, err := rules.Loader{}.ParseFile("g.yaml", []byte(`apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: g}
spec:
  defaults: {severity: critical, action: taint}
  rules:
    - id: sxid
      match:
        regex: 'SXid (?P<sxid>\d+), Fatal'
        companions:
          - {regex: 'SXid \d+, Severity', position: after, within: {lines: 2}}
          - {regex: 'SXid \d+, Data', position: after, within: {lines: 3}}
`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	var ms []Match
	in := "SXid 7, Fatal\nother\nSXid 7, Severity 1\nSXid 7, Data {0x1}\n"
	if err := New(rules.NewEngine(set), Options{}).Scan(context.Background(), named{strings.NewReader(in), "k.log"}, func(m Match) error {
		ms = append(ms, m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Line != 4 || fmt.Sprint(ms[0].Lines) != "[SXid 7, Fatal SXid 7, Severity 1 SXid 7, Data {0x1}]" {
		t.Fatalf("matches %+v, want one at line 4 with the group's three lines", ms)
	}
}
