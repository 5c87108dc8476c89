package act

import (
	"testing"
)

func TestParseTaint(t *testing.T) {
	for _, tc := range []struct {
		in, key, value, effect string
		ok                     bool
	}{
		{"faultline.io/faulty=xid-79:NoSchedule", "faultline.io/faulty", "xid-79", "NoSchedule", true},
		{"faultline.io/faulty=:NoExecute", "faultline.io/faulty", "", "NoExecute", true},
		{"nokey", "", "", "", false},
		{"=v:NoSchedule", "", "", "", false},
	} {
		got, ok := parseTaint(tc.in)
		if ok != tc.ok || (ok && (got.Key != tc.key || got.Value != tc.value || string(got.Effect) != tc.effect)) {
			t.Errorf("parseTaint(%q) = %+v, %v", tc.in, got, ok)
		}
		if ok && taintString(got) != tc.in {
			t.Errorf("taintString(parseTaint(%q)) = %q", tc.in, taintString(got))
		}
	}
}
