// Package clidoc checks the command lines the documentation shows against a program's
// cobra command tree: the subcommand exists and runs, each flag is one of its flags,
// and the positional arguments are as many as it takes.
package clidoc

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Check walks root's tree along args (the program's arguments, without the program)
// and says what of them the command they name does not take.
func Check(root *cobra.Command, args []string) error {
	cur := root
	root.InitDefaultVersionFlag()
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			f, err := lookup(cur, a)
			if err != nil {
				return err
			}
			if f.Name == "help" || f.Name == "version" {
				return nil // cobra answers them before any argument is checked
			}
			if !strings.Contains(a, "=") && f.NoOptDefVal == "" && !(len(a) > 2 && a[1] != '-') {
				i++ // its value
			}
			continue
		}
		if len(positional) == 0 {
			if sub := subcommand(cur, a); sub != nil {
				cur = sub
				continue
			}
		}
		positional = append(positional, a)
	}
	if !cur.Runnable() {
		return fmt.Errorf("%q does not run: no subcommand %q", cur.CommandPath(), strings.Join(positional, " "))
	}
	if err := cur.ValidateArgs(positional); err != nil {
		return fmt.Errorf("%s: %w", cur.CommandPath(), err)
	}
	return nil
}

func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// lookup finds the flag a (--name, --name=value, -x, -xvalue) of c, its own or
// inherited.
func lookup(c *cobra.Command, a string) (*pflag.Flag, error) {
	c.InitDefaultHelpFlag()
	fs := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	fs.AddFlagSet(c.Flags())
	fs.AddFlagSet(c.InheritedFlags())
	var f *pflag.Flag
	if name, ok := strings.CutPrefix(a, "--"); ok {
		name, _, _ = strings.Cut(name, "=")
		f = fs.Lookup(name)
	} else {
		f = fs.ShorthandLookup(a[1:2])
	}
	if f == nil {
		return nil, fmt.Errorf("%s has no flag %s", c.CommandPath(), a)
	}
	return f, nil
}
