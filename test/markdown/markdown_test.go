package markdown

import (
	"slices"
	"testing"
)

func TestCommands(t *testing.T) {
	md := []byte("text `faultline untaint X` outside a block\n" +
		"```sh\n" +
		"kubectl -n faultline port-forward svc/faultline-controller 9401 &\n" +
		"bin/faultline scan --packs 'a b/' kern.log   # a comment --not-a-flag\n" +
		"faultline replay --packs ./candidate \\\n" +
		"  --since 720h && faultline rules lint x/; echo done\n" +
		"faultline scan --node \"$(hostname)\" $LOG || exit 1\n" +
		"```\n" +
		"```console\n" +
		"$ faultline untaint gpu-3 -o yaml\n" +
		"faultline output, not a command\n" +
		"```\n")
	var got []string
	for _, c := range Commands("x.md", md, "faultline") {
		got = append(got, c.String())
	}
	want := []string{
		"bin/faultline scan --packs a b/ kern.log",
		"faultline replay --packs ./candidate --since 720h",
		"faultline rules lint x/",
		"faultline scan --node $(hostname) $LOG",
		"faultline untaint gpu-3 -o yaml",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Commands:\n%q\nwant\n%q", got, want)
	}
	if c := Commands("x.md", md, "faultline")[1]; c.Line != 5 {
		t.Errorf("a continued line starts at line %d, want 5", c.Line)
	}
}

func TestLinks(t *testing.T) {
	md := []byte("[a](docs/a.md#x), [b](https://example.com), [c](#anchor), [d](../README.md)")
	if got := Links(md); !slices.Equal(got, []string{"docs/a.md", "../README.md"}) {
		t.Errorf("Links = %q", got)
	}
}
