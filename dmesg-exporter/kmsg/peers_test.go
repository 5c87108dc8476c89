package kmsg

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// systemd's fuzz inputs for journald's /dev/kmsg record parser
// (test/fuzz/fuzz-journald-kmsg). Each file is one read() of the device.
// They have no expected outputs; the README beside them describes what each
// holds. Parse must return a record or an error, never panic; the two
// malformed inputs must be rejected, and a Reader must count them.
func TestSystemdFuzzInputs(t *testing.T) {
	dir := peerDir(t, "kmsg", "systemd")
	type want struct {
		err      error // nil: must parse
		facility Facility
		level    Level
		seq      uint64
		usec     int64
		message  string
		device   string
	}
	cases := map[string]want{
		"basic":              {facility: FacilityDaemon, level: LevelNotice, seq: 456, usec: 292891883, message: "systemd[1]: Reexecuting."},
		"dev-null":           {facility: FacilityUser, level: LevelWarn, seq: 460, usec: 1322026586, message: "hey", device: "c1:3"},
		"loopback":           {facility: FacilityUser, level: LevelWarn, seq: 460, usec: 1322026586, message: "hey", device: "n1"},
		"subsystem-loopback": {facility: FacilityUser, level: LevelWarn, seq: 460, usec: 1322026586, message: "hey", device: "+net:lo"},
		// A dictionary line " DE" + 1749 NULs with no '=' and no final
		// newline.
		"leak-missing-cleanup": {err: ErrDict},
		// Carriage returns inside the seq field.
		"crash-ident-with-spaces": {err: ErrSyntax},
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && e.Name() != "README.md" {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var files [][]byte
	wantMalformed := 0
	for _, name := range names {
		b := readPeerFile(t, dir, name)
		files = append(files, b)
		w, known := cases[name]
		t.Run(name, func(t *testing.T) {
			r, err := Parse(b)
			if !known {
				t.Logf("no expectation for %s; Parse returned %v", name, err)
				return
			}
			if w.err != nil {
				if !errors.Is(err, w.err) {
					t.Fatalf("Parse: %v (record %+v), want %v", err, r, w.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if r.Facility != w.facility || r.Level != w.level || r.Seq != w.seq || r.Monotonic != time.Duration(w.usec)*time.Microsecond || r.Message != w.message {
				t.Errorf("got %+v", r)
			}
			dev, ok := r.Lookup("DEVICE")
			if dev != w.device || ok != (w.device != "") {
				t.Errorf("DEVICE = %q (%v), want %q", dev, ok, w.device)
			}
		})
		if _, err := Parse(b); err != nil {
			wantMalformed++
		}
	}
	for name := range cases {
		if !contains(names, name) {
			t.Errorf("expected input %s is missing", name)
		}
	}

	// Through a Reader, one file per read() as on the device.
	rd := NewReader(&chunkReader{chunks: files}, Options{Framing: FramingRecord})
	var malformed []error
	rd.opts.OnMalformed = func(raw []byte, err error) { malformed = append(malformed, err) }
	n := 0
	for {
		_, err := rd.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	st := rd.Stats()
	if n != len(files)-wantMalformed || int(st.Malformed) != wantMalformed || len(malformed) != wantMalformed || wantMalformed != 2 {
		t.Errorf("reader: %d records, %d malformed (%v), want %d and 2", n, st.Malformed, malformed, len(files)-2)
	}
	// In name order the seqs are 456, 460, 460, 460: a gap of three,
	// then two repeats, which are regressions, not losses.
	if st.Lost != 3 || st.Gaps != 1 || st.Regressions != 2 {
		t.Errorf("stats %+v", st)
	}

	// And all of them glued together as a stream: no panic, no hang.
	sr := NewReader(bytes.NewReader(bytes.Join(files, nil)), Options{})
	for {
		_, err := sr.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if sr.Stats().Malformed == 0 {
		t.Errorf("stream of systemd inputs: nothing malformed: %+v", sr.Stats())
	}
}

// chunkReader returns one chunk per Read, like /dev/kmsg returns one record.
type chunkReader struct{ chunks [][]byte }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks = c.chunks[1:]
	return n, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// go-kmsg-parser's sample (kmsgparser/test_data/sample1.kmsg): three
// newline-separated records, read here as a regular file.
func TestGoKmsgParserSample(t *testing.T) {
	dir := peerDir(t, "kmsg", "go-kmsg-parser")
	boot := time.Date(2016, 11, 13, 0, 0, 0, 0, time.UTC)
	var losses []Loss
	rd, err := Open(filepath.Join(dir, "sample1.kmsg"), Options{BootTime: boot, OnLoss: func(l Loss) { losses = append(losses, l) }})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	want := []struct {
		seq     uint64
		usec    int64
		message string
	}{
		{1804, 47700428483, "wlp4s0: associated"},
		{1805, 51742248189, "thinkpad_acpi: EC reports that Thermal Table has changed"},
		{2651, 106819644585, "CPU1: Package temperature/speed normal"},
	}
	for i, w := range want {
		r, err := rd.Next(context.Background())
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		mono := time.Duration(w.usec) * time.Microsecond
		if r.Priority() != 6 || r.Level != LevelInfo || r.Facility != FacilityKern || r.Seq != w.seq || r.Monotonic != mono ||
			r.Flags != "-" || r.Message != w.message || r.Dict != nil || r.Caller != "" {
			t.Errorf("record %d: %+v", i, r)
		}
		if !r.Time.Equal(boot.Add(mono)) {
			t.Errorf("record %d: time %v, want boot + %v", i, r.Time, mono)
		}
	}
	if _, err := rd.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("after the last record: %v, want EOF", err)
	}
	st := rd.Stats()
	if st.Records != 3 || st.Gaps != 1 || st.Lost != 2651-1805-1 || st.Malformed != 0 {
		t.Errorf("stats %+v", st)
	}
	if len(losses) != 1 || losses[0] != (Loss{After: 1805, Next: 2651, Count: 845}) {
		t.Errorf("losses %+v", losses)
	}

	// The record go-kmsg-parser's current test parses inline, given
	// without its newline as its test feeds it.
	r, err := Parse([]byte("6,2565,102258085667,-;docker0: port 2(vethc1bb733) entered blocking state"))
	if err != nil || r.Priority() != 6 || r.Seq != 2565 || r.Monotonic != 102258085667*time.Microsecond ||
		r.Message != "docker0: port 2(vethc1bb733) entered blocking state" {
		t.Errorf("inline record: %+v, %v", r, err)
	}
	// Unlike go-kmsg-parser, dictionary lines and escapes are decoded
	// rather than left in the message.
	r, err = Parse([]byte("6,1,1,-;a\\x5cb\n DEVICE=+net:docker0\n"))
	if err != nil || r.Message != `a\b` || strings.Contains(r.Message, "DEVICE") || len(r.Dict) != 1 {
		t.Errorf("%+v, %v", r, err)
	}
}

// stubTB records what peerDir does when the data is missing.
type stubTB struct {
	testing.TB
	skipped, fatal string
}

func (s *stubTB) Helper()                   {}
func (s *stubTB) Skip(args ...any)          { s.skipped = args[0].(string) }
func (s *stubTB) Fatal(args ...any)         { s.fatal = args[0].(string) }
func (s *stubTB) Fatalf(f string, a ...any) { s.fatal = f }

func TestPeerDirMissing(t *testing.T) {
	t.Setenv("CI", "")
	s := &stubTB{}
	peerDir(s, "kmsg", "no-such-peer")
	if s.fatal != "" || !strings.Contains(s.skipped, "shared/peer-tests/kmsg/no-such-peer") {
		t.Errorf("without CI: skip %q, fatal %q", s.skipped, s.fatal)
	}
	t.Setenv("CI", "true")
	s = &stubTB{}
	peerDir(s, "kmsg", "no-such-peer")
	if s.skipped != "" || !strings.Contains(s.fatal, "shared/peer-tests/kmsg/no-such-peer") {
		t.Errorf("with CI=true: skip %q, fatal %q", s.skipped, s.fatal)
	}
}
