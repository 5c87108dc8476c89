package main

import (
	"strings"
	"testing"
)

// A Loki URL with credentials is logged without its password.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://tenant:s3cret@loki.example:3100/": "https://tenant:xxxxx@loki.example:3100/",
		"http://loki:3100":                         "http://loki:3100",
		"http://a b@%zz":                           "(unparsable URL)",
	} {
		got := redactURL(in)
		if got != want || strings.Contains(got, "s3cret") {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
