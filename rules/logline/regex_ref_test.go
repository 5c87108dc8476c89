package logline

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The regular expressions the byte scanners replaced: the reference their
// recognition of formats, origins, programs and messages is checked against.
var (
	refKmsg    = regexp.MustCompile(`^(\d{1,4}),(\d+),(\d+),([-+c])(?:,[^;]*)?;`)
	refCRI     = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) (?:stdout|stderr) [PF](?::\S*)? ?`)
	refDmesg   = regexp.MustCompile(`^\[\s*\d{1,9}\.\d*\](?:\[\s*[TC]\d+\])?\s?|^\[(?:[A-Z][a-z]{2} ){2}[ \d]\d \d\d:\d\d:\d\d \d{4}\]\s?|^\[[^\]]{1,12} \d\d:\d\d:\d\d \d{4}\]\s?`)
	refConsole = regexp.MustCompile(`^<\d{1,3}>`)
	refSyslog  = regexp.MustCompile(`^(?:\S{1,12}\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+(\S+)\s+(?:(?:[A-Z]+)\s+)?([^\s:\[]+)(?:\[\d+\])?:\s?`)
	// A syslog line pasted without its host: "Mar 21 21:43:00 kernel: ...".
	refSyslogNoHost = regexp.MustCompile(`^(?:\S{1,12}\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+kernel:\s?`)
	// A user-space program's tag with no date and host before it, unless what follows
	// is one of the kernel's own lines about a task.
	refProgramTag = regexp.MustCompile(`^([^\s:\[]+)\[\d+\]:\s?`)
	refKernelTask = regexp.MustCompile(`^(?:segfault at |unhandled (?:exception: |signal )|bad (?:frame|restore token) in |memfd_create\(\) requires MFD_NOEXEC_SEAL)`)
	refDecode     = regexp.MustCompile(`^[a-z]+\s*:[a-z]+\s*: `)
	refISOTime    = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:([.,])\d+)?(?:Z|[+-]\d\d:?\d\d)\s`)
)

func refParse(raw string) Parsed {
	line := strings.TrimRight(raw, "\r\n")
	if strings.HasPrefix(line, " ") && isDict(line) {
		return Parsed{Format: FormatDict, Origin: OriginKernel, Continuation: true}
	}
	if m := refKmsg.FindStringSubmatchIndex(line); m != nil {
		p := Parsed{Format: FormatKmsg, Message: line[m[1]:]}
		if prio := line[m[2]:m[3]]; len(prio) == 1 || atoi(prio) < 8 {
			p.Origin = OriginKernel
		} else if prog, msg, ok := refTag(p.Message); ok {
			p.Program, p.Message = prog, msg
		}
		return p
	}
	if m := refCRI.FindStringIndex(line); m != nil {
		return Parsed{Format: FormatCRI, Origin: OriginPod, Message: line[m[1]:]}
	}
	p := Parsed{Format: FormatPlain, Message: line}
	rest := line
	if m := refDecode.FindStringIndex(rest); m != nil {
		rest = rest[m[1]:]
		p.Format, p.Origin = FormatDmesg, OriginKernel
	}
	if m := refSyslogNoHost.FindStringIndex(rest); m != nil {
		p.Format, p.Program, p.Origin = FormatSyslog, "kernel", OriginKernel
		rest = rest[m[1]:]
	} else if m := refSyslog.FindStringSubmatchIndex(rest); m != nil {
		prog := rest[m[4]:m[5]]
		p.Format, p.Program, p.Host = FormatSyslog, prog, rest[m[2]:m[3]]
		if prog == "kernel" {
			p.Origin = OriginKernel
		}
		rest = rest[m[1]:]
	} else if r, ok := strings.CutPrefix(rest, "kernel: "); ok {
		rest, p.Program, p.Origin = r, "kernel", OriginKernel
	} else if prog, msg, ok := refTag(rest); ok {
		rest, p.Program = msg, prog
	} else if m := refISOTime.FindStringSubmatchIndex(rest); m != nil {
		// dmesg's ISO time has a decimal comma; a dot's names no origin.
		if m[2] >= 0 && rest[m[2]:m[3]] == "," {
			if p.Format == FormatPlain {
				p.Format = FormatDmesg
			}
			p.Origin = OriginKernel
		}
		rest = rest[m[1]:]
	}
	if m := refConsole.FindStringIndex(rest); m != nil && strings.HasPrefix(rest[m[1]:], "[") {
		rest = rest[m[1]:]
	}
	if m := refDmesg.FindStringIndex(rest); m != nil {
		rest = rest[m[1]:]
		if p.Format == FormatPlain {
			p.Format = FormatDmesg
		}
		p.Origin = OriginKernel
	}
	p.Message = rest
	return p
}

// refTag splits a program's "ident[pid]: " tag off a line.
func refTag(s string) (prog, msg string, ok bool) {
	m := refProgramTag.FindStringSubmatchIndex(s)
	if m == nil || refKernelTask.MatchString(s[m[1]:]) {
		return "", "", false
	}
	return s[m[2]:m[3]], s[m[1]:], true
}

// sameShape compares what both parsers recognise (the reference reads no times).
func sameShape(a, b Parsed) bool {
	return a.Format == b.Format && a.Origin == b.Origin && a.Message == b.Message && a.Program == b.Program &&
		a.Host == b.Host && a.Continuation == b.Continuation
}

// TestParseMatchesRegexReference: on every line of the development corpus, and on
// the lines of the other tests, the byte scanners split lines as the regexes did.
func TestParseMatchesRegexReference(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "testdata", "corpus", "kernel-and-pod-lines.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var c struct {
			RawLine string `json:"raw_line"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, c.RawLine)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) < 100 {
		t.Fatalf("corpus has %d lines", len(lines))
	}
	for _, c := range parseCases {
		lines = append(lines, c.raw)
	}
	for _, c := range timeCases {
		lines = append(lines, c.raw)
	}
	for _, c := range programCases {
		lines = append(lines, c.raw)
	}
	for _, l := range lines {
		if got, want := Parse(l), refParse(l); !sameShape(got, want) {
			t.Errorf("Parse(%q)\n got %+v\nwant %+v", l, got, want)
		}
	}
}

// FuzzParseMatchesRegexReference: the same on any input.
func FuzzParseMatchesRegexReference(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c.raw)
	}
	for _, c := range timeCases {
		f.Add(c.raw)
	}
	for _, c := range programCases {
		f.Add(c.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if got, want := Parse(raw), refParse(raw); !sameShape(got, want) {
			t.Fatalf("Parse(%q)\n got %+v\nwant %+v", raw, got, want)
		}
	})
}
