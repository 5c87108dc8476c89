package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/internal/cli"
	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packtest"
	"github.com/faultline-dev/faultline/rules/sources"
)

func newRulesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Check and test rule packs",
	}
	cmd.AddCommand(newRulesLintCmd(), newRulesTestCmd())
	cmd.AddCommand(newRulesCoverageCmd())
	return cmd
}

func newRulesLintCmd() *cobra.Command {
	var pf packFlags
	cmd := &cobra.Command{
		Use: "lint [--no-default-packs] [--packs DIR|FILE]... [DIR|FILE]...",
		Example: `  faultline rules lint
  faultline rules lint ./site-packs
  faultline rules lint --no-default-packs ./packs/storage.yaml`,
		Short: "Load and compile rule packs, report errors (file:line:column and rule) and warnings",
		Long: `Loads and compiles the given packs as the controller and scan layer them: the
built-in packs first (unless --no-default-packs), then the given packs in order
(--packs, then the arguments), a later rule overriding an earlier one of the same
id. So a site pack that patches a built-in rule lints against the built-in packs it
needs. Errors name file:line:column and the rule.

Warnings are reported for the rules the given packs define (with a match); the
built-in packs' own warnings are the project's, not reported. With no pack given,
the built-in packs are linted, their warnings reported.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := pf.layers(args...).load(forChecking)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			warnings := rules.Lint(set.givenRules())
			for _, w := range warnings {
				fmt.Fprintln(out, "warning:", w)
			}
			s := set.Set()
			fmt.Fprintf(out, "%d packs (%d given), %d rules enabled, %d disabled, %d warnings\n",
				len(s.Packs), set.givenPacks, len(s.Rules), len(s.Disabled), len(warnings))
			return nil
		},
	}
	pf.register(cmd.Flags(), "rule pack directory or file, loaded after the built-in packs (repeatable); the arguments come after", "do not load the built-in packs")
	return cmd
}

func newRulesTestCmd() *cobra.Command {
	var pf packFlags
	cmd := &cobra.Command{
		Use: "test [--no-default-packs] [--packs DIR|FILE]... [DIR|FILE]...",
		Example: `  faultline rules test
  faultline rules test ./site-packs`,
		Short: "Run the inline tests of rule packs and the generated-line tests of their sources",
		Long: `Run the inline tests of the given packs, then the generated-line tests: every
format string a rule lists under sources is instantiated with generated values under
each common log prefix (dmesg, /dev/kmsg, syslog and journal with host and localised
months, continuation indentation, CRI) and must reach the rule with the captures it
lists; every benignSources entry must not match any rule at warning or above.

The packs layer as in the controller and scan: the built-in packs first (unless
--no-default-packs), then the given packs in order (--packs, then the arguments).
The tests of the given packs run against that whole set, so a site pack's tests see
the built-in rules it overrides, exclusive groups included; the built-in packs' own
tests run only when no pack is given. A given pack of the same name as a built-in
one layers over it by id like any other: to test a copy of the built-in packs
alone, as make test does, pass --no-default-packs.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := pf.layers(args...).load(forChecking)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			// The built-in packs are loaded without their tests when packs are given
			// (forChecking): the tests in the set are the given packs'.
			results := append(packtest.Run(set.Engine), packtest.RunSources(set.Engine)...)
			failed := 0
			for _, r := range results {
				if !r.OK() {
					failed++
					fmt.Fprintln(out, r)
				}
			}
			fmt.Fprintf(out, "%d passed, %d failed\n", len(results)-failed, failed)
			if len(results) == 0 {
				return fmt.Errorf("no inline or source tests found")
			}
			if failed > 0 {
				return cli.ExitError{Code: 1}
			}
			return nil
		},
	}
	pf.register(cmd.Flags(), "rule pack directory or file, loaded after the built-in packs (repeatable); the arguments come after", "do not load the built-in packs")
	return cmd
}

func newRulesCoverageCmd() *cobra.Command {
	var pf packFlags
	var inventory, format string
	var perFile bool
	var output outputFormat
	cmd := &cobra.Command{
		Use:   "coverage",
		Short: "How much of the source inventory the packs cover: per project and version, messages, covered, ignored, unaccounted",
		Long: `Reads the source inventory (rules/sources/inventory: the messages at warning level
or above, and the link-state messages, of every source file the packs rely on, in every
version of it that fleets run) and matches a line generated from each message's format
string against the packs: the built-in packs (unless --no-default-packs), then each
--packs path, a later rule overriding an earlier one of the same id. A message is
covered when a rule with an action other than none matches it, ignored when the
inventory gives a reason, unaccounted otherwise.

The table counts, per project and version, the messages that version prints; the total
counts each wording once, however many versions print it. Exits 1 when a message is
unaccounted.`,
		Example: `  faultline rules coverage
  faultline rules coverage --files
  faultline rules coverage --format json | jq '.versions[] | select(.project == "linux")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format must be text or json, not %q", format)
			}
			set, err := pf.layers().load(forCoverage)
			if err != nil {
				return err
			}
			invs, err := sources.Load(inventory)
			if err != nil {
				return err
			}
			rep, err := sources.Coverage(set.Engine, invs)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("format") {
				output = outputFormat(format) // text or json, checked above
			}
			err = output.print(cmd.OutOrStdout(), rep, func(out io.Writer) error {
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "project\tversion\tfiles\tmessages\tcovered\tignored\tunaccounted\t")
				for _, v := range rep.Versions {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", v.Project, v.Version, v.Files, v.Messages, v.Covered, v.Ignored, v.Unaccounted)
				}
				t := rep.Total
				fmt.Fprintf(tw, "total (each wording once)\t\t%d\t%d\t%d\t%d\t%d\t\n", len(rep.Sources), t.Messages, t.Covered, t.Ignored, t.Unaccounted)
				if err := tw.Flush(); err != nil {
					return err
				}
				if perFile {
					tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
					fmt.Fprintln(tw, "\nfile\tversions\tmessages\tcovered\tignored\tunaccounted\t")
					for _, s := range rep.Sources {
						fmt.Fprintf(tw, "%s:%s\t%d\t%d\t%d\t%d\t%d\t\n", s.Project, s.File, len(s.Versions), s.Messages, s.Covered, s.Ignored, s.Unaccounted)
					}
					if err := tw.Flush(); err != nil {
						return err
					}
				}
				for _, s := range rep.Sources {
					for _, m := range s.UnaccountedMessages {
						fmt.Fprintf(out, "unaccounted: %s:%d %s(%q)\n", s.File, m.Line, m.Call, m.Format)
					}
					for _, st := range s.Stale {
						fmt.Fprintf(out, "stale rule: %s %s\n", s.File, st)
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			if rep.Total.Unaccounted > 0 {
				return cli.ExitError{Code: 1}
			}
			return nil
		},
	}
	pf.register(cmd.Flags(), "rule pack directory or file, loaded after the built-in packs (repeatable)", "do not load the built-in packs")
	cmd.Flags().StringVar(&inventory, "inventory", "rules/sources/inventory", "directory of the source inventory")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json (the older spelling of -o)")
	addOutputFlag(cmd.Flags(), &output)
	cmd.Flags().BoolVar(&perFile, "files", false, "also list the coverage of each source file (text format)")
	return cmd
}
