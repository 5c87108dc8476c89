//go:build !unix

package podlogs

import "io/fs"

// inodeOf returns 0: inode numbers are not available on this platform, so
// rotation by rename is not detected and stored positions are never
// trusted.
func inodeOf(fs.FileInfo) uint64 { return 0 }
