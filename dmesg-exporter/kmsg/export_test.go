package kmsg

// What only the tests read: the reader's counters and helpers over records, a
// reader over any io.Reader, and the writing of records in the /dev/kmsg format
// that parsing is checked against.

import (
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Stats are a reader's running counters.
type Stats struct {
	Records     uint64 // records delivered by Next
	Malformed   uint64 // inputs rejected by Parse or over MaxRecordSize
	Lost        uint64 // records missing from sequence gaps (incl. overruns)
	Gaps        uint64 // number of gaps
	Overruns    uint64 // EPIPE returns from the device
	Regressions uint64 // records whose seq was not above the previous one
	Skipped     uint64 // records skipped because of SeekAfter
	Merged      uint64 // continuation fragments folded into another record
}

// Stats returns a snapshot of the reader's counters.
func (r *Reader) Stats() Stats {
	return Stats{
		Records:     r.stats.records.Load(),
		Malformed:   r.stats.malformed.Load(),
		Lost:        r.stats.lost.Load(),
		Gaps:        r.stats.gaps.Load(),
		Overruns:    r.stats.overruns.Load(),
		Regressions: r.stats.regressions.Load(),
		Skipped:     r.stats.skipped.Load(),
		Merged:      r.stats.merged.Load(),
	}
}

// Unescape decodes \xHH escapes (either case of hex digits). A backslash
// that does not start a complete escape is kept as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return string(appendUnescaped(make([]byte, 0, len(s)), []byte(s)))
}

// IsContinuation reports whether the record is a fragment of a continuation
// line (flags 'c' or '+').
func (r *Record) IsContinuation() bool {
	return r.Flags == FlagsCont || r.Flags == FlagsFollows
}

// WallTime converts the record's printk timestamp to wall-clock time given
// the boot time (see BootTime).
func (r *Record) WallTime(boot time.Time) time.Time { return boot.Add(r.Monotonic) }

// NewReader reads records from src. With FramingAuto, src is read as
// FramingRecord if it is an *os.File on a character device, otherwise as
// FramingStream. If src has a SetReadDeadline method that works (an
// *os.File on a pipe, a net.Conn), reads are interrupted when the context
// passed to Next is done; otherwise Next only notices cancellation between
// reads. Close closes src if it is an io.Closer.
func NewReader(src io.Reader, opts Options) *Reader {
	if opts.Framing == FramingAuto {
		opts.Framing = FramingStream
		if f, ok := src.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				opts.Framing = FramingRecord
			}
		}
	}
	r := newReader(src, opts)
	if f, ok := src.(*os.File); ok {
		r.file = f
	}
	if c, ok := src.(io.Closer); ok {
		r.closer = c
	}
	if d, ok := src.(deadliner); ok && d.SetReadDeadline(time.Time{}) == nil {
		r.dl = d
	}
	return r
}

// BootTime returns the boot time the reader uses for Record.Time (zero if
// unknown).
func (r *Reader) BootTime() time.Time { return r.boot }

// ParseLevel accepts a level name as printed by dmesg ("err", "warn", ...),
// the common long spellings ("error", "warning", "emergency", "critical",
// "panic") or a digit 0-7.
func ParseLevel(s string) (Level, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for i, n := range levelNames {
		if s == n {
			return Level(i), nil
		}
	}
	switch s {
	case "emergency", "panic":
		return LevelEmerg, nil
	case "critical":
		return LevelCrit, nil
	case "error":
		return LevelErr, nil
	case "warning":
		return LevelWarn, nil
	}
	if len(s) == 1 && s[0] >= '0' && s[0] <= '7' {
		return Level(s[0] - '0'), nil
	}
	return 0, parseErr("level", 0, []byte(s), ErrSyntax)
}

// ParseFacility accepts a facility name as printed by dmesg or a number.
func ParseFacility(s string) (Facility, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for i, n := range facilityNames {
		if s == n {
			return Facility(i), nil
		}
	}
	if n, err := strconv.ParseUint(s, 10, 8); err == nil {
		return Facility(n), nil
	}
	return 0, parseErr("facility", 0, []byte(s), ErrSyntax)
}

// Priority returns the raw faclev value, Facility<<3 | Level, which is what
// dmesg --json prints as "pri".
func (r *Record) Priority() int { return int(r.Facility)<<3 | int(r.Level) }

// Lookup returns the value of the first dictionary entry with the given key.
func (r *Record) Lookup(key string) (string, bool) {
	for _, e := range r.Dict {
		if e.Key == key {
			return e.Value, true
		}
	}
	return "", false
}

// AppendFormat appends the record to dst in /dev/kmsg format: the header
// line, the escaped message, a newline, and one " KEY=value\n" line per
// dictionary entry. Bytes below 0x20, from 0x7f up, and the backslash are
// escaped as \xHH like the kernel does; '=' is escaped in dictionary keys as
// well, so that Parse returns an equal record. Monotonic is truncated to
// microseconds. Flags, Caller and Fields are written as they are: they must
// not contain ',', ';' or a newline, and Flags must not be empty.
func (r *Record) AppendFormat(dst []byte) []byte {
	dst = strconv.AppendUint(dst, uint64(r.Priority()), 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, r.Seq, 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, uint64(r.Monotonic/time.Microsecond), 10)
	dst = append(dst, ',')
	dst = append(dst, r.Flags...)
	if r.Caller != "" {
		dst = append(dst, ",caller="...)
		dst = append(dst, r.Caller...)
	}
	for _, f := range r.Fields {
		dst = append(dst, ',')
		dst = append(dst, f...)
	}
	dst = append(dst, ';')
	dst = AppendEscaped(dst, r.Message)
	dst = append(dst, '\n')
	for _, e := range r.Dict {
		dst = append(dst, ' ')
		dst = appendEscapedKey(dst, e.Key)
		dst = append(dst, '=')
		dst = AppendEscaped(dst, e.Value)
		dst = append(dst, '\n')
	}
	return dst
}

// needsEscape reports whether the kernel escapes c in /dev/kmsg output.
func needsEscape(c byte) bool { return c < ' ' || c >= 0x7f || c == '\\' }

// Escape returns s with every byte below 0x20, from 0x7f up, and the
// backslash written as \xHH, the way the kernel writes message text and
// dictionary values to /dev/kmsg.
func Escape(s string) string {
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			return string(AppendEscaped(make([]byte, 0, len(s)+16), s))
		}
	}
	return s
}

// AppendEscaped appends s to dst escaped as Escape does.
func AppendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// appendEscapedKey escapes like AppendEscaped and also escapes '=', which
// would otherwise end the key.
func appendEscapedKey(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) || c == '=' {
			dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"
