package lokisource

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packs"
)

func TestQueries(t *testing.T) {
	kernelPod := Selectors{"pod": `{source="pod"}`, "kernel": ` {source="kernel"} `}
	tests := []struct {
		name     string
		sel      Selectors
		literals []string
		all      bool
		want     []Query
	}{
		{
			name:     "sorted names and literals, regex metacharacters quoted",
			sel:      kernelPod,
			literals: []string{"xid (", "aer: ", "link down"},
			all:      true,
			want: []Query{
				{Name: "kernel", LogQL: "{source=\"kernel\"} |~ `(?i)aer: |link down|xid \\(`"},
				{Name: "pod", LogQL: "{source=\"pod\"} |~ `(?i)aer: |link down|xid \\(`"},
			},
		},
		{
			name:     "a rule without literals: no line filter",
			sel:      kernelPod,
			literals: []string{"xid"},
			all:      false,
			want: []Query{
				{Name: "kernel", LogQL: `{source="kernel"}`},
				{Name: "pod", LogQL: `{source="pod"}`},
			},
		},
		{
			name: "no rules at all: match nothing",
			sel:  Selectors{"kernel": `{source="kernel"}`},
			all:  true,
			want: []Query{{Name: "kernel", LogQL: `{source="kernel"} != ""`}},
		},
		{
			name:     "duplicates, upper case and literals containing others are dropped",
			sel:      Selectors{"k": `{k8s_node_name=~".+"}`},
			literals: []string{"NVRM: Xid", "nvrm: xid", "xid", "fallen off the bus", "", "Off The Bus"},
			all:      true,
			want:     []Query{{Name: "k", LogQL: "{k8s_node_name=~\".+\"} |~ `(?i)off the bus|xid`"}},
		},
		{
			name:     "every regex metacharacter",
			sel:      Selectors{"k": `{a="b"}`},
			literals: []string{`a.b*c+d?e(f)g[h]i{j}k|l^m$n\o`},
			all:      true,
			want:     []Query{{Name: "k", LogQL: "{a=\"b\"} |~ `(?i)a\\.b\\*c\\+d\\?e\\(f\\)g\\[h\\]i\\{j\\}k\\|l\\^m\\$n\\\\o`"}},
		},
		{
			name:     "a backtick forces a double-quoted string",
			sel:      Selectors{"k": `{a="b"}`},
			literals: []string{"say `hi`", `"quoted"`},
			all:      true,
			want:     []Query{{Name: "k", LogQL: `{a="b"} |~ "(?i)\"quoted\"|say ` + "`hi`" + `"`}},
		},
		{
			name:     "a control character forces a double-quoted string",
			sel:      Selectors{"k": `{a="b"}`},
			literals: []string{"tab\there"},
			all:      true,
			want:     []Query{{Name: "k", LogQL: `{a="b"} |~ "(?i)tab\there"`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildQueries(tt.sel, tt.literals, tt.all)
			if !slices.Equal(got, tt.want) {
				t.Errorf("buildQueries:\n got %q\nwant %q", got, tt.want)
			}
			// Deterministic whatever the input order.
			rev := slices.Clone(tt.literals)
			slices.Reverse(rev)
			if again := buildQueries(tt.sel, rev, tt.all); !slices.Equal(again, got) {
				t.Errorf("depends on literal order: %q vs %q", again, got)
			}
		})
	}
}

// buildQueries is EngineQueries with one set of literals for every selector.
func buildQueries(sel Selectors, literals []string, allLiterals bool) []Query {
	return queries(sel, func(string) string { return LineFilter(literals, allLiterals) })
}

// filterRegex extracts the Go regex of a query's line filter.
func filterRegex(t *testing.T, logql string) *regexp.Regexp {
	t.Helper()
	i := strings.Index(logql, "|~ ")
	if i < 0 {
		t.Fatalf("no regex filter in %s", logql)
	}
	q := logql[i+3:]
	var s string
	if q[0] == '`' {
		s = q[1 : len(q)-1]
	} else {
		var err error
		if s, err = strconv.Unquote(q); err != nil {
			t.Fatal(err)
		}
	}
	return regexp.MustCompile(s)
}

func TestLineFilterMatchesLiteralsCaseInsensitively(t *testing.T) {
	lits := []string{"xid (", "aer: ", "link down", "a.b", "say `hi`", "[x]"}
	re := filterRegex(t, buildQueries(Selectors{"k": `{a="b"}`}, lits, true)[0].LogQL)
	for _, line := range []string{
		"NVRM: Xid (PCI:0000:3b:00): 79", "pcieport: AER: Corrected error", "eth0: Link Down",
		"xA.Bx", "they SAY `HI`", "oops [X] here",
	} {
		if !re.MatchString(line) {
			t.Errorf("%s does not match %q", re, line)
		}
	}
	for _, line := range []string{"NVRM: Xid 79", "aer:x", "link  down", "aXb", "say 'hi'", "[y]"} {
		if re.MatchString(line) {
			t.Errorf("%s matches %q", re, line)
		}
	}
}

func TestEngineQueriesPerSource(t *testing.T) {
	ps, err := packs.Load()
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	e := rules.NewEngine(set)
	sel := Selectors{"kernel": `{source="kernel"}`, "pod": `{source="pod"}`, "everything": `{job="x"}`}
	qs := EngineQueries(sel, e)
	if len(qs) != 3 || qs[0].Name != "everything" || qs[1].Name != "kernel" || qs[2].Name != "pod" {
		t.Fatalf("queries %q", qs)
	}
	all, allOK := e.Patterns()
	if want := `{job="x"}` + LineFilter(all, allOK); qs[0].LogQL != want {
		t.Errorf("unnamed source: %s, want %s", qs[0].LogQL, want)
	}
	for _, q := range qs {
		t.Logf("%s: %d bytes: %.300s", q.Name, len(q.LogQL), q.LogQL)
	}
	// Every rule's test lines of a source pass that source's filter.
	for _, q := range qs[1:] {
		lits, ok := set.Literals(rules.Source(q.Name))
		if !ok {
			if strings.Contains(q.LogQL, "|~") {
				t.Errorf("%s: a rule without literals, yet a filter", q.Name)
			}
			continue
		}
		re := filterRegex(t, q.LogQL)
		checked := 0
		for _, r := range set.Rules {
			if r.Source != rules.Source(q.Name) && r.Source != rules.SourceAny {
				continue
			}
			for _, tc := range r.Tests {
				if tc.Line == "" || len(r.Regexp().FindStringIndex(tc.Line)) == 0 {
					continue // a test of a non-match, or a companion line
				}
				checked++
				if !re.MatchString(tc.Line) {
					t.Errorf("%s: rule %s test line %q fails the filter", q.Name, r, tc.Line)
				}
			}
		}
		t.Logf("%s: %d literals, %d rule test lines pass the filter", q.Name, len(lits), checked)
		if checked == 0 {
			t.Errorf("%s: no rule test line checked", q.Name)
		}
	}
	// Pod rules' literals stay out of the kernel query when they are kernel-only.
	kernelLits, _ := set.Literals(rules.SourceKernel)
	podLits, _ := set.Literals(rules.SourcePod)
	if slices.Equal(minimalLiterals(kernelLits), minimalLiterals(podLits)) {
		t.Errorf("kernel and pod filters are the same: per-source literals not applied")
	}
}

func TestSetLiteralsWithoutLiterals(t *testing.T) {
	ps, err := rules.Loader{}.ParseFile("x.yaml", []byte(`apiVersion: faultline.io/v1
kind: RulePack
metadata: {name: x}
spec:
  defaults: {severity: warning, action: event}
  rules:
    - id: k
      source: kernel
      match: {regex: 'NVRM: Xid'}
    - id: p
      source: pod
      match: {regex: '^\d+$'}
    - id: a
      source: any
      match: {regex: 'Out of memory'}
`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile(ps)
	if err != nil {
		t.Fatal(err)
	}
	k, kok := set.Literals(rules.SourceKernel)
	slices.Sort(k)
	if !kok || !slices.Equal(k, []string{"nvrm: xid", "out of memory"}) {
		t.Errorf("kernel literals %q %v", k, kok)
	}
	if _, pok := set.Literals(rules.SourcePod); pok {
		t.Errorf("pod: a rule without literals, yet all literals")
	}
	qs := EngineQueries(DefaultSelectors(), rules.NewEngine(set))
	want := []Query{
		{Name: "kernel", LogQL: "{source=\"kernel\"} |~ `(?i)nvrm: xid|out of memory`"},
		// NVML event and verdict lines: only the rule of any source applies to them.
		{Name: "nvml", LogQL: "{source=\"nvml\"} |~ `(?i)out of memory`"},
		{Name: "pod", LogQL: `{source="pod"}`},
		{Name: "probe", LogQL: "{source=\"probe\"} |~ `(?i)out of memory`"},
	}
	if !slices.Equal(qs, want) {
		t.Errorf("EngineQueries %q, want %q", qs, want)
	}
}
