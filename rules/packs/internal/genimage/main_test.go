package main

import (
	"bytes"
	"os"
	"testing"
)

// The committed file is what the generator writes of the committed packs, and the
// generator writes the same bytes every time (maps are written in key order).
func TestGeneratedFileIsCurrent(t *testing.T) {
	src, err := source("../..", "packs")
	if err != nil {
		t.Fatal(err)
	}
	again, err := source("../..", "packs")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, again) {
		t.Fatal("two runs of the generator wrote different files")
	}
	committed, err := os.ReadFile("../../zz_generated.image.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, committed) {
		t.Fatal("rules/packs/zz_generated.image.go is not what the generator writes of the packs: run `go generate ./rules/packs`")
	}
}
