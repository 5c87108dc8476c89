package kmsg

import (
	"bytes"
)

const hexDigits = "0123456789abcdef"

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

func unescape(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	return string(appendUnescaped(make([]byte, 0, len(b)), b))
}

func appendUnescaped(dst, b []byte) []byte {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\\')
		if i < 0 {
			return append(dst, b...)
		}
		dst = append(dst, b[:i]...)
		b = b[i:]
		if len(b) >= 4 && b[1] == 'x' {
			hi, ok1 := unhex(b[2])
			lo, ok2 := unhex(b[3])
			if ok1 && ok2 {
				dst = append(dst, hi<<4|lo)
				b = b[4:]
				continue
			}
		}
		dst = append(dst, '\\')
		b = b[1:]
	}
	return dst
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
