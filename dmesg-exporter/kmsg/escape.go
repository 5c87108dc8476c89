package kmsg

import (
	"bytes"
)

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
