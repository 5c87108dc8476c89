package logline

import (
	"strings"
	"time"
	"unicode/utf8"
)

// parseKmsg reads a /dev/kmsg record: "prio,seq,usec,flags[,more];message".
func parseKmsg(s string, p *Parsed) bool {
	prioEnd := digits(s, 0, 4)
	if prioEnd == 0 || prioEnd >= len(s) || s[prioEnd] != ',' {
		return false
	}
	seqEnd := digits(s, prioEnd+1, len(s))
	if seqEnd == prioEnd+1 || seqEnd >= len(s) || s[seqEnd] != ',' {
		return false
	}
	usecEnd := digits(s, seqEnd+1, len(s))
	if usecEnd == seqEnd+1 || usecEnd+1 >= len(s) || s[usecEnd] != ',' {
		return false
	}
	i := usecEnd + 1
	if c := s[i]; c != '-' && c != '+' && c != 'c' {
		return false
	}
	i++
	if i < len(s) && s[i] == ',' {
		// Further fields (caller=T12, ...) up to the semicolon.
		j := strings.IndexByte(s[i:], ';')
		if j < 0 {
			return false
		}
		i += j
	}
	if i >= len(s) || s[i] != ';' {
		return false
	}
	*p = Parsed{Format: FormatKmsg, Message: s[i+1:]}
	// Facility 0 is the kernel; higher facilities were written by user space, which
	// tags its records as syslog does ("systemd[1]: ...").
	if prioEnd == 1 || atoi(s[:prioEnd]) < 8 {
		p.Origin = OriginKernel
	} else if n, prog, ok := programTag(p.Message); ok {
		p.Message, p.Program = p.Message[n:], prog
	}
	if usec, ok := atoi64(s[seqEnd+1 : usecEnd]); ok {
		p.Clock, p.Uptime = ClockBoot, time.Duration(usec)*time.Microsecond
	}
	return true
}

// parseCRI reads a CRI pod-log line: RFC 3339 time, stream, tag (P, F or F:extra).
func parseCRI(s string, p *Parsed) bool {
	ts, n, f := parseISO(s)
	if n == 0 || f.spaceSep || f.comma || !f.zone || n >= len(s) || s[n] != ' ' {
		return false
	}
	i := n + 1
	switch {
	case strings.HasPrefix(s[i:], "stdout "), strings.HasPrefix(s[i:], "stderr "):
		i += len("stdout ")
	default:
		return false
	}
	if i >= len(s) || (s[i] != 'P' && s[i] != 'F') {
		return false
	}
	i++
	if i < len(s) && s[i] == ':' {
		for i < len(s) && !isSpace(s[i]) {
			i++
		}
	}
	if i < len(s) && s[i] == ' ' {
		i++
	}
	*p = Parsed{Format: FormatCRI, Origin: OriginPod, Message: s[i:]}
	if !ts.IsZero() {
		p.Clock, p.Time = ClockWall, ts
	}
	return true
}

// decodePrefix returns the length of a `dmesg --decode` prefix ("kern  :warn  : "), or 0.
func decodePrefix(s string) int {
	i := lowerRun(s, 0)
	if i == 0 {
		return 0
	}
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != ':' {
		return 0
	}
	j := lowerRun(s, i+1)
	if j == i+1 {
		return 0
	}
	j = skipSpace(s, j)
	if j+1 >= len(s) || s[j] != ':' || s[j+1] != ' ' {
		return 0
	}
	return j + 2
}

// parseSyslog reads a syslog or journal prefix — "Oct 30 09:49:36 host prog[123]: "
// (also with fractional seconds and any month spelling) or "2024-04-29T14:55:41.1+02:00
// host prog: " — and returns its length. An optional upper-case level may stand
// between host and program.
func parseSyslog(s string, p *Parsed, pr *Parser) (int, bool) {
	var (
		ts    time.Time
		clock Clock
		i     int
	)
	if n, t, ok := pr.syslogDate(s); ok {
		i, ts, clock = n, t, ClockWallNoYear
	} else if t, n, _ := parseISO(s); n > 0 {
		i, ts, clock = n, t, ClockWall
	} else {
		return 0, false
	}
	j := skipSpace(s, i)
	if j == i {
		return 0, false
	}
	if strings.HasPrefix(s[j:], "kernel:") {
		// "Mar 21 21:43:00 kernel: ...": a line pasted without its host. A host field is
		// never followed by a colon, so this is the program.
		return finishSyslog(p, "", "kernel", ts, clock, s, j+len("kernel:")), true
	}
	hostEnd := nonSpaceRun(s, j)
	if hostEnd == j {
		return 0, false
	}
	host := s[j:hostEnd]
	k := skipSpace(s, hostEnd)
	if k == hostEnd {
		return 0, false
	}
	if strings.HasPrefix(s[k:], "kernel:") {
		// "host kernel:", most lines of a kernel log: what syslogProgram reads, and
		// no level (upper-case) before it.
		return finishSyslog(p, host, s[k:k+len("kernel")], ts, clock, s, k+len("kernel:")), true
	}
	// "host LEVEL prog:" first, then "host prog:".
	if lv := upperRun(s, k); lv > k {
		if m := skipSpace(s, lv); m > lv {
			if end, prog, ok := syslogProgram(s, m); ok {
				return finishSyslog(p, host, prog, ts, clock, s, end), true
			}
		}
	}
	end, prog, ok := syslogProgram(s, k)
	if !ok {
		return 0, false
	}
	return finishSyslog(p, host, prog, ts, clock, s, end), true
}

