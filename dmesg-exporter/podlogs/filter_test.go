package podlogs

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestNewRejectsBadFilters(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"include", Config{IncludeNamespaces: []string{"ok", "("}}, "include namespace"},
		{"exclude", Config{ExcludeNamespaces: []string{"[a-"}}, "exclude namespace"},
		{"pod", Config{PodName: "*x"}, "pod name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestDiscoveryFilters(t *testing.T) {
	root := t.TempDir()
	type file struct{ ns, pod, container, name string }
	files := []file{
		{"train", "llama-train-0", "main", "0.log"},
		{"train", "llama-train-0", "main", "1.log"}, // container restarted
		{"train", "llama-train-0", "sidecar", "0.log"},
		{"train", "web-1", "main", "0.log"},
		{"kube-system", "coredns-1", "coredns", "0.log"},
		{"default", "llama-train-1", "main", "0.log"},
	}
	for _, f := range files {
		l := newLogFile(t, containerDir(root, f.ns, f.pod, "uid-1", f.container), f.name)
		l.full(f.ns + "/" + f.pod + "/" + f.container + "/" + f.name)
	}
	// Never tailed: rotated and compressed files, things that are not pod
	// log files.
	main := containerDir(root, "train", "llama-train-0", "uid-1", "main")
	for name, content := range map[string]string{
		filepath.Join(main, "0.log.20240101-000000"):                "2024-01-01T00:00:00Z stdout F rotated\n",
		filepath.Join(main, "0.log.20231231-000000.gz"):             "not gzip, not read\n",
		filepath.Join(main, "notes.txt"):                            "2024-01-01T00:00:00Z stdout F txt\n",
		filepath.Join(root, "no-underscores", "c", "0.log"):         "2024-01-01T00:00:00Z stdout F junk1\n",
		filepath.Join(root, "ns_only-two", "c", "0.log"):            "2024-01-01T00:00:00Z stdout F junk2\n",
		filepath.Join(root, "BAD_pod_uid-1", "c", "0.log"):          "2024-01-01T00:00:00Z stdout F junk3\n",
		filepath.Join(root, "top.log"):                              "2024-01-01T00:00:00Z stdout F junk4\n",
		filepath.Join(root, "ns_pod_uid-2", "c", "deeper", "0.log"): "2024-01-01T00:00:00Z stdout F junk5\n",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	all := []string{
		"default/llama-train-1/main/0.log",
		"kube-system/coredns-1/coredns/0.log",
		"train/llama-train-0/main/0.log",
		"train/llama-train-0/main/1.log",
		"train/llama-train-0/sidecar/0.log",
		"train/web-1/main/0.log",
	}
	tests := []struct {
		name string
		cfg  func(*Config)
		want []string
	}{
		{"no filters", func(*Config) {}, all},
		{"include namespace", func(c *Config) { c.IncludeNamespaces = []string{"train"} }, []string{
			"train/llama-train-0/main/0.log", "train/llama-train-0/main/1.log", "train/llama-train-0/sidecar/0.log", "train/web-1/main/0.log",
		}},
		{"include is anchored", func(c *Config) { c.IncludeNamespaces = []string{"trai"} }, nil},
		{"exclude namespace", func(c *Config) { c.ExcludeNamespaces = []string{"kube-.*"} }, []string{
			"default/llama-train-1/main/0.log", "train/llama-train-0/main/0.log", "train/llama-train-0/main/1.log",
			"train/llama-train-0/sidecar/0.log", "train/web-1/main/0.log",
		}},
		{"exclude wins over include", func(c *Config) {
			c.IncludeNamespaces = []string{"train", "default"}
			c.ExcludeNamespaces = []string{"default"}
		}, []string{
			"train/llama-train-0/main/0.log", "train/llama-train-0/main/1.log", "train/llama-train-0/sidecar/0.log", "train/web-1/main/0.log",
		}},
		{"pod name", func(c *Config) { c.PodName = "llama-train-.*" }, []string{
			"default/llama-train-1/main/0.log", "train/llama-train-0/main/0.log", "train/llama-train-0/main/1.log", "train/llama-train-0/sidecar/0.log",
		}},
		{"namespace and pod name", func(c *Config) {
			c.IncludeNamespaces = []string{"train"}
			c.PodName = "llama-.*"
		}, []string{"train/llama-train-0/main/0.log", "train/llama-train-0/main/1.log", "train/llama-train-0/sidecar/0.log"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(root)
			tc.cfg(&cfg)
			h := startTailer(t, cfg)
			if len(tc.want) > 0 {
				h.waitN(len(tc.want))
			}
			h.settle()
			got := messages(h.entries())
			sort.Strings(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
			if st := h.tl.Stats(); st.Files != int64(len(tc.want)) || st.FilesOpen != int64(len(tc.want)) {
				t.Fatalf("stats = %+v, want %d files", st, len(tc.want))
			}
		})
	}
}
