package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/packtest"
)

func newRulesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Check and test rule packs",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "lint DIR|FILE...",
		Short: "Load and compile rule packs, report errors (file:line:column and rule) and warnings",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			eng, err := loadEngine(args)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			warnings := rules.Lint(eng.Set())
			for _, w := range warnings {
				fmt.Fprintln(out, "warning:", w)
			}
			set := eng.Set()
			fmt.Fprintf(out, "%d packs, %d rules enabled, %d disabled, %d warnings\n",
				len(set.Packs), len(set.Rules), len(set.Disabled), len(warnings))
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "test DIR|FILE...",
		Short: "Run the inline tests of rule packs",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			eng, err := loadEngine(args)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			results := packtest.Run(eng)
			failed := 0
			for _, r := range results {
				if !r.OK() {
					failed++
					fmt.Fprintln(out, r)
				}
			}
			fmt.Fprintf(out, "%d passed, %d failed\n", len(results)-failed, failed)
			if len(results) == 0 {
				return fmt.Errorf("no inline tests found")
			}
			if failed > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	})
	return cmd
}