func finishSyslog(p *Parsed, host, prog string, ts time.Time, clock Clock, s string, end int) int {
	p.Format, p.Program, p.Host = FormatSyslog, prog, host
	if prog == "kernel" {
		p.Origin = OriginKernel
	}
	if !ts.IsZero() {
		p.Clock, p.Time = clock, ts
	}
	if end < len(s) && isSpace(s[end]) {
		end++
	}
	return end
}

// syslogProgram reads "prog[123]:" or "prog:" at i and returns the index after the colon.
func syslogProgram(s string, i int) (int, string, bool) {
	j := i
	for j < len(s) && !isSpace(s[j]) && s[j] != ':' && s[j] != '[' {
		j++
	}
	if j == i || j >= len(s) {
		return 0, "", false
	}
	prog := s[i:j]
	if s[j] == '[' {
		d := digits(s, j+1, len(s))
		if d == j+1 || d >= len(s) || s[d] != ']' {
			return 0, "", false
		}
		j = d + 1
	}
	if j >= len(s) || s[j] != ':' {
		return 0, "", false
	}
	return j + 1, prog, true
}

// programTag reads the "ident[pid]: " tag at the start of a user-space program's line
// written without a syslog date and host, and returns the index after it and its
// space. The kernel's own lines that name a task the same way ("python3[4001]:
// segfault at ...") are not tags: they stay whole.
func programTag(s string) (int, string, bool) {
	j := 0
	for j < len(s) && !isSpace(s[j]) && s[j] != ':' && s[j] != '[' {
		j++
	}
	if j == 0 || j >= len(s) || s[j] != '[' {
		return 0, "", false
	}
	end, prog, ok := syslogProgram(s, 0)
	if !ok {
		return 0, "", false
	}
	if end < len(s) && isSpace(s[end]) {
		end++
	}
	for _, k := range kernelTaskLines {
		if strings.HasPrefix(s[end:], k) {
			return 0, "", false
		}
	}
	return end, prog, true
}

// kernelTaskLines begin the kernel's messages printed after a task's "comm[pid]: ":
// x86's page-fault report (show_signal_msg), arm64's and riscv's unhandled exceptions
// and signals, a bad signal frame or shadow-stack token, memfd's sealing warning.
var kernelTaskLines = []string{
	"segfault at ",
	"unhandled exception: ",
	"unhandled signal ",
	"bad frame in ",
	"bad restore token in ",
	"memfd_create() requires MFD_NOEXEC_SEAL",
}

// syslogDate reads "Mon DD HH:MM:SS[.frac]" with a month token of at most 12
// characters in any spelling. The time is set (year 0) only when the month is one it
// knows.
func syslogDate(s string) (int, time.Time, bool) {
	monEnd := nonSpaceRun(s, 0)
	if monEnd == 0 || monEnd > 12 && (monEnd > 48 || utf8.RuneCountInString(s[:monEnd]) > 12) {
		return 0, time.Time{}, false
	}
	i := skipSpace(s, monEnd)
	if i == monEnd {
		return 0, time.Time{}, false
	}
	dayEnd := digits(s, i, i+2)
	if dayEnd == i {
		return 0, time.Time{}, false
	}
	day := atoi(s[i:dayEnd])
	j := skipSpace(s, dayEnd)
	if j == dayEnd {
		return 0, time.Time{}, false
	}
	hh, mm, ss, ok := clockTime(s, j)
	if !ok {
		return 0, time.Time{}, false
	}
	end := j + 8
	var ns int
	if end < len(s) && s[end] == '.' {
		if e := digits(s, end+1, len(s)); e > end+1 {
			ns = fraction(s[end+1 : e])
			end = e
		}
	}
	var ts time.Time
	if m := monthOf(s[:monEnd]); m > 0 {
		ts = date(0, m, day, hh, mm, ss, ns, 0)
	}
	return end, ts, true
}

