//go:build linux

package kmsg

import (
	"syscall"
	"time"
	"unsafe"
)

// clockBoottime is CLOCK_BOOTTIME from <linux/time.h>.
const clockBoottime = 7

func clockBootTime() (time.Time, error) {
	var ts syscall.Timespec
	before := time.Now()
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0)
	after := time.Now()
	if errno != 0 {
		return time.Time{}, errno
	}
	now := before.Add(after.Sub(before) / 2).Round(0)
	return now.Add(-time.Duration(ts.Nano())), nil
}
