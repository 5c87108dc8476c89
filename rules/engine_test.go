package rules_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/test/packengine"
)

func defaultEngine(t testing.TB) *rules.Engine {
	t.Helper()
	e, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// corpusMessages returns the raw lines and messages of the labelled corpus.
func corpusMessages(t testing.TB) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "corpus", "kernel-and-pod-lines.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var c struct {
			RawLine string `json:"raw_line"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c.RawLine, c.Message)
	}
	return out
}

type hitKey struct {
	rule      string
	companion bool
	caps      string
}

func keys(hs []rules.Hit) []hitKey {
	out := make([]hitKey, len(hs))
	for i, h := range hs {
		out[i] = hitKey{rule: h.Rule.String(), companion: h.Companion, caps: fmt.Sprint(h.Captures)}
	}
	return out
}

// mutate produces lines near real ones: case flips, cut-outs, splices and noise,
// so the prefilter is tested where it is most likely to be wrong.
func mutate(r *rand.Rand, base []string) string {
	s := base[r.Intn(len(base))]
	switch r.Intn(6) {
	case 0:
		return strings.ToUpper(s)
	case 1:
		return strings.ToLower(s)
	case 2:
		if len(s) > 2 {
			i := r.Intn(len(s))
			j := i + r.Intn(len(s)-i)
			return s[:i] + s[j:]
		}
	case 3:
		o := base[r.Intn(len(base))]
		return s[:r.Intn(len(s)+1)] + o[r.Intn(len(o)+1):]
	case 4:
		b := []byte(s)
		for k := 0; k < 3 && len(b) > 0; k++ {
			b[r.Intn(len(b))] = byte(r.Intn(256))
		}
		return string(b)
	}
	// Unicode case folds the ASCII prefilter must not lose: Kelvin sign, long s.
	return strings.NewReplacer("k", "\u212a", "s", "\u017f").Replace(s)
}

// TestPrefilterEquivalence proves the fast matcher returns exactly what running every
// rule's regex on every line returns, on the corpus and on generated lines.
func TestPrefilterEquivalence(t *testing.T) {
	e := defaultEngine(t)
	lines := corpusMessages(t)
	r := rand.New(rand.NewSource(1))
	n := len(lines)
	for i := 0; i < 20000; i++ {
		lines = append(lines, mutate(r, lines[:n]))
	}
	sources := []rules.Source{"", rules.SourceKernel, rules.SourcePod}
	matched := 0
	m := e.Matcher() // one for all lines: nothing of a line may stay for the next
	for i, l := range lines {
		line := &logstream.Line{Text: l, Source: string(sources[i%len(sources)])}
		fast := keys(e.Match(line, nil))
		slow := keys(e.MatchNaive(line, nil))
		if len(fast) > 0 {
			matched++
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("line %q (source %q):\n fast %v\nnaive %v", l, line.Source, fast, slow)
		}
		if own := keys(m.Match(line, nil)); !reflect.DeepEqual(own, slow) {
			t.Fatalf("line %q (source %q):\nmatcher %v\n  naive %v", l, line.Source, own, slow)
		}
	}
	t.Logf("%d lines compared, %d with hits", len(lines), matched)
	if matched < 300 {
		t.Fatalf("only %d lines matched: the comparison is too weak", matched)
	}
}

// TestPrefilterEquivalenceGenerated compares the fast matcher with every regex on
// every line, line for line, on generated kernel lines: the benign ones a GPU node
// prints most (link-up and bond lines are companions of several rules, matched on
// many lines), fault lines, and their mutations, with numbers drawn at random.
func TestPrefilterEquivalenceGenerated(t *testing.T) {
	e := defaultEngine(t)
	templates := []string{
		"bond0: (slave eth%d): link status definitely up, 25000 Mbps full duplex",
		"bond0: (slave eth%d): link status definitely down, disabling slave",
		"bond0: (slave eth%d): link status up again after %d ms",
		"bond0: (slave eth%d): link status down for interface, disabling it in %d ms",
		"igb 0000:0%d:00.0 eno1: igb: eno1 NIC Link is Up 1000 Mbps Full Duplex, Flow Control: RX/TX",
		"igb 0000:0%d:00.0 eno1: igb: eno1 NIC Link is Down",
		"mlx5_core 0000:%x:00.0 ib0: Link down",
		"mlx5_core 0000:%x:00.0: Port: %d Link ACTIVE",
		"mlx5_core 0000:%x:00.0: mlx5_pcie_event:%d:(pid %d): PCIe slot advertised sufficient power (%dW).",
		"nvidia-nvswitch%d: open (major=%d)",
		"nvidia-nvswitch%d: SXid (PCI:0000:%x:00.0): %d, Fatal, Link %d",
		"NVRM: GPU at PCI:0000:%x:00: GPU-%x-%x-%x",
		"NVRM: Xid (PCI:0000:%x:00): %d, pid=%d, name=python3, Graphics Exception",
		"loop%d: detected capacity change from %d to 0",
		"workqueue: drain_vmap_area_work hogged CPU for >%dus %d times, consider switching to WQ_UNBOUND",
		"EXT4-fs (nvme0n1p%d): mounted filesystem %x-%x with ordered data mode. Quota mode: none.",
		"pcieport 0000:%x:01.0: AER: Corrected error received: 0000:%x:00.0",
		"INFO: task python3:%d blocked for more than %d seconds.",
	}
	r := rand.New(rand.NewSource(5))
	var lines []string
	for i := 0; i < 5000; i++ {
		tmpl := templates[r.Intn(len(templates))]
		args := make([]any, strings.Count(tmpl, "%"))
		for k := range args {
			args[k] = r.Intn(1 << (4 * (1 + r.Intn(4))))
		}
		lines = append(lines, fmt.Sprintf(tmpl, args...))
	}
	n := len(lines)
	for i := 0; i < n; i++ {
		lines = append(lines, mutate(r, lines[:n]))
	}
	matched := 0
	m := e.Matcher()
	for _, l := range lines {
		line := &logstream.Line{Text: l, Source: string(rules.SourceKernel)}
		fast := keys(e.Match(line, nil))
		slow := keys(e.MatchNaive(line, nil))
		if len(fast) > 0 {
			matched++
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("line %q:\n fast %v\nnaive %v", l, fast, slow)
		}
		if own := keys(m.Match(line, nil)); !reflect.DeepEqual(own, slow) {
			t.Fatalf("line %q:\nmatcher %v\n  naive %v", l, own, slow)
		}
	}
	if matched < n/4 {
		t.Fatalf("only %d of %d lines matched: the comparison is too weak", matched, len(lines))
	}
}

// TestFiniteRegexesMatchTheirStrings: where a default rule's regex is a few
// literals, the line holds one of them exactly where the regex matches it, on the
// corpus and on mutations of it.
func TestFiniteRegexesMatchTheirStrings(t *testing.T) {
	e := defaultEngine(t)
	var res []*regexp.Regexp
	for _, r := range e.Set().Rules {
		res = append(res, r.Regexp())
		for _, cp := range r.Companions {
			res = append(res, cp.Regexp())
		}
	}
	lines := corpusMessages(t)
	r := rand.New(rand.NewSource(7))
	n := len(lines)
	for i := 0; i < 20000; i++ {
		lines = append(lines, mutate(r, lines[:n]))
	}
	finite, matched := 0, 0
	for _, re := range res {
		subs := rules.FiniteStrings(re.String())
		if subs == nil {
			continue
		}
		finite++
		for _, l := range lines {
			want := re.MatchString(l)
			if got := rules.ContainsAny(l, subs); got != want {
				t.Fatalf("%q on %q: the strings %q say %v, the regex %v", re, l, subs, got, want)
			}
			if want {
				matched++
			}
		}
	}
	t.Logf("%d regexes are a few strings; %d lines matched", finite, matched)
	if finite == 0 || matched < 20 {
		t.Fatalf("%d finite regexes, %d lines matched: the comparison is too weak", finite, matched)
	}
}

// TestEveryDefaultRuleIsPrefiltered keeps the default packs fast: a rule without a
// usable literal would run its regex on every line of the fleet.
func TestEveryDefaultRuleIsPrefiltered(t *testing.T) {
	e := defaultEngine(t)
	for _, r := range e.Set().Rules {
		if r.Literals == nil {
			t.Errorf("rule %s has no literal of 3+ bytes", r)
		}
	}
	if _, all := e.Patterns(); !all {
		t.Error("some rule runs on every line")
	}
}

// benignStream is a realistic node log: mostly benign kernel and pod lines, with
// one fault line per 2,000 (99.95 % benign).
func benignStream(tb testing.TB) []logstream.Line {
	benign := []string{
		"[  120.123456] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
		"[  121.000001] EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode. Quota mode: none.",
		"[  130.554433] IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
		"[  200.000000] nvidia-nvswitch3: open (major=510)",
		"[  201.123000] NVRM: GPU at PCI:0000:3b:00: GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df",
		"[  300.777000] audit: type=1400 audit(1700000000.123:45): apparmor=\"STATUS\" operation=\"profile_load\"",
		"[  301.000000] systemd[1]: Started Session 42 of user root.",
		"[  400.101010] br-4f2: port 3(veth12ab) entered forwarding state",
		"[  401.000000] cni0: port 7(vethc0ffee) entered blocking state",
		"step 1200 | loss 2.3141 | lr 3.0e-04 | tokens/s 182340 | grad_norm 0.82",
		"node-7:1234:1290 [3] NCCL INFO Channel 07/0 : 3[3] -> 4[4] via P2P/IPC/read",
		"Epoch 3/10: 100%|██████████| 5000/5000 [12:01<00:00,  6.93it/s]",
		"INFO 2025-01-01 12:00:00,123 trainer.py:412] Saving checkpoint to /ckpt/step_1200",
		"[  500.000000] Memory cgroup stats for /kubepods.slice: anon 123456",
		"[  501.333000] IPVS: rr: TCP 10.96.0.1:443 - no destination available",
		"[  600.000000] kauditd_printk_skb: 12 callbacks suppressed",
	}
	faults := []string{
		"NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"pcieport 0000:00:02.0: AER: Corrected error received: 0000:00:02.0",
		"[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.",
	}
	r := rand.New(rand.NewSource(7))
	out := make([]logstream.Line, 20000)
	for i := range out {
		src := rules.SourceKernel
		text := benign[r.Intn(len(benign))]
		if i%2000 == 1999 {
			text = faults[(i/2000)%len(faults)]
		}
		if !strings.HasPrefix(text, "[") && !strings.HasPrefix(text, "NVRM") && !strings.HasPrefix(text, "pcieport") {
			src = rules.SourcePod
		}
		out[i] = logstream.Line{Text: text, Source: string(src)}
	}
	return out
}

// BenchmarkMatch compares, on the same stream in the same run, the engine against a
// naive loop of regexp.MatchString per rule (the baseline asked for) and against the
// engine's own naive path (every regex, with captures and conditions). Report the
// ratio of ns/op: BenchmarkMatch/naive-matchstring ÷ BenchmarkMatch/engine.
func BenchmarkMatch(b *testing.B) {
	e := defaultEngine(b)
	stream := benignStream(b)
	exprs := make([]string, len(e.Set().Rules))
	for i, r := range e.Set().Rules {
		exprs[i] = r.Regexp().String()
	}
	b.Run("engine", func(b *testing.B) {
		var hits []rules.Hit
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			hits = e.Match(&stream[i%len(stream)], hits[:0])
		}
	})
	b.Run("naive-matchstring", func(b *testing.B) {
		// regexp.MatchString compiles the pattern on every call, as a naive tool would.
		for i := 0; i < b.N; i++ {
			l := stream[i%len(stream)]
			for _, x := range exprs {
				if ok, _ := regexp.MatchString(x, l.Text); ok {
					_ = ok
				}
			}
		}
	})
	b.Run("naive-precompiled", func(b *testing.B) {
		var hits []rules.Hit
		for i := 0; i < b.N; i++ {
			hits = e.MatchNaive(&stream[i%len(stream)], hits[:0])
		}
	})
}
