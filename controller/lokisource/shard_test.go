package lokisource

import "testing"

func TestWithMatcher(t *testing.T) {
	got, err := DefaultSelectors().WithMatcher(`node=~"gpu-a-.*"`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{source="kernel", node=~"gpu-a-.*"}`; got["kernel"] != want {
		t.Errorf("kernel selector %q, want %q", got["kernel"], want)
	}
	if len(got) != len(DefaultSelectors()) {
		t.Errorf("%d selectors, want %d", len(got), len(DefaultSelectors()))
	}
	got, err = DefaultSelectors().WithMatcher(` | node=~"gpu-a-.*"`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{source="kernel"} | node=~"gpu-a-.*"`; got["kernel"] != want {
		t.Errorf("kernel selector with a label filter %q, want %q", got["kernel"], want)
	}
	for _, bad := range []string{"", `node=~gpu-a`, `node="a"} or {x="y"`, `{node="a"}`, `|`, `| node="a" | x="y"`, `|| node="a"`} {
		if _, err := DefaultSelectors().WithMatcher(bad); err == nil {
			t.Errorf("matcher %q accepted", bad)
		}
	}
	if _, err := (Selectors{"kernel": `source="kernel"`}).WithMatcher(`node="a"`); err == nil {
		t.Error("a selector without braces accepted")
	}
}
