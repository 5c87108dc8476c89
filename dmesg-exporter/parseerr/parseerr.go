// Package parseerr is the error of the exporter's line parsers (kmsg records, CRI
// log lines): which field of the input was rejected, at which offset, with what
// text, and why. The parsers share it so that a rejected line is reported the same
// way whatever its source.
package parseerr

import "fmt"

// MaxValue bounds Error.Value: the offending text is cut to this many bytes.
const MaxValue = 64

// Error describes why a parser rejected its input.
type Error struct {
	// Format names the parser ("kmsg", "cri"); it prefixes the message.
	Format string
	// Field names the part of the input at fault; the parser documents its names.
	Field string
	// Offset is the byte offset of the offending part within the input.
	Offset int
	// Value is the offending text, cut to at most MaxValue bytes.
	Value string
	// Err is one of the parser's sentinel errors.
	Err error
}

func (e *Error) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s at offset %d: %v", e.Format, e.Field, e.Offset, e.Err)
	}
	return fmt.Sprintf("%s: %s at offset %d: %v: %q", e.Format, e.Field, e.Offset, e.Err, e.Value)
}

func (e *Error) Unwrap() error { return e.Err }

// New returns the Error of format for field at byte offset off, keeping at most
// MaxValue bytes of val.
func New(format, field string, off int, val []byte, err error) *Error {
	if len(val) > MaxValue {
		val = val[:MaxValue]
	}
	return &Error{Format: format, Field: field, Offset: off, Value: string(val), Err: err}
}
