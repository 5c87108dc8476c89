//go:build !cgo

package nvmlevents

import (
	"context"
	"fmt"
)

// Watcher is the event watcher; without cgo there are no NVML bindings.
type Watcher struct{}

// Open returns a watcher of the NVML library at path; in this build Run fails.
func Open(path string, cfg Config) (*Watcher, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Watcher{}, nil
}

// Run fails: the binary was built without cgo.
func (*Watcher) Run(context.Context) error {
	return fmt.Errorf("%w (built without cgo)", ErrNoNVML)
}
