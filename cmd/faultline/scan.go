package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/internal/cli"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/scan"
)

func newScanCmd() *cobra.Command {
	var (
		pf       packFlags
		format   string
		source   string
		nodeFrom string
		node     string
		year     int
		failOn   string
		workers  int
	)
	cmd := &cobra.Command{
		Use: "scan [--no-default-packs] [--packs DIR|FILE]... [--format text|jsonl] [--fail-on taint|event|warning] [FILE|-]...",
		Example: `  dmesg | faultline scan
  faultline scan --packs ./site-packs --fail-on taint /var/log/kern.log
  journalctl -k -o short-iso | faultline scan --format jsonl --node gpu-3`,
		Short: "Run rule packs over log files (dmesg, /dev/kmsg records, syslog, journal, CRI pod logs)",
		Long: `Reads log lines as they come in the wild and reports the lines that match a rule.
With no FILE, or with -, reads standard input. The packs layer as in the
controller: the packs built into the binary first (unless --no-default-packs), then
each --packs path in order, a later rule overriding an earlier one of the same id
(a rule without match patches it). Packs are loaded for matching: their rules'
tests, sources and benignSources are neither read nor checked (faultline rules lint
and rules test check them).

Thresholds ("3 link-downs in 10m") and multi-line groups count per node, over the
line's own time: dmesg seconds since boot, dmesg -T dates, syslog and journal dates
(any month spelling; the year from --year), RFC 3339 and CRI times, an ISO time at
the start of an application log line. A line without a time shares the time of the
line before it; in an input that has none at all, lines are one second apart. When
dmesg seconds run back, the node rebooted: no window spans a reboot.

Each host of a merged syslog is a node of its own (--node-from host); lines without
a host belong to --node, or, without it, are counted per input and reported with no
node. --node-from file makes each input one node, --node-from none makes everything
one node.

--format jsonl prints one JSON object per match:
  {"file":"...","line":N,"node":"...","time":"RFC 3339, when the line has one",
   "pack":"...","rule":"...","severity":"...","action":"taint|event|probe|none",
   "mode":"observe|annotate|enforce","captures":{...},"text":"..."}
where action is what faultline would do at that line (none while a threshold is not
yet reached) and mode how far the rule's pack lets it go (see docs/rules.md). Text output escapes control characters.

Exit status: 0 when the scan ran and nothing reached --fail-on; 2 when a rule fired
at the --fail-on level (taint: a taint rule fired; event: a taint, probe or event
rule fired; warning: a rule of severity warning or critical fired); 1 on an error.
Without --fail-on, 0 whenever the scan ran.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if workers < 0 || workers > 256 {
				return fmt.Errorf("--workers must be between 0 and 256, not %d", workers)
			}
			if format != "text" && format != "jsonl" {
				return fmt.Errorf("--format must be text or jsonl, not %q", format)
			}
			if source != "" && !logstream.IsSource(source) {
				return fmt.Errorf("--source must be %s, not %q", logstream.SourceList(), source)
			}
			switch scan.NodeFrom(nodeFrom) {
			case scan.NodeFromHost, scan.NodeFromFile, scan.NodeFromNone:
			default:
				return fmt.Errorf("--node-from must be host, file or none, not %q", nodeFrom)
			}
			fail, err := scan.ParseFailOn(failOn)
			if err != nil {
				return err
			}
			set, err := pf.layers().load(forMatching)
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
				emit, flush = scan.TextWriter(out, len(args) > 1)
			}
			sc := scan.New(set.Engine, scan.Options{Source: rules.Source(source), NodeFrom: scan.NodeFrom(nodeFrom), Node: node, Year: year, Workers: workers})
			for _, name := range args {
				if err := scanInput(cmd, sc, name, emit); err != nil {
					return err
				}
			}
			if err := flush(); err != nil {
				return err
			}
			if format == "text" {
				if err := sc.WriteSummary(out); err != nil {
					return err
				}
			}
			if sc.Failed(fail) {
				return cli.ExitError{Code: 2}
			}
			return nil
		},
	}
	pf.register(cmd.Flags(), "rule pack directory or file, loaded after the built-in packs (repeatable; later packs override earlier rules by id)", "do not load the built-in packs: only the --packs ones")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or jsonl")
	cmd.Flags().StringVar(&source, "source", "", "treat every line as this source ("+logstream.SourceList()+"); default: guess from each line's prefix")
	cmd.Flags().StringVar(&nodeFrom, "node-from", string(scan.NodeFromHost), "what a line's node is: host (its syslog/journal host), file (the input), none (one node)")
	cmd.Flags().StringVar(&node, "node", "", "node of the lines that name no host; unset, they are counted per input and reported with no node")
	cmd.Flags().IntVar(&year, "year", time.Now().Year(), "year of syslog dates, which name none")
	cmd.Flags().IntVar(&workers, "workers", 0, "goroutines that parse and match lines (output keeps the input's order); 0: one per CPU but one, at most 4, and 1 below 4 CPUs")
	cmd.Flags().StringVar(&failOn, "fail-on", "", "exit with status 2 when a rule fires at this level: taint, event or warning")
	return cmd
}

// stdin names standard input "-" for the scanner.
type stdin struct{ io.Reader }

func (stdin) Name() string { return "-" }

func scanInput(cmd *cobra.Command, sc *scan.Scanner, name string, emit func(scan.Match) error) error {
	var r io.Reader = stdin{cmd.InOrStdin()}
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
	return nil
}
