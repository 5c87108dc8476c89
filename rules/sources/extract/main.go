// Command extract lists the print calls of one source file (a kernel driver, the
// NVIDIA driver, NCCL, UCX, a user-space tool) that can mean a fault into the
// inventory file of that source file, for one version: messages that version
// prints with a wording already listed get the version added; new wordings are new
// entries. It records for each the rule of the packs that covers it and keeps the
// ignore reasons already there. With -refresh it re-records the covering rules of
// every inventory file of a directory, after the packs changed.
//
//	go run ./rules/sources/extract -project linux -version v6.12.117 \
//	    -from "Debian linux-source-6.12 6.12.117-1~deb12u1" \
//	    -file drivers/nvme/host/core.c -inventory rules/sources/inventory core.c
//	go run ./rules/sources/extract -project linux -version v6.12.117 -file drivers/nvme/host/core.c -drop
//	go run ./rules/sources/extract -refresh rules/sources/inventory [-match 'linux__drivers_nvme_*']
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
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
	project := fl.String("project", "", "project the file belongs to (linux, NVIDIA/open-gpu-kernel-modules, NVIDIA/nccl, ...)")
	version := fl.String("version", "", "release tag of the file (v6.12.117, 595.45.04, v2.30.7-1)")
	from := fl.String("from", "", "where this version of the file was read (a package and its version, a tag)")
	file := fl.String("file", "", "path of the file in the project")
	source := fl.String("source", "kernel", "kind of log the messages reach: kernel or pod")
	packs := fl.String("packs", "rules/packs", "rule packs that decide coverage")
	dir := fl.String("inventory", "rules/sources/inventory", "inventory directory; the file's inventory is created or extended there")
	all := fl.Bool("all", false, "print every call, informational ones too, instead of writing the inventory (to find a rule's sources)")
	refresh := fl.String("refresh", "", "re-record the covering rules of every inventory file in this directory")
	match := fl.String("match", "*", "with -refresh: only the inventory files whose name matches this glob (NVIDIA_*, linux__drivers_nvme_*)")
	drop := fl.Bool("drop", false, "remove -version from the file's inventory instead (no LOCAL-FILE)")
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
			if ok, err := filepath.Match(*match, filepath.Base(inv.Path)); err != nil || !ok {
				if err != nil {
					return fmt.Errorf("-match: %w", err)
				}
				continue
			}
			if err := sources.Refresh(eng, inv); err != nil {
				return err
			}
			if err := sources.Write(inv.Path, inv); err != nil {
				return err
			}
		}
		return nil
	}
	out := filepath.Join(*dir, sources.FileName(*project, *file))
	if *drop {
		inv, err := sources.ReadFile(out)
		if err != nil {
			return err
		}
		if err := inv.Drop(*version); err != nil {
			return err
		}
		return sources.Write(out, inv)
	}
	if fl.NArg() != 1 || *project == "" || *version == "" || *file == "" {
		return fmt.Errorf("usage: extract -project P -version V [-from WHERE] -file PATH [-inventory DIR] [-source kernel|pod] LOCAL-FILE")
	}
	src, err := os.ReadFile(fl.Arg(0))
	if err != nil {
		return err
	}
	if *all {
		x, err := sources.ExtractAll(*file, src)
		if err != nil {
			return err
		}
		for _, m := range x.Messages {
			fmt.Printf("%d\t%s\t%s\t%s\t%q\n", m.Line, m.Level, m.Call, m.Func, m.Format)
		}
		return nil
	}
	x, err := sources.Extract(*file, src)
	if err != nil {
		return err
	}
	inv, err := sources.ReadFile(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		inv = &sources.Inventory{Project: *project, File: *file, Source: rules.Source(*source)}
	case err != nil:
		return err
	case inv.Source != rules.Source(*source):
		return fmt.Errorf("%s: the inventory's source is %s, not %s", out, inv.Source, *source)
	}
	inv.Merge(sources.Version{Version: *version, From: *from}, x, sources.NewestFirst)
	if err := sources.Refresh(eng, inv); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	return sources.Write(out, inv)
}

func engine(dir string) (*rules.Engine, error) {
	ps, err := rules.LoadPaths(dir)
	if err != nil {
		return nil, err
	}
	return rules.CompileEngine(ps)
}