// isoFlags describe what an ISO timestamp looked like.
type isoFlags struct {
	spaceSep bool // date and time separated by a space, not T
	comma    bool // decimal comma before the fraction
	zone     bool // ends with Z or an offset
}

// parseISO reads "YYYY-MM-DD[T ]HH:MM:SS[.,frac][Z|±hh[:]mm]" at the start of s and
// returns its time (zero when a field is out of range) and length (0: not one).
func parseISO(s string) (time.Time, int, isoFlags) {
	var f isoFlags
	if len(s) < 19 || digits(s, 0, 4) != 4 || s[4] != '-' || digits(s, 5, 7) != 7 || s[7] != '-' ||
		digits(s, 8, 10) != 10 || (s[10] != 'T' && s[10] != ' ') {
		return time.Time{}, 0, f
	}
	f.spaceSep = s[10] == ' '
	hh, mm, ss, ok := clockTime(s, 11)
	if !ok {
		return time.Time{}, 0, f
	}
	i := 19
	var ns int
	if i < len(s) && (s[i] == '.' || s[i] == ',') {
		if e := digits(s, i+1, len(s)); e > i+1 {
			f.comma = s[i] == ','
			ns = fraction(s[i+1 : e])
			i = e
		}
	}
	offset := 0
	if i < len(s) {
		switch c := s[i]; {
		case c == 'Z':
			f.zone = true
			i++
		case c == '+' || c == '-':
			// ±hh:mm or ±hhmm
			if digits(s, i+1, i+3) == i+3 {
				j := i + 3
				if j < len(s) && s[j] == ':' {
					j++
				}
				if digits(s, j, j+2) == j+2 {
					offset = (atoi(s[i+1:i+3])*60 + atoi(s[j:j+2])) * 60
					if c == '-' {
						offset = -offset
					}
					f.zone = true
					i = j + 2
				}
			}
		}
	}
	return date(atoi(s[0:4]), atoi(s[5:7]), atoi(s[8:10]), hh, mm, ss, ns, offset), i, f
}

// findISO looks for an ISO date and time in the first bytes of an application
// log's message ("2025-01-01 12:00:00,123 INFO ...", "INFO 2025-01-01T12:00:00Z ...").
func findISO(s string) (time.Time, bool) {
	const window = 48
	for i := 4; i < len(s) && i < window; i++ {
		if s[i] != '-' {
			continue
		}
		if i > 4 && isDigit(s[i-5]) {
			continue
		}
		if ts, n, _ := parseISO(s[i-4:]); n > 0 && !ts.IsZero() {
			return ts, true
		}
	}
	return time.Time{}, false
}

// consoleLevel returns the length of a console level prefix "<4>", or 0.
func consoleLevel(s string) int {
	if len(s) < 3 || s[0] != '<' {
		return 0
	}
	e := digits(s, 1, 4)
	if e == 1 || e >= len(s) || s[e] != '>' {
		return 0
	}
	return e + 1
}

// parseDmesgBracket reads a dmesg time in brackets: monotonic seconds "[  123.456]"
// with an optional caller id "[  T291]", or a ctime date "[Tue Feb 14 18:48:25 2023]"
// (in any language).
func parseDmesgBracket(s string, p *Parsed) (int, bool) {
	if len(s) < 3 || s[0] != '[' {
		return 0, false
	}
	if n, ok := dmesgSeconds(s, p); ok {
		return n, true
	}
	return dmesgCtime(s, p)
}

// maxUptimeDigits bounds the seconds of a dmesg time: ten digits are over 31 years
// of uptime, so "[1641387609.196524]" is a wall-clock epoch time, the one UCX's
// log prints before its own lines, not a kernel line.
const maxUptimeDigits = 9

func dmesgSeconds(s string, p *Parsed) (int, bool) {
	i := skipSpace(s, 1)
	secEnd := digits(s, i, len(s))
	if secEnd == i || secEnd-i > maxUptimeDigits || secEnd >= len(s) || s[secEnd] != '.' {
		return 0, false
	}
	fracEnd := digits(s, secEnd+1, len(s))
	if fracEnd >= len(s) || s[fracEnd] != ']' {
		return 0, false
	}
	end := fracEnd + 1
	if end < len(s) && s[end] == '[' {
		// caller id: [  T291] or [  C3]
		j := skipSpace(s, end+1)
		if j < len(s) && (s[j] == 'T' || s[j] == 'C') {
			if d := digits(s, j+1, len(s)); d > j+1 && d < len(s) && s[d] == ']' {
				end = d + 1
			}
		}
	}
	if p.Clock == ClockNone { // a syslog time before it wins
		if sec, ok := atoi64(s[i:secEnd]); ok {
			p.Clock, p.Uptime = ClockBoot, time.Duration(sec)*time.Second+time.Duration(fraction(s[secEnd+1:fracEnd]))
		}
	}
	if end < len(s) && isSpace(s[end]) {
		end++
	}
	return end, true
}

