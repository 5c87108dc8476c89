package checks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// PCIeLink is a GPU's PCIe link: what it runs at now and what it can do at most
// (the maximum of the device and its slot, as NVML reports it).
type PCIeLink struct {
	Gen, Width       int
	MaxGen, MaxWidth int
}

// GPULink is one GPU and its link, as a LinkSource reports it.
type GPULink struct {
	Index int    // NVML index, -1 when unknown (sysfs)
	PCI   string // normalized: 0000:3b:00.0
	Name  string
	Link  PCIeLink
}

// LinkSource lists the node's GPUs with their PCIe links.
type LinkSource interface {
	GPULinks(ctx context.Context) ([]GPULink, error)
}

// pcieLaneGBps is the usable data rate of one lane in GB/s (1e9 bytes) per direction:
// the transfer rate times the encoding's efficiency, divided by 8 bits.
//
//	gen1 2.5 GT/s 8b/10b     -> 0.25  GB/s
//	gen2 5   GT/s 8b/10b     -> 0.5   GB/s
//	gen3 8   GT/s 128b/130b  -> 0.985 GB/s
//	gen4 16  GT/s 128b/130b  -> 1.969 GB/s
//	gen5 32  GT/s 128b/130b  -> 3.938 GB/s
//	gen6 64  GT/s PAM4, FLIT (242 of 256 bytes carry data) -> 7.563 GB/s
//
// Packet headers and flow control take more on top (a x16 gen4 link moves about
// 24-26 GB/s of pinned memcpy, ~80% of 31.5); the pciebw probe's ratio absorbs that.
func pcieLaneGBps(gen int) float64 {
	switch gen {
	case 1:
		return 2.5 * 8 / 10 / 8
	case 2:
		return 5.0 * 8 / 10 / 8
	case 3:
		return 8.0 * 128 / 130 / 8
	case 4:
		return 16.0 * 128 / 130 / 8
	case 5:
		return 32.0 * 128 / 130 / 8
	case 6:
		return 64.0 * 242 / 256 / 8
	}
	return 0
}

// PCIeTheoreticalGBps is the data rate of a link of the given generation and width, in
// GB/s per direction; 0 if either is unknown.
func PCIeTheoreticalGBps(gen, width int) float64 {
	if width <= 0 {
		return 0
	}
	return pcieLaneGBps(gen) * float64(width)
}

// SysfsLinks reads the GPUs' PCIe links from sysfs: every PCI function of vendor
// 0x10de (NVIDIA) whose class is a 3D or VGA controller, with current_link_speed,
// current_link_width, max_link_speed and max_link_width.
type SysfsLinks struct {
	Root string // "" means /sys
}

// GPULinks implements LinkSource.
func (s SysfsLinks) GPULinks(context.Context) ([]GPULink, error) {
	root := s.Root
	if root == "" {
		root = "/sys"
	}
	dir := filepath.Join(root, "bus", "pci", "devices")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sysfs: %w", err)
	}
	var out []GPULink
	for _, e := range entries {
		dev := filepath.Join(dir, e.Name())
		if readTrim(filepath.Join(dev, "vendor")) != "0x10de" {
			continue
		}
		class := readTrim(filepath.Join(dev, "class"))
		if !strings.HasPrefix(class, "0x0302") && !strings.HasPrefix(class, "0x0300") {
			continue
		}
		l := PCIeLink{
			Gen:      speedToGen(readTrim(filepath.Join(dev, "current_link_speed"))),
			MaxGen:   speedToGen(readTrim(filepath.Join(dev, "max_link_speed"))),
			Width:    atoiOr0(readTrim(filepath.Join(dev, "current_link_width"))),
			MaxWidth: atoiOr0(readTrim(filepath.Join(dev, "max_link_width"))),
		}
		out = append(out, GPULink{Index: -1, PCI: probe.NormalizePCI(e.Name()), Link: l})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PCI < out[j].PCI })
	return out, nil
}

// speedToGen maps sysfs link speeds ("16.0 GT/s PCIe", "8.0 GT/s", "2.5 GT/s") to a
// generation; 0 when unknown.
func speedToGen(s string) int {
	f, err := strconv.ParseFloat(strings.Fields(s + " x")[0], 64)
	if err != nil {
		return 0
	}
	switch {
	case f >= 64:
		return 6
	case f >= 32:
		return 5
	case f >= 16:
		return 4
	case f >= 8:
		return 3
	case f >= 5:
		return 2
	case f >= 2.5:
		return 1
	}
	return 0
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func atoiOr0(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// firstLinks asks each source in turn and returns the first non-empty answer.
type firstLinks []LinkSource

func (f firstLinks) GPULinks(ctx context.Context) ([]GPULink, error) {
	var errs []string
	for _, s := range f {
		if s == nil {
			continue
		}
		links, err := s.GPULinks(ctx)
		if err == nil && len(links) > 0 {
			return links, nil
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("no PCIe link information: %s", strings.Join(errs, "; "))
	}
	return nil, nil
}
