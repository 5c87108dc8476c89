// Package logline recognises the shapes log lines take in the wild — raw dmesg,
// /dev/kmsg records, syslog and journal prefixes, CRI pod-log lines — and splits
// off the prefix so rules see the message the kernel or the program printed.
package logline

import (
	"regexp"
	"strings"
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

// Parsed is a line split into its prefix and message.
type Parsed struct {
	Format  Format
	Origin  Origin
	Message string
	// Program is the syslog tag (kernel, systemd, nv-fabricmanager...), if any.
	Program string
	// Continuation is set for /dev/kmsg dictionary lines (" SUBSYSTEM=pci"): they
	// describe the previous record and carry no message of their own.
	Continuation bool
}

var (
	kmsgRe = regexp.MustCompile(`^(\d{1,4}),(\d+),(\d+),([-+c])(?:,[^;]*)?;`)
	// CRI: RFC 3339 timestamp, stream, tag (P, F, or F:extra), message.
	criRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) (?:stdout|stderr) [PF](?::\S*)? ?`)
	// dmesg bracket prefixes: monotonic seconds, optional caller id ([  T291]), or a ctime date.
	dmesgRe = regexp.MustCompile(`^\[\s*\d+\.\d*\](?:\[\s*[TC]\d+\])?\s?|^\[(?:[A-Z][a-z]{2} ){2}[ \d]\d \d\d:\d\d:\d\d \d{4}\]\s?|^\[[^\]]{1,12} \d\d:\d\d:\d\d \d{4}\]\s?`)
	// Console level prefix as printed by some dmesg front ends: <4>[  201.6] ...
	consoleLevelRe = regexp.MustCompile(`^<\d{1,3}>`)
	// syslog: "Oct 30 09:49:36 host prog[123]: " (also with fractional seconds and
	// any month spelling), ISO timestamps "2024-04-29T14:55:41.1+02:00 host prog: ".
	syslogRe = regexp.MustCompile(`^(?:\S{1,12}\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+(\S+)\s+(?:(?:[A-Z]+)\s+)?([^\s:\[]+)(?:\[\d+\])?:\s?`)
	// dmesg --decode (-x): "kern  :warn  : " before the time.
	decodeRe = regexp.MustCompile(`^[a-z]+\s*:[a-z]+\s*: `)
	// dmesg --time-format iso: "2025-01-21T04:41:44,283575+00:00 " with no host.
	isoTimeRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)\s`)
)

// Parse splits a raw line. It never fails: an unknown shape is a plain message.
func Parse(raw string) Parsed {
	line := strings.TrimRight(raw, "\r\n")
	if strings.HasPrefix(line, " ") && isDict(line) {
		return Parsed{Format: FormatDict, Origin: OriginKernel, Message: "", Continuation: true}
	}
	if m := kmsgRe.FindStringSubmatchIndex(line); m != nil {
		p := Parsed{Format: FormatKmsg, Message: line[m[1]:]}
		// Facility 0 is the kernel; higher facilities were written by user space.
		if prio := line[m[2]:m[3]]; len(prio) == 1 || atoi(prio) < 8 {
			p.Origin = OriginKernel
		}
		return p
	}
	if m := criRe.FindStringIndex(line); m != nil {
		return Parsed{Format: FormatCRI, Origin: OriginPod, Message: line[m[1]:]}
	}
	p := Parsed{Format: FormatPlain, Message: line}
	rest := line
	if m := decodeRe.FindStringIndex(rest); m != nil {
		rest = rest[m[1]:]
		p.Format, p.Origin = FormatDmesg, OriginKernel
	}
	if m := syslogRe.FindStringSubmatchIndex(rest); m != nil {
		prog := rest[m[4]:m[5]]
		p.Format, p.Program = FormatSyslog, prog
		if prog == "kernel" {
			p.Origin = OriginKernel
		}
		rest = rest[m[1]:]
	} else if r, ok := strings.CutPrefix(rest, "kernel: "); ok {
		// A journal or syslog line pasted without its date and host.
		rest, p.Program, p.Origin = r, "kernel", OriginKernel
	} else if m := isoTimeRe.FindStringIndex(rest); m != nil {
		rest = rest[m[1]:]
		if p.Format == FormatPlain {
			p.Format = FormatDmesg
		}
		p.Origin = OriginKernel
	}
	if m := consoleLevelRe.FindStringIndex(rest); m != nil && strings.HasPrefix(rest[m[1]:], "[") {
		rest = rest[m[1]:]
	}
	if m := dmesgRe.FindStringIndex(rest); m != nil {
		rest = rest[m[1]:]
		if p.Format == FormatPlain {
			p.Format = FormatDmesg
		}
		p.Origin = OriginKernel
	}
	p.Message = rest
	return p
}

// isDict reports whether a line is a kmsg dictionary line: " KEY=value" with an
// upper-case key.
func isDict(line string) bool {
	rest := line[1:]
	eq := strings.IndexByte(rest, '=')
	if eq <= 0 {
		return false
	}
	for _, c := range rest[:eq] {
		if (c < 'A' || c > 'Z') && c != '_' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
		if n > 1<<20 {
			return n
		}
	}
	return n
}
