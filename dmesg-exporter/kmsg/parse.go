package kmsg

import (
	"bytes"
	"errors"
	"math"
	"time"

	"github.com/faultline-dev/faultline/dmesg-exporter/parseerr"
)

// Errors wrapped by *ParseError. Use errors.Is to tell them apart.
var (
	// ErrEmpty: the record has no bytes.
	ErrEmpty = errors.New("empty record")
	// ErrNoSeparator: the first line has no ';' between header and message.
	ErrNoSeparator = errors.New("no ';' between header and message")
	// ErrMissingField: the header has fewer than the four fields
	// faclev,seq,usec,flags.
	ErrMissingField = errors.New("missing header field")
	// ErrSyntax: a header field is not what it should be (a number is not
	// plain decimal digits, the flags field is empty, ...).
	ErrSyntax = errors.New("invalid syntax")
	// ErrRange: a number is too large for its field.
	ErrRange = errors.New("value out of range")
	// ErrDict: a dictionary line is not " KEY=value".
	ErrDict = errors.New("malformed dictionary line")
	// ErrTooLong: a record exceeds the reader's size limit.
	ErrTooLong = errors.New("record too long")
	// ErrOrphanDict: a dictionary line without a record before it (stream
	// input only).
	ErrOrphanDict = errors.New("dictionary line without a record")
)

// ParseError describes why a record was rejected. Its Field names the part of the
// record at fault: "record", "header", "faclev", "seq", "usec", "flags", "caller" or
// "dict" (or "level" and "facility" for ParseLevel and ParseFacility); its Err is one
// of the Err* sentinels of this package.
type ParseError = parseerr.Error

func parseErr(field string, off int, val []byte, err error) *ParseError {
	return parseerr.New("kmsg", field, off, val, err)
}

// maxFaclev is the largest faclev the kernel can store: 8 bits of facility
// and 3 bits of level.
const maxFaclev = 255<<3 | 7

// maxUsec keeps usec*1000 within a time.Duration.
const maxUsec = uint64(math.MaxInt64 / int64(time.Microsecond))

// Parse decodes one /dev/kmsg record: what a single read() of the device
// returns, with or without its final newline.
//
// The header is the text before the first ';' and must lie on the first
// line; it needs at least faclev, seq, usec and flags, with faclev, seq and
// usec in plain decimal. A "caller=" field sets Caller; other extra fields
// are kept in Fields. The message runs to the end of the first line. Lines
// that follow and begin with a space are dictionary entries KEY=value; the
// first line that does not begin with a space ends the record, and it and
// anything after it are ignored (the kernel never produces such lines; dmesg
// and journald ignore them too). A \ that does not start a valid \xHH escape
// is kept as it is.
//
// Parse never panics. On failure it returns a *ParseError wrapping one of the
// Err* sentinels and a zero Record.
func Parse(b []byte) (Record, error) {
	var r Record
	if len(b) == 0 {
		return r, parseErr("record", 0, nil, ErrEmpty)
	}

	// The header ends at the first ';', which must come before the first
	// newline.
	semi := -1
	for i, c := range b {
		if c == ';' {
			semi = i
			break
		}
		if c == '\n' {
			break
		}
	}
	if semi < 0 {
		end := bytes.IndexByte(b, '\n')
		if end < 0 {
			end = len(b)
		}
		return Record{}, parseErr("header", 0, b[:end], ErrNoSeparator)
	}
	if err := parseHeader(&r, b[:semi]); err != nil {
		return Record{}, err
	}

	// Message: to the end of the first line.
	rest := b[semi+1:]
	nl := bytes.IndexByte(rest, '\n')
	var msg []byte
	if nl < 0 {
		msg, rest = rest, nil
	} else {
		msg, rest = rest[:nl], rest[nl+1:]
	}
	r.Message = unescape(msg)

	// Dictionary lines.
	off := len(b) - len(rest)
	for len(rest) > 0 && rest[0] == ' ' {
		line := rest[1:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, rest = line[:i], line[i+1:]
		} else {
			rest = nil
		}
		eq := bytes.IndexByte(line, '=')
		if eq <= 0 {
			return Record{}, parseErr("dict", off, line, ErrDict)
		}
		if r.Dict == nil {
			r.Dict = make([]DictEntry, 0, 2)
		}
		r.Dict = append(r.Dict, DictEntry{Key: unescape(line[:eq]), Value: unescape(line[eq+1:])})
		off = len(b) - len(rest)
	}
	return r, nil
}

func parseHeader(r *Record, h []byte) error {
	var fields [4][]byte
	var offs [4]int
	rest, off := h, 0
	for i := 0; i < 3; i++ {
		c := bytes.IndexByte(rest, ',')
		if c < 0 {
			return parseErr("header", 0, h, ErrMissingField)
		}
		fields[i], offs[i] = rest[:c], off
		rest, off = rest[c+1:], off+c+1
	}
	// flags, then optional extra fields.
	extra := []byte(nil)
	if c := bytes.IndexByte(rest, ','); c >= 0 {
		fields[3], extra = rest[:c], rest[c+1:]
	} else {
		fields[3] = rest
	}
	offs[3] = off

	faclev, err := parseUint(fields[0], maxFaclev)
	if err != nil {
		return parseErr("faclev", offs[0], fields[0], err)
	}
	r.Level = Level(faclev & 7)
	r.Facility = Facility(faclev >> 3)
	if r.Seq, err = parseUint(fields[1], math.MaxUint64); err != nil {
		return parseErr("seq", offs[1], fields[1], err)
	}
	r.LastSeq = r.Seq
	usec, err := parseUint(fields[2], maxUsec)
	if err != nil {
		return parseErr("usec", offs[2], fields[2], err)
	}
	r.Monotonic = time.Duration(usec) * time.Microsecond
	if len(fields[3]) == 0 {
		return parseErr("flags", offs[3], nil, ErrSyntax)
	}
	r.Flags = internFlags(fields[3])

	if extra == nil {
		return nil
	}
	off = offs[3] + len(fields[3]) + 1
	for {
		f := extra
		c := bytes.IndexByte(extra, ',')
		if c >= 0 {
			f, extra = extra[:c], extra[c+1:]
		}
		if r.Caller == "" && bytes.HasPrefix(f, []byte("caller=")) {
			if len(f) == len("caller=") {
				return parseErr("caller", off, f, ErrSyntax)
			}
			r.Caller = string(f[len("caller="):])
		} else {
			r.Fields = append(r.Fields, string(f))
		}
		if c < 0 {
			return nil
		}
		off += c + 1
	}
}

func internFlags(b []byte) string {
	if len(b) == 1 {
		switch b[0] {
		case '-':
			return FlagsNone
		case 'c':
			return FlagsCont
		case '+':
			return FlagsFollows
		}
	}
	return string(b)
}

// parseUint parses plain decimal digits (no sign, no spaces) up to max.
func parseUint(b []byte, max uint64) (uint64, error) {
	if len(b) == 0 {
		return 0, ErrSyntax
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, ErrSyntax
		}
		d := uint64(c - '0')
		if n > (max-d)/10 {
			// Keep scanning so that a non-digit is reported as syntax.
			for _, c := range b {
				if c < '0' || c > '9' {
					return 0, ErrSyntax
				}
			}
			return 0, ErrRange
		}
		n = n*10 + d
	}
	return n, nil
}