// dmesgCtime reads "[Tue Feb 14 18:48:25 2023]": up to 12 characters of weekday,
// month and day in any language ("mar. déc.  3"), then the time and the year.
func dmesgCtime(s string, p *Parsed) (int, bool) {
	const maxHead = 12 * utf8.UTFMax
	j := strings.IndexByte(s[:min(len(s), maxHead+16)], ']')
	if j < 0 {
		return 0, false
	}
	c := s[1:j]
	n := len(c)
	if n < 15 || c[n-5] != ' ' || digits(c, n-4, n) != n || c[n-14] != ' ' {
		return 0, false
	}
	if h := utf8.RuneCountInString(c[:n-14]); h < 1 || h > 12 {
		return 0, false
	}
	hh, mm, ss, ok := clockTime(c, n-13)
	if !ok {
		return 0, false
	}
	head := c[:n-14]
	end := j + 1
	if end < len(s) && isSpace(s[end]) {
		end++
	}
	// The last two words of the head are the month and the day.
	fields := strings.Fields(head)
	if len(fields) >= 2 {
		day := fields[len(fields)-1]
		if d := digits(day, 0, 2); d == len(day) && d > 0 {
			if m := monthOf(fields[len(fields)-2]); m > 0 {
				if ts := date(atoi(c[n-4:]), m, atoi(day), hh, mm, ss, 0, 0); !ts.IsZero() {
					p.Clock, p.Time = ClockWall, ts
				}
			}
		}
	}
	return end, true
}

// clockTime reads "HH:MM:SS" at i.
func clockTime(s string, i int) (hh, mm, ss int, ok bool) {
	if len(s) < i+8 || digits(s, i, i+2) != i+2 || s[i+2] != ':' || digits(s, i+3, i+5) != i+5 ||
		s[i+5] != ':' || digits(s, i+6, i+8) != i+8 {
		return 0, 0, 0, false
	}
	return atoi(s[i : i+2]), atoi(s[i+3 : i+5]), atoi(s[i+6 : i+8]), true
}

// date builds a UTC time shifted by offset seconds east, or the zero time when a field
// is out of range. It counts days itself: time.Date is a large share of parsing a
// line otherwise.
func date(y, mon, d, hh, mm, ss, ns, offset int) time.Time {
	if mon < 1 || mon > 12 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60 {
		return time.Time{}
	}
	sec := daysFromCivil(y, mon, d)*86400 + int64(hh*3600+mm*60+ss-offset)
	return time.Unix(sec, int64(ns)).UTC()
}

// daysFromCivil counts the days from 1970-01-01 to a date of the proleptic Gregorian
// calendar (a day past the month's end rolls over, as time.Date does).
func daysFromCivil(y, m, d int) int64 {
	if y == 0 && m >= 1 && m <= 12 {
		return year0Days[m] + int64(d-1)
	}
	return civilDays(y, m, d)
}

// year0Days[m] is the first day of month m of year 0: syslog dates name no year, and
// on every line of a syslog the divisions of civilDays would be a visible cost.
var year0Days = func() (t [13]int64) {
	for m := 1; m <= 12; m++ {
		t[m] = civilDays(0, m, 1)
	}
	return t
}()

func civilDays(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// fraction turns the digits after a decimal point into nanoseconds.
func fraction(s string) int {
	ns := 0
	for i := 0; i < 9; i++ {
		ns *= 10
		if i < len(s) {
			ns += int(s[i] - '0')
		}
	}
	return ns
}

// digits returns the end of the run of ASCII digits starting at i, stopping at max.
func digits(s string, i, max int) int {
	for i < len(s) && i < max && isDigit(s[i]) {
		i++
	}
	return i
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func nonSpaceRun(s string, i int) int {
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	return i
}

func lowerRun(s string, i int) int {
	for i < len(s) && s[i] >= 'a' && s[i] <= 'z' {
		i++
	}
	return i
}

func upperRun(s string, i int) int {
	for i < len(s) && s[i] >= 'A' && s[i] <= 'Z' {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isSpace is regexp's \s: tab, newline, form feed, carriage return and space. A
// table: the prefix's fields are found byte by byte on every line.
func isSpace(c byte) bool { return spaceByte[c] }

var spaceByte = [256]bool{'\t': true, '\n': true, '\f': true, '\r': true, ' ': true}

func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
		if n > 1<<20 {
			return n
		}
	}
	return n
}

// atoi64 parses a run of digits; false when it would overflow.
func atoi64(s string) (int64, bool) {
	var n int64
	for i := 0; i < len(s); i++ {
		if n > (1<<62)/10 {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}
