package main

import (
	"testing"

	"github.com/spf13/cobra"
)

// Every command an operator can run shows, in its --help, how it is run.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && !c.Hidden && c.Example == "" {
			t.Errorf("%q has no Example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}
