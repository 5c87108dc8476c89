package parseerr

import (
	"errors"
	"strings"
	"testing"
)

func TestNewCutsValueAndWraps(t *testing.T) {
	sentinel := errors.New("invalid syntax")
	e := New("kmsg", "seq", 7, []byte(strings.Repeat("x", 100)), sentinel)
	if len(e.Value) != MaxValue {
		t.Fatalf("Value is %d bytes, want %d", len(e.Value), MaxValue)
	}
	if !errors.Is(e, sentinel) {
		t.Fatalf("errors.Is(%v, sentinel) = false", e)
	}
	want := `kmsg: seq at offset 7: invalid syntax: "` + strings.Repeat("x", MaxValue) + `"`
	if e.Error() != want {
		t.Fatalf("Error() = %q, want %q", e.Error(), want)
	}
	if got := New("cri", "line", 0, nil, sentinel).Error(); got != "cri: line at offset 0: invalid syntax" {
		t.Fatalf("Error() without value = %q", got)
	}
}
