// Package state persists the dmesg-exporter's read position: the boot id and the last
// kernel record sequence number the receiver acknowledged, and the offset of every pod
// log file. It is written only after an acknowledgement, atomically (write a temp
// file, fsync, rename), so a restart neither replays nor loses lines.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Version of the file format.
const Version = 1

// File is the content of the state file.
type File struct {
	Version int `json:"version"`
	// BootID is the boot the kernel position belongs to.
	BootID string `json:"bootID"`
	// KmsgSeq is the sequence number of the last acknowledged kernel record;
	// KmsgValid tells whether any record was acknowledged in this boot.
	KmsgSeq   uint64 `json:"kmsgSeq"`
	KmsgValid bool   `json:"kmsgValid"`
	// BootTime is the wall-clock boot time used to timestamp this boot's kernel
	// records. Reusing it after a restart gives a re-sent record the very same
	// timestamp, so the receiver can drop the duplicate.
	BootTime time.Time `json:"bootTime,omitzero"`
	// Pods maps a pod log file path to its acknowledged position.
	Pods map[string]PodPos `json:"pods,omitempty"`
}

// PodPos is the acknowledged position in one pod log file. Inode tells a rotated
// file (same path, new file) from the one the offset belongs to.
type PodPos struct {
	Inode  uint64 `json:"inode"`
	Offset int64  `json:"offset"`
}

// Store reads and writes the state file. It is safe for concurrent use.
type Store struct {
	path string
	mu   sync.Mutex
	cur  File
}

// Open loads the state at path; a missing file is an empty state. A corrupt file is
// an error rather than a silent restart from zero, which would replay the ring buffer.
func Open(path string) (*Store, error) {
	s := &Store{path: path, cur: File{Version: Version, Pods: map[string]PodPos{}}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", path, err)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parse state %s: %w (move it away to start over)", path, err)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("state %s: version %d, want %d", path, f.Version, Version)
	}
	if f.Pods == nil {
		f.Pods = map[string]PodPos{}
	}
	s.cur = f
	return s, nil
}

// Get returns a copy of the current state.
func (s *Store) Get() File {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur
	c.Pods = make(map[string]PodPos, len(s.cur.Pods))
	for k, v := range s.cur.Pods {
		c.Pods[k] = v
	}
	return c
}

// Update applies fn to the state and writes it durably before returning.
func (s *Store) Update(fn func(*File)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.cur
	next.Pods = make(map[string]PodPos, len(s.cur.Pods))
	for k, v := range s.cur.Pods {
		next.Pods[k] = v
	}
	fn(&next)
	if err := write(s.path, next); err != nil {
		return err
	}
	s.cur = next
	return nil
}

func write(path string, f File) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".state-*")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	// Make the rename itself durable.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
