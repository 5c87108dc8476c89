package kmsg

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Default paths of the kernel interfaces this package reads.
const (
	DefaultDevice     = "/dev/kmsg"
	DefaultBootIDPath = "/proc/sys/kernel/random/boot_id"
	DefaultStatPath   = "/proc/stat"
)

// BootTime returns the wall-clock time at which the kernel's clock started,
// so that a record's wall-clock time is BootTime() + Record.Monotonic.
//
// It computes CLOCK_REALTIME - CLOCK_BOOTTIME, as util-linux dmesg does for
// its --ctime and --iso renderings, and falls back to the btime line of
// /proc/stat (whole seconds) where that clock is unavailable. The printk
// clock does not advance during suspend, so on a machine that has been
// suspended the result, like dmesg's, drifts by the time spent suspended.
// The result carries no monotonic clock reading.
func BootTime() (time.Time, error) {
	if t, err := clockBootTime(); err == nil {
		return t, nil
	}
	return BootTimeFromStat(DefaultStatPath)
}

// BootTimeFromStat reads the boot time from the "btime" line of a
// /proc/stat-formatted file.
func BootTimeFromStat(path string) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("btime ")) {
			continue
		}
		v := strings.TrimSpace(string(line[len("btime "):]))
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("kmsg: %s: bad btime %q", path, v)
		}
		return time.Unix(n, 0), nil
	}
	if err := sc.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Time{}, fmt.Errorf("kmsg: %s: no btime line", path)
}

// ReadBootID reads the kernel's boot id, a UUID that changes on every boot,
// from path (DefaultBootIDPath when path is empty). Sequence numbers are only
// meaningful within one boot, so a persisted read position must carry it.
func ReadBootID(path string) (string, error) {
	if path == "" {
		path = DefaultBootIDPath
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if !isUUID(id) {
		return "", fmt.Errorf("kmsg: %s: not a boot id: %q", path, truncate(id, 64))
	}
	return id, nil
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if _, ok := unhex(c); !ok {
				return false
			}
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
