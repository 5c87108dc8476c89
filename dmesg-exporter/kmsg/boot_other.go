//go:build !linux

package kmsg

import (
	"errors"
	"time"
)

func clockBootTime() (time.Time, error) {
	return time.Time{}, errors.New("kmsg: CLOCK_BOOTTIME is only available on Linux")
}
