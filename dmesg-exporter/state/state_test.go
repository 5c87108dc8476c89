package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTripAndAtomicity(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "state.json")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Get(); st.KmsgValid || st.BootID != "" {
		t.Fatalf("fresh state = %+v", st)
	}
	err = s.Update(func(f *File) {
		f.BootID, f.KmsgSeq, f.KmsgValid = "b1", 42, true
		f.Pods["/var/log/pods/ns_p_u/c/0.log"] = PodPos{Inode: 7, Offset: 1234}
	})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	got := s2.Get()
	if got.BootID != "b1" || got.KmsgSeq != 42 || !got.KmsgValid || got.Pods["/var/log/pods/ns_p_u/c/0.log"].Offset != 1234 {
		t.Fatalf("reloaded = %+v", got)
	}
	// Get returns a copy: changing it must not change the store.
	got.Pods["x"] = PodPos{}
	if _, ok := s2.Get().Pods["x"]; ok {
		t.Fatal("Get leaked the internal map")
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Fatalf("temp files left behind: %v", ents)
	}
}

func TestCorruptStateIsAnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(p, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "parse state") {
		t.Fatalf("err = %v", err)
	}
	if err := os.WriteFile(p, []byte(`{"version": 9}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("err = %v", err)
	}
}
