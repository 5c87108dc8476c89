// Package printf instantiates C printf format strings — as printk, the NVIDIA driver,
// NCCL and UCX use them — with generated values, so a rule can be tested against
// every line a format string can print rather than the few lines someone saw.
package printf

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxFormat bounds the format strings accepted, so a broken inventory cannot make
// the generator allocate without limit.
const MaxFormat = 4096

// Conv is one conversion of a format string.
type Conv struct {
	Spec  string // the whole conversion as written, "%04x"
	Verb  byte   // d, i, u, x, X, o, c, s, p, f, e, g, a
	Ext   string // kernel %p extension: "I4", "M", "pS", ...; empty otherwise
	Flags string
	Width int // -1 when not given; -2 when '*'
	Prec  int // -1 when not given; -2 when '*'
	Len   string
	Start int // byte offsets in the format
	End   int
}

// Parse lists the conversions of a format string (%% is not one).
func Parse(format string) ([]Conv, error) {
	if len(format) > MaxFormat {
		return nil, fmt.Errorf("format string of %d bytes is over the limit of %d", len(format), MaxFormat)
	}
	var out []Conv
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		start := i
		i++
		if i < len(format) && format[i] == '%' {
			continue
		}
		c := Conv{Start: start, Width: -1, Prec: -1}
		for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
			c.Flags += string(format[i])
			i++
		}
		c.Width, i = number(format, i)
		if i < len(format) && format[i] == '.' {
			i++
			c.Prec, i = number(format, i)
			if c.Prec == -1 {
				c.Prec = 0
			}
		}
		for i < len(format) && strings.IndexByte("hlLqjzt", format[i]) >= 0 {
			c.Len += string(format[i])
			i++
		}
		if i >= len(format) {
			return nil, fmt.Errorf("format %q: conversion at byte %d has no verb", format, start)
		}
		c.Verb = format[i]
		if strings.IndexByte("diuxXocspfFeEgGaAnm", c.Verb) < 0 {
			return nil, fmt.Errorf("format %q: unknown conversion %q at byte %d", format, format[start:i+1], start)
		}
		if c.Verb == 'p' {
			c.Ext = pointerExt(format[i+1:])
			i += len(c.Ext)
		}
		c.End = i + 1
		c.Spec = format[start:c.End]
		out = append(out, c)
	}
	return out, nil
}

