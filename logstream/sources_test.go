package logstream

import "testing"

func TestSources(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Sources() {
		if s.Name == "" || seen[s.Name] {
			t.Errorf("source %q: empty or listed twice", s.Name)
		}
		seen[s.Name] = true
		if want := `{source="` + s.Name + `"}`; s.Selector != want {
			t.Errorf("%s: default selector %s, want %s", s.Name, s.Selector, want)
		}
		if s.Description == "" {
			t.Errorf("%s: no description", s.Name)
		}
		if !IsSource(s.Name) {
			t.Errorf("IsSource(%q) = false", s.Name)
		}
	}
	if IsSource("") || IsSource("any") {
		t.Error("IsSource accepts a name that is no source")
	}
	if got, want := SourceList(), "kernel, pod, nvml or probe"; got != want {
		t.Errorf("SourceList() = %q, want %q", got, want)
	}
	for name, lane := range map[string]Lane{SourceKernel: SourceKernel, SourcePod: SourcePod, SourceNVML: LaneNone, SourceProbe: LaneNone} {
		if s, _ := LookupSource(name); s.Lane != lane {
			t.Errorf("%s ships on lane %q, want %q", name, s.Lane, lane)
		}
	}
}
