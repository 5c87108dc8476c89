package demo

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// kmsgFile is a node's kernel log in /dev/kmsg's record format, which its
// dmesg-exporter reads as the real device.
type kmsgFile struct {
	path string
	boot time.Time

	mu  sync.Mutex
	seq int
}

func newKmsgFile(path string, boot time.Time) (*kmsgFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	f.Close()
	return &kmsgFile{path: path, boot: boot}, nil
}

// write appends kernel records (priority 3 = err for faults, 6 = info otherwise).
func (k *kmsgFile) write(prio int, lines ...string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	f, err := os.OpenFile(k.path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, l := range lines {
		k.seq++
		usec := time.Since(k.boot).Microseconds()
		if _, err := fmt.Fprintf(f, "%d,%d,%d,-;%s\n", prio, k.seq, usec, l); err != nil {
			return err
		}
	}
	return nil
}