func number(s string, i int) (int, int) {
	if i < len(s) && s[i] == '*' {
		return -2, i + 1
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i {
		return -1, i
	}
	n, _ := strconv.Atoi(s[i:j])
	return n, j
}

// pointerExts are the kernel's %p extensions (Documentation/core-api/printk-formats),
// longest first so that "I6c" wins over "I6".
var pointerExts = []string{
	"I6c", "i6c", "MR", "mR", "Mr", "Mf", "ISpc", "ISc", "IS", "I4", "I6", "i4", "i6",
	"Ub", "UB", "Ul", "UL", "GPp", "Gp", "Gg", "Gv", "pap", "ap", "ad", "hC", "hD", "hN",
	"hn", "h", "SR", "Sb", "M", "m", "R", "r", "S", "s", "F", "f", "B", "K", "a", "V", "g",
	"e", "D", "d", "E", "x", "U", "b", "C", "N", "t",
}

func pointerExt(rest string) string {
	for _, e := range pointerExts {
		if strings.HasPrefix(rest, e) {
			// An extension is a whole word: "%ps:" is %pS-like, "%pfoo" is %p then "foo".
			after := rest[len(e):]
			if after != "" && isAlnum(after[0]) && e != "b" && e != "hC" {
				continue
			}
			return e
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Words are the realistic values a %s takes, in turn: device names, driver words,
// status strings and phrases with spaces (a rule must not assume one word).
var Words = []string{
	"mlx5_0", "timeout", "nvme0n1", "Resource temporarily unavailable", "eth2",
	"0000:3b:00.0", "GSP", "Input/output error", "ib0", "sda1",
}

// Instance is one instantiation of a format string.
type Instance struct {
	Text   string
	Values []string // the text each conversion printed, in order
}

// Instantiate fills every conversion with a generated value of its type and width.
// Variant picks among value sets (small and large numbers, other words), so tests
// can run a format more than once. Fixed gives the value of conversion n (1-based)
// as written, for conversions whose value the meaning depends on (an Xid code).
func Instantiate(format string, variant int, fixed map[int]string) (Instance, error) {
	convs, err := Parse(format)
	if err != nil {
		return Instance{}, err
	}
	var b strings.Builder
	var in Instance
	last := 0
	for n, c := range convs {
		b.WriteString(unescapePercent(format[last:c.Start]))
		v, ok := fixed[n+1]
		if !ok {
			v = value(c, variant, n)
		}
		in.Values = append(in.Values, v)
		b.WriteString(v)
		last = c.End
	}
	b.WriteString(unescapePercent(format[last:]))
	in.Text = b.String()
	return in, nil
}

func unescapePercent(s string) string { return strings.ReplaceAll(s, "%%", "%") }

// value generates the text of one conversion.
func value(c Conv, variant, n int) string {
	big := variant%2 == 1
	var s string
	switch c.Verb {
	case 'd', 'i':
		s = pick(big, "3", "-110")
		if c.Len == "" && !big {
			s = strconv.Itoa(3 + n)
		}
	case 'u':
		s = pick(big, "7", "4294967295")
	case 'x':
		s = pick(big, "1f", "deadbeef")
		if strings.Contains(c.Len, "ll") || c.Len == "l" || c.Len == "j" || c.Len == "z" {
			s = pick(big, "1f", "7fffdeadbeef")
		}
	case 'X':
		s = pick(big, "1F", "DEADBEEF")
	}
	if (c.Verb == 'x' || c.Verb == 'X') && big && c.Width > 0 && c.Width < len(s) {
		// A zero-padded width says how wide the value is (a PCI bus is %02x).
		s = s[len(s)-c.Width:]
	}
	switch c.Verb {
	case 'o':
		s = pick(big, "17", "777")
	case 'c':
		s = pick(big, "A", "z")
	case 's':
		s = Words[(variant*3+n)%len(Words)]
		if c.Prec >= 0 && len(s) > c.Prec {
			s = s[:c.Prec]
		}
	case 'f', 'F':
		s = pick(big, "1.500000", "12345.678900")
	case 'e', 'E':
		s = pick(big, "1.500000e+00", "1.234568e+04")
	case 'g', 'G':
		s = pick(big, "1.5", "12345.7")
	case 'a', 'A':
		s = "0x1.8p+0"
	case 'n':
		s = ""
	case 'm': // glibc: strerror(errno), no argument
		s = pick(big, "No such device", "Connection timed out")
	case 'p':
		if hex, ok := hexBuffer(c, big); ok {
			return hex
		}
		return pointer(c.Ext, big)
	}
	if strings.Contains(c.Flags, "#") && (c.Verb == 'x' || c.Verb == 'X') {
		s = "0x" + s
	}
	return pad(s, c)
}

func pick(big bool, small, large string) string {
	if big {
		return large
	}
	return small
}

func pad(s string, c Conv) string {
	w := c.Width
	if w == -2 {
		w = 8 // a width taken from an argument: the kernel passes small ones
	}
	if w <= len(s) {
		return s
	}
	fill := strings.Repeat(" ", w-len(s))
	switch {
	case strings.Contains(c.Flags, "-"):
		return s + fill
	case strings.Contains(c.Flags, "0") && c.Verb != 's' && c.Verb != 'c':
		if rest, ok := strings.CutPrefix(s, "0x"); ok { // %#06x: the 0x counts in the width
			return "0x" + strings.Repeat("0", w-len(s)) + rest
		}
		neg := strings.HasPrefix(s, "-")
		if neg {
			s = s[1:]
		}
		z := strings.Repeat("0", w-len(s)-boolInt(neg))
		if neg {
			return "-" + z + s
		}
		return z + s
	}
	return fill + s
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pointer renders a %p conversion with its kernel extension.
func pointer(ext string, big bool) string {
	switch ext {
	case "I4", "i4":
		return pick(big, "192.168.1.10", "10.0.255.254")
	case "I6", "i6", "I6c", "i6c", "IS", "ISc", "ISpc":
		return pick(big, "fe80::1", "2001:db8::8a2e:370:7334")
	case "M", "MR", "m", "mR", "Mr", "Mf":
		return pick(big, "b8:59:9f:aa:bb:cc", "0c:42:a1:00:00:01")
	case "R", "r":
		return "[mem 0xfe000000-0xfe0fffff 64bit]"
	case "S", "s", "F", "f", "B", "SR", "Sb":
		return pick(big, "mlx5_cmd_exec+0x2c/0x50 [mlx5_core]", "nvme_timeout+0x1a0/0x3c0 [nvme]")
	case "a", "ap", "pap", "ad":
		return "0x00000000fe000000"
	case "V":
		return pick(big, "formatted message", "mlx5_0: command failed")
	case "U", "Ub", "UB", "Ul", "UL":
		return "3f2504e0-4f89-11d3-9a0c-0305e82c3301"
	case "g":
		return pick(big, "nvme0n1", "sda")
	case "e":
		return pick(big, "-EIO", "-ETIMEDOUT")
	case "D", "d":
		return "data.bin"
	case "x": // the raw address, as %lx would print it
		return pick(big, "00007f3a1c2b4d10", "ffff8881f2b4c000")
	case "E", "hn", "b", "C", "N", "t", "Gp", "GPp", "Gg", "Gv":
		return "0x1f"
	}
	return pick(big, "00000000a1b2c3d4", "ffff8881f2b4c000")
}

// hexBuffer prints a %*ph buffer as the kernel does: the field width is the number
// of bytes (one when not given, eight when passed as an argument), each as two hex
// digits, separated by spaces (%ph), colons (%phC), dashes (%phD) or nothing (%phN).
func hexBuffer(c Conv, big bool) (string, bool) {
	sep, ok := map[string]string{"h": " ", "hC": ":", "hD": "-", "hN": ""}[c.Ext]
	if !ok {
		return "", false
	}
	n := c.Width
	switch {
	case n == -2:
		n = 8
	case n <= 0:
		n = 1
	case n > 64: // the kernel prints at most 64 bytes
		n = 64
	}
	parts := make([]string, n)
	for i := range parts {
		b := i * 0x11
		if big {
			b = 0xff - i*0x07
		}
		parts[i] = fmt.Sprintf("%02x", b&0xff)
	}
	return strings.Join(parts, sep), true
}

// Expand replaces $1..$N in tmpl by the values of an instance (captures to check).
func Expand(tmpl string, values []string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '$' || i+1 >= len(tmpl) || tmpl[i+1] < '1' || tmpl[i+1] > '9' {
			b.WriteByte(tmpl[i])
			continue
		}
		j := i + 1
		for j < len(tmpl) && tmpl[j] >= '0' && tmpl[j] <= '9' {
			j++
		}
		n, _ := strconv.Atoi(tmpl[i+1 : j])
		if n > len(values) {
			return "", fmt.Errorf("template %q: $%d but the format has %d conversions", tmpl, n, len(values))
		}
		b.WriteString(values[n-1])
		i = j - 1
	}
	return b.String(), nil
}
