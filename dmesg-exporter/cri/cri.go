// Package cri parses container log files written in the CRI logging format,
// as the kubelet and container runtimes keep them under /var/log/pods.
//
// Each line of such a file is
//
//	<timestamp> <stream> <tags> <message>\n
//
// with an RFC 3339 timestamp (nanosecond precision, e.g.
// 2024-01-02T03:04:05.123456789Z), the stream "stdout" or "stderr", and tags
// separated by ':' of which the first is "P" for a partial line (the runtime
// split a long line; more of it follows) or "F" for the full line or its last
// part. ParseLine decodes one line; Reassembler joins partial lines back into
// whole lines, with a bound on their size; ParsePodLogPath decodes the
// namespace, pod, uid and container (and a rotation suffix) from a log file's path.
package cri

import (
	"bytes"
	"errors"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/parseerr"
)

// Stream is the output stream a line was written to.
type Stream string

// The two streams.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Tags of the first tag field.
const (
	TagPartial = "P"
	TagFull    = "F"
)

// Entry is one decoded CRI log line.
type Entry struct {
	// Time is when the runtime received the line.
	Time time.Time
	// Stream is Stdout or Stderr.
	Stream Stream
	// Partial is true for tag "P": the message continues in the next
	// entry of the same stream.
	Partial bool
	// Tags is the whole tag field, e.g. "F" or "P", or "F:x" should the
	// format grow more tags.
	Tags string
	// Message is the log text, without the line's final newline.
	Message string
}

// Errors wrapped by *ParseError.
var (
	ErrEmpty        = errors.New("empty line")
	ErrMissingField = errors.New("missing field")
	ErrTimestamp    = errors.New("invalid timestamp")
	ErrStream       = errors.New("unknown stream")
	ErrTag          = errors.New("invalid tag")
)

// ParseError describes why a line was rejected. Its Field is "line", "timestamp",
// "stream" or "tags"; its Err is one of the Err* sentinels of this package.
type ParseError = parseerr.Error

func parseErr(field string, off int, val []byte, err error) *ParseError {
	return parseerr.New("cri", field, off, val, err)
}

// ParseLine decodes one CRI log line. A single trailing '\n' is removed;
// any other byte, including '\r' and invalid UTF-8, stays in the message.
// The fields are separated by single spaces; everything after the space that
// ends the tags is the message, spaces included. A line that ends right
// after the tags (no space) has an empty message. The first tag must be "P"
// or "F". The timestamp must be RFC 3339 (time.RFC3339Nano parses it).
//
// ParseLine never panics. On failure it returns a *ParseError and a zero
// Entry.
func ParseLine(line []byte) (Entry, error) {
	var e Entry
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if len(line) == 0 {
		return e, parseErr("line", 0, nil, ErrEmpty)
	}
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 {
		return e, parseErr("line", 0, line, ErrMissingField)
	}
	t, ok := parseTime(line[:sp])
	if !ok {
		return e, parseErr("timestamp", 0, line[:sp], ErrTimestamp)
	}
	off := sp + 1
	rest := line[off:]
	sp = bytes.IndexByte(rest, ' ')
	if sp < 0 {
		return Entry{}, parseErr("line", off, rest, ErrMissingField)
	}
	switch string(rest[:sp]) {
	case string(Stdout):
		e.Stream = Stdout
	case string(Stderr):
		e.Stream = Stderr
	default:
		return Entry{}, parseErr("stream", off, rest[:sp], ErrStream)
	}
	off += sp + 1
	rest = rest[sp+1:]
	tags, msg := rest, []byte(nil)
	if sp = bytes.IndexByte(rest, ' '); sp >= 0 {
		tags, msg = rest[:sp], rest[sp+1:]
	}
	first := tags
	if c := bytes.IndexByte(tags, ':'); c >= 0 {
		first = tags[:c]
	}
	switch {
	case len(first) == 1 && first[0] == 'P':
		e.Partial = true
	case len(first) == 1 && first[0] == 'F':
	default:
		return Entry{}, parseErr("tags", off, tags, ErrTag)
	}
	e.Tags = internTags(tags)
	e.Time = t
	e.Message = string(msg)
	return e, nil
}

func internTags(b []byte) string {
	if len(b) == 1 {
		if b[0] == 'P' {
			return TagPartial
		}
		return TagFull
	}
	return string(b)
}

// parseTime parses an RFC 3339 timestamp. The common runtime form,
// "2006-01-02T15:04:05.999999999Z", is decoded directly; anything else goes
// to time.Parse, so the accepted set and the results are time.Parse's.
func parseTime(b []byte) (time.Time, bool) {
	if t, ok := parseUTC(b); ok {
		return t, true
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	return t, err == nil
}

// parseUTC decodes "YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z" or reports false.
func parseUTC(b []byte) (time.Time, bool) {
	const base = len("2006-01-02T15:04:05")
	if len(b) < base+1 || b[len(b)-1] != 'Z' ||
		b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := digits(b[0:4])
	month, ok2 := digits(b[5:7])
	day, ok3 := digits(b[8:10])
	hour, ok4 := digits(b[11:13])
	minute, ok5 := digits(b[14:16])
	sec, ok6 := digits(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := b[base : len(b)-1]; len(frac) > 0 {
		if len(frac) < 2 || len(frac) > 10 || frac[0] != '.' {
			return time.Time{}, false
		}
		n, ok := digits(frac[1:])
		if !ok {
			return time.Time{}, false
		}
		for i := len(frac) - 1; i < 9; i++ {
			n *= 10
		}
		nsec = n
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
