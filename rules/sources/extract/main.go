// Command extract lists the error-level print calls of one source file (a kernel
// driver, the NVIDIA driver, NCCL, UCX) into an inventory file of rules/sources,
// recording for each the rule of the packs that covers it. Ignore reasons already
// in the output file are kept. With -refresh it re-records the covering rules of
// every inventory file of a directory, after the packs changed.
//
//	go run ./rules/sources/extract -project torvalds/linux -version v6.8 \
//	    -file drivers/net/ethernet/mellanox/mlx5/core/health.c -o rules/sources/inventory/x.yaml health.c
//	go run ./rules/sources/extract -refresh rules/sources/inventory
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/faultline-dev/faultline/rules"
	"github.com/faultline-dev/faultline/rules/sources"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "extract:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fl := flag.NewFlagSet("extract", flag.ContinueOnError)
	project := fl.String("project", "", "project the file belongs to (owner/name)")
	version := fl.String("version", "", "release tag or commit of the file")
	file := fl.String("file", "", "path of the file in the project")
	source := fl.String("source", "kernel", "kind of log the messages reach: kernel or pod")
	packs := fl.String("packs", "rules/packs", "rule packs that decide coverage")
	out := fl.String("o", "", "inventory file to write (its ignore reasons are kept)")
	all := fl.Bool("all", false, "list warning and informational calls too (to find a rule's sources; not for the inventory)")
	refresh := fl.String("refresh", "", "re-record the covering rules of every inventory file in this directory")
	if err := fl.Parse(args); err != nil {
		return err
	}
	eng, err := engine(*packs)
	if err != nil {
		return err
	}
	if *refresh != "" {
		invs, err := sources.Load(*refresh)
		if err != nil {
			return err
		}
		for _, inv := range invs {
			if err := sources.Refresh(eng, inv); err != nil {
				return err
			}
			if err := sources.Write(inv.Path, inv); err != nil {
				return err
			}
		}
		return nil
	}
	if fl.NArg() != 1 || *project == "" || *version == "" || *file == "" || *out == "" {
		return fmt.Errorf("usage: extract -project P -version V -file PATH -o OUT [-source kernel|pod] LOCAL-FILE")
	}
	src, err := os.ReadFile(fl.Arg(0))
	if err != nil {
		return err
	}
	extract := sources.Extract
	if *all {
		extract = sources.ExtractAll
	}
	x, err := extract(*file, src)
	if err != nil {
		return err
	}
	inv := &sources.Inventory{Project: *project, Version: *version, File: *file, Source: rules.Source(*source),
		Prefix: x.Prefix, DevPrefix: x.DevPrefix, Messages: x.Messages}
	if old, err := sources.ReadFile(*out); err == nil {
		keepIgnores(inv, old)
	}
	if err := sources.Refresh(eng, inv); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return sources.Write(*out, inv)
}

// keepIgnores carries the ignore reasons of a previous extraction over to the
// messages with the same call and format.
func keepIgnores(inv, old *sources.Inventory) {
	reasons := map[string]string{}
	for _, m := range old.Messages {
		if m.Ignore != "" {
			reasons[m.Call+"\x00"+m.Format] = m.Ignore
		}
	}
	for i, m := range inv.Messages {
		if r, ok := reasons[m.Call+"\x00"+m.Format]; ok {
			inv.Messages[i].Ignore = r
		}
	}
}

func engine(dir string) (*rules.Engine, error) {
	ps, err := rules.LoadPaths(dir)
	if err != nil {
		return nil, err
	}
	set, err := rules.Compile(ps)
	if err != nil {
		return nil, err
	}
	return rules.NewEngine(set), nil
}
