// Package logline recognises the shapes log lines take in the wild — raw dmesg,
// /dev/kmsg records, syslog and journal prefixes, CRI pod-log lines — and splits
// off the prefix so rules see the message the kernel or the program printed. It
// also reads the line's own time and host from the prefix, when it has them.
//
// Recognition is hand-written byte scanning, not regular expressions: `faultline
// scan` runs it on every line of whole log archives.
package logline

import (
	"strings"
	"time"
)

// Format is the recognised outer shape of a line.
type Format string

// Formats.
const (
	FormatPlain  Format = "plain"  // no known prefix
	FormatDmesg  Format = "dmesg"  // [  123.456789] or [Tue Feb 14 18:48:25 2023]
	FormatKmsg   Format = "kmsg"   // prio,seq,usec,flags;message
	FormatSyslog Format = "syslog" // Oct 30 09:49:36 host program[pid]: message
	FormatCRI    Format = "cri"    // 2024-01-02T03:04:05.123Z stdout F message
	FormatDict   Format = "kmsg-dict"
)

// Origin tells where a line came from, when the prefix says so.
type Origin string

// Origins.
const (
	OriginUnknown Origin = ""
	OriginKernel  Origin = "kernel"
	OriginPod     Origin = "pod"
)

// Clock tells what the line's own time is.
type Clock uint8

// Clocks.
const (
	// ClockNone: the line carries no time.
	ClockNone Clock = iota
	// ClockBoot: Uptime holds the time since boot (raw dmesg seconds, /dev/kmsg
	// microseconds); it restarts at every boot.
	ClockBoot
	// ClockWall: Time holds a calendar time. Times written without a zone (dmesg -T,
	// syslog) are read as UTC: only their differences matter.
	ClockWall
	// ClockWallNoYear: Time holds a syslog calendar time that names no year; its
	// year is 0 and the reader supplies one.
	ClockWallNoYear
)

// Parsed is a line split into its prefix and message.
type Parsed struct {
	Format  Format
	Origin  Origin
	Message string
	// Program is the syslog tag (kernel, systemd, nv-fabricmanager...), if any.
	Program string
	// Host is the host field of a syslog or journal prefix, if any.
	Host string
	// Clock says which of Time and Uptime holds the line's own time.
	Clock  Clock
	Time   time.Time
	Uptime time.Duration
	// Continuation is set for /dev/kmsg dictionary lines (" SUBSYSTEM=pci"): they
	// describe the previous record and carry no message of their own.
	Continuation bool
}

// Parse splits a raw line. It never fails: an unknown shape is a plain message.
func Parse(raw string) Parsed {
	var p Parsed
	parse(raw, nil, &p)
	return p
}

// Parser parses lines as Parse does, remembering the last syslog date it read:
// consecutive lines of a syslog mostly share their second, and reading the date is
// a visible share of parsing a line. A Parser is for one goroutine.
type Parser struct {
	date [64]byte // the text of the last syslog date read
	n    int      // its length; 0: none
	ts   time.Time
}

// Parse sets p to what the package's Parse returns for raw. A parsed line is a
// struct of a dozen words: filled in place, it is neither built twice nor copied.
func (pr *Parser) Parse(raw string, p *Parsed) { parse(raw, pr, p) }

// syslogDate is the package's syslogDate, answered from the last date when s starts
// with its text followed by a space (so no digit of the time or fraction differs).
func (pr *Parser) syslogDate(s string) (int, time.Time, bool) {
	if pr == nil {
		return syslogDate(s)
	}
	if n := pr.n; n > 0 && n < len(s) && isSpace(s[n]) && string(pr.date[:n]) == s[:n] {
		return n, pr.ts, true
	}
	n, ts, ok := syslogDate(s)
	if ok && n <= len(pr.date) {
		pr.n, pr.ts = copy(pr.date[:], s[:n]), ts
	}
	return n, ts, ok
}

func parse(raw string, pr *Parser, p *Parsed) {
	line := trimNewline(raw)
	if len(line) > 0 && line[0] == ' ' && isDict(line) {
		*p = Parsed{Format: FormatDict, Origin: OriginKernel, Continuation: true}
		return
	}
	if parseKmsg(line, p) || parseCRI(line, p) {
		return
	}
	*p = Parsed{Format: FormatPlain, Message: line}
	rest := line
	if n := decodePrefix(rest); n > 0 {
		// dmesg --decode (-x): "kern  :warn  : " before the time.
		rest = rest[n:]
		p.Format, p.Origin = FormatDmesg, OriginKernel
	}
	if n, ok := parseSyslog(rest, p, pr); ok {
		rest = rest[n:]
	} else if r, ok := strings.CutPrefix(rest, "kernel: "); ok {
		// A journal or syslog line pasted without its date and host.
		rest, p.Program, p.Origin = r, "kernel", OriginKernel
	} else if n, prog, ok := programTag(rest); ok {
		// A program's journal or syslog line pasted without its date and host
		// ("mcelog[808]: Hardware event..."): rules read what the program printed.
		rest, p.Program = rest[n:], prog
	} else if ts, n, f := parseISO(rest); n > 0 && !f.spaceSep && f.zone && n < len(rest) && isSpace(rest[n]) {
		// dmesg --time-format iso: "2025-01-21T04:41:44,283575+00:00 " and no host.
		// util-linux writes it with a decimal comma (ISO_TIMESTAMP_COMMA_T); an RFC
		// 3339 time with a dot or none ("...21.001128133Z ...", a log shipper's or
		// kubectl --timestamps' prefix) goes the same way but names no origin: the
		// line after it may be the kernel's or a pod's.
		rest = rest[n+1:]
		if f.comma {
			if p.Format == FormatPlain {
				p.Format = FormatDmesg
			}
			p.Origin = OriginKernel
		}
		if !ts.IsZero() {
			p.Clock, p.Time = ClockWall, ts
		}
	}
	if n := consoleLevel(rest); n > 0 && n < len(rest) && rest[n] == '[' {
		rest = rest[n:]
	}
	if n, ok := parseDmesgBracket(rest, p); ok {
		rest = rest[n:]
		if p.Format == FormatPlain {
			p.Format = FormatDmesg
		}
		p.Origin = OriginKernel
	}
	p.Message = rest
	if p.Clock == ClockNone {
		// Application logs: an ISO date and time near the start of the message.
		if ts, ok := findISO(rest); ok {
			p.Clock, p.Time = ClockWall, ts
		}
	}
}

// trimNewline drops trailing line ends (strings.TrimRight, without its set).
func trimNewline(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// isDict reports whether a line is a kmsg dictionary line: " KEY=value" with an
// upper-case key.
func isDict(line string) bool {
	rest := line[1:]
	eq := strings.IndexByte(rest, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		c := rest[i]
		if (c < 'A' || c > 'Z') && c != '_' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
