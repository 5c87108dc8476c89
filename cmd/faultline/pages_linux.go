package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// releaseStartupPages drops this process's mappings of the faultline executable's
// read-only pages (code and constant data) once a daemon is up.
//
// One binary carries every component, and Go runs the init functions of every
// package it links before main: starting the exporter touches the code and type data
// of client-go, the controller and the probes, and the kernel's fault-around maps
// 64 KiB around each touch. Those pages stay in the process's resident set although
// the daemon never runs them again (about 25 MiB of the exporter's RSS). MADV_DONTNEED
// on a clean private file mapping only unmaps the pages: they stay in the page cache,
// and whatever code the daemon does run comes back with a minor fault. Mappings with
// any private (copied-on-write) page are left alone: the read-only-after-relocation
// segment holds resolved addresses of C functions (dlopen for NVML), and dropping it
// would bring back the file's unrelocated bytes. It returns the bytes unmapped.
func releaseStartupPages() (int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("release startup pages: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("release startup pages: %w", err)
	}
	defer f.Close()
	type mapping struct {
		start, end uint64
		clean      bool
	}
	var maps []mapping
	var cur *mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && len(fields) >= 5 {
			// A mapping's header: address perms offset dev inode [path]
			cur = nil
			if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
				continue
			}
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end <= start {
				continue
			}
			maps = append(maps, mapping{start: start, end: end, clean: true})
			cur = &maps[len(maps)-1]
			continue
		}
		// The mapping's counters: any anonymous (copied) page makes it off limits.
		if cur != nil && fields[0] == "Anonymous:" && len(fields) >= 2 && fields[1] != "0" {
			cur.clean = false
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("release startup pages: %w", err)
	}
	var total int64
	for _, m := range maps {
		if !m.clean {
			continue
		}
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), syscall.MADV_DONTNEED); e != 0 {
			return total, fmt.Errorf("release startup pages: madvise %x-%x: %w", m.start, m.end, e)
		}
		total += int64(m.end - m.start)
	}
	return total, nil
}

// releaseStartupPagesLogged releases the pages and logs what it did.
func releaseStartupPagesLogged(log *slog.Logger) {
	before := rssFile()
	n, err := releaseStartupPages()
	if err != nil {
		log.Warn("could not release start-up pages", "err", err)
		return
	}
	log.Info("released start-up pages of the binary", "unmapped_mib", n>>20, "file_rss_kib_before", before, "file_rss_kib_after", rssFile())
}

// rssFile is the process's file-backed resident memory in KiB (-1 if unknown).
func rssFile() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
