// Package liveheap measures what a test holds: the memory tests compare the live heap
// before and after building what they measure.
package liveheap

import "runtime"

// Bytes is the live heap: the bytes allocated and still reachable after two
// collections (the second frees what the first's finalizers let go).
func Bytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
