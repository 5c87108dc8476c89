package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/scan"
)

func newScanCmd() *cobra.Command {
	var (
		packDirs []string
		format   string
		source   string
	)
	cmd := &cobra.Command{
		Use:   "scan [--packs DIR]... [--format text|jsonl] [FILE|-]...",
		Short: "Run rule packs over log files (dmesg, /dev/kmsg records, syslog, journal, CRI pod logs)",
		Long: `Reads log lines as they come in the wild and reports the lines that match a rule.
With no FILE, or with -, reads standard input. Without --packs the default packs
built into the binary are used. Each input is treated as one node's stream, so
thresholds ("3 link-downs in 10m") and multi-line groups apply; lines are taken to be
one second apart, since files carry no reliable clock.

--format jsonl prints one JSON object per match:
  {"line":N,"pack":"...","rule":"...","severity":"...","action":"taint|event|probe|none",
   "captures":{...},"text":"..."}
where action is what faultline would do at that line (none while a threshold is not
yet reached). Exit status is 0 when the scan ran, whatever it found.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "jsonl" {
				return fmt.Errorf("--format must be text or jsonl, not %q", format)
			}
			switch rules.Source(source) {
			case "", rules.SourceKernel, rules.SourcePod:
			default:
				return fmt.Errorf("--source must be kernel or pod, not %q", source)
			}
			eng, err := loadEngine(packDirs)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				args = []string{"-"}
			}
			out := cmd.OutOrStdout()
			var emit func(scan.Match) error
			flush := func() error { return nil }
			if format == "jsonl" {
				emit = scan.JSONLWriter(out)
			} else {
				emit, flush = scan.TextWriter(out)
			}
			sc := scan.New(eng, scan.Options{Source: rules.Source(source)})
			for _, name := range args {
				var r io.Reader = cmd.InOrStdin()
				if name != "-" {
					f, err := os.Open(name)
					if err != nil {
						return fmt.Errorf("scan: %w", err)
					}
					defer f.Close()
					r = f
				}
				if err := sc.Scan(cmd.Context(), r, emit); err != nil {
					return fmt.Errorf("scan %s: %w", name, err)
				}
			}
			if err := flush(); err != nil {
				return err
			}
			if format == "text" {
				return sc.WriteSummary(out)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&packDirs, "packs", nil, "rule pack directory or file (repeatable; later packs override earlier rules by id); default: the built-in packs")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or jsonl")
	cmd.Flags().StringVar(&source, "source", "", "treat every line as this source (kernel or pod); default: guess from each line's prefix")
	return cmd
}
