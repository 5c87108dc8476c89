package liveheap

import (
	"runtime"
	"testing"
)

// What is held counts; what was let go does not.
func TestBytes(t *testing.T) {
	const size = 16 << 20
	before := Bytes()
	held := make([]byte, size)
	for range 4 {
		_ = make([]byte, size) // garbage: not live
	}
	during := Bytes()
	runtime.KeepAlive(held)
	// The rest of the heap moves a little between the two readings (the testing
	// package's and the runtime's own small objects come and go), so the growth may
	// fall short of the held slice by a sixteenth of it: holding must count (most of
	// it), garbage must not (at most once more).
	if d := int64(during) - int64(before); d < size-size/16 || d > 2*size {
		t.Fatalf("live heap grew by %d bytes holding %d", d, size)
	}
	held = nil
	if after := Bytes(); int64(after)-int64(before) > size/2 {
		t.Fatalf("live heap %d bytes above the start after letting go", after-before)
	}
}
