package kmsg

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

var testBoot = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// readAll reads records until EOF.
func readAll(t *testing.T, rd *Reader) []Record {
	t.Helper()
	var out []Record
	for {
		r, err := rd.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, r)
	}
}

func seqs(recs []Record) []uint64 {
	var s []uint64
	for _, r := range recs {
		s = append(s, r.Seq)
	}
	return s
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var sampleSeqs = []uint64{1000, 1001, 1002, 1003, 1004, 1005, 1006, 1010, 1011, 1012, 1013}

func TestReaderRegularFile(t *testing.T) {
	var losses []Loss
	rd, err := Open(filepath.Join("testdata", "sample.kmsg"), Options{BootTime: testBoot, OnLoss: func(l Loss) { losses = append(losses, l) }})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if rd.BootTime() != testBoot {
		t.Errorf("BootTime() = %v", rd.BootTime())
	}
	recs := readAll(t, rd)
	if !equalSeqs(seqs(recs), sampleSeqs) {
		t.Fatalf("seqs %v, want %v", seqs(recs), sampleSeqs)
	}
	tests := []struct {
		i       int
		level   Level
		fac     Facility
		caller  string
		message string
		device  string
	}{
		{1, LevelInfo, FacilityKern, "T1", "pci 0000:3b:00.0: [10de:20b0] type 00 class 0x030200 PCIe Endpoint", "+pci:0000:3b:00.0"},
		{2, LevelWarn, FacilityKern, "T2345", "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", ""},
		{3, LevelErr, FacilityKern, "T2345", "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", ""},
		{4, LevelInfo, FacilityKern, "T99", "mlx5_core 0000:5e:00.0: Port: 1 Link DOWN", "+pci:0000:5e:00.0"},
		{6, LevelWarn, FacilityKern, "T99", "  #1  #3  #5  #7", ""},
		{7, LevelInfo, FacilityKern, "C3", "ib0: lost carrier", ""},
		{8, LevelWarn, FacilityKern, "T4242", "pcieport 0000:00:03.1: AER: Corrected error received: 0000:3b:00.0", "+pci:0000:3b:00.0"},
		{9, LevelInfo, FacilityKern, "T1", "initrd=\\ucode.img escaped\nnewline \u2713", ""},
		{10, LevelInfo, FacilityUser, "T777", "faultline-test[777]: written to /dev/kmsg by user space", ""},
	}
	for _, tc := range tests {
		r := recs[tc.i]
		dev, _ := r.Lookup("DEVICE")
		if r.Level != tc.level || r.Facility != tc.fac || r.Caller != tc.caller || r.Message != tc.message || dev != tc.device {
			t.Errorf("record %d: %+v", tc.i, r)
		}
		if !r.Time.Equal(testBoot.Add(r.Monotonic)) {
			t.Errorf("record %d: Time %v", tc.i, r.Time)
		}
	}
	st := rd.Stats()
	want := Stats{Records: 11, Lost: 3, Gaps: 1}
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	if len(losses) != 1 || losses[0] != (Loss{After: 1006, Next: 1010, Count: 3}) {
		t.Errorf("losses %+v", losses)
	}

	// A regular file that grows is read on after EOF.
	path := filepath.Join(t.TempDir(), "grow.kmsg")
	if err := os.WriteFile(path, []byte("6,1,1,-;one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := readAll(t, g); len(got) != 1 {
		t.Fatalf("%d records", len(got))
	}
	appendFile(t, path, "6,2,2,-;two\n DEVICE=n1\n")
	got := readAll(t, g)
	if len(got) != 1 || got[0].Message != "two" || len(got[0].Dict) != 1 {
		t.Fatalf("after growth: %+v", got)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestReaderOddChunks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "sample.kmsg"))
	if err != nil {
		t.Fatal(err)
	}
	want := readAll(t, NewReader(bytes.NewReader(b), Options{BootTime: testBoot}))
	for name, src := range map[string]io.Reader{
		"one byte":              iotest.OneByteReader(bytes.NewReader(b)),
		"half":                  iotest.HalfReader(bytes.NewReader(b)),
		"data+EOF":              iotest.DataErrReader(bytes.NewReader(b)),
		"NUL split":             bytes.NewReader(bytes.ReplaceAll(b, []byte("\n6,"), []byte("\n\x00\x006,"))),
		"CRLF-free blank lines": bytes.NewReader(bytes.ReplaceAll(b, []byte("\n4,"), []byte("\n\n\n4,"))),
	} {
		t.Run(name, func(t *testing.T) {
			got := readAll(t, NewReader(src, Options{BootTime: testBoot}))
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i := range got {
				if !equalRecords(got[i], want[i]) {
					t.Errorf("record %d: %+v, want %+v", i, got[i], want[i])
				}
			}
		})
	}
}

func TestReaderSeekAfter(t *testing.T) {
	tests := []struct {
		after   uint64
		want    []uint64
		skipped uint64
		lost    uint64
	}{
		{0, sampleSeqs, 0, 999 + 3},  // records 1..999 are gone
		{999, sampleSeqs, 0, 3},      // nothing missing up to the file's first record
		{1003, sampleSeqs[4:], 4, 3}, // resume in the middle
		{1007, sampleSeqs[7:], 7, 2}, // 1008 and 1009 were never there
		{1009, sampleSeqs[7:], 7, 0}, // exactly before the next one
		{1013, nil, 11, 0},           // all read already
		{5000, nil, 11, 0},           // ahead of the file: everything skipped
	}
	for _, tc := range tests {
		rd, err := Open(filepath.Join("testdata", "sample.kmsg"), Options{BootTime: testBoot})
		if err != nil {
			t.Fatal(err)
		}
		// Read a little first: SeekAfter rewinds a regular file.
		if _, err := rd.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := rd.SeekAfter(tc.after); err != nil {
			t.Fatal(err)
		}
		rd.stats = counters{}
		got := readAll(t, rd)
		st := rd.Stats()
		if !equalSeqs(seqs(got), tc.want) || st.Skipped != tc.skipped || st.Lost != tc.lost {
			t.Errorf("SeekAfter(%d): seqs %v, stats %+v; want %v, %d skipped, %d lost", tc.after, seqs(got), st, tc.want, tc.skipped, tc.lost)
		}
		rd.Close()
	}

	// On a pipe (no rewind) it only skips.
	rd := NewReader(strings.NewReader("6,1,1,-;a\n6,2,2,-;b\n6,3,3,-;c\n"), Options{})
	if err := rd.SeekAfter(1); err != nil {
		t.Fatal(err)
	}
	if got := seqs(readAll(t, rd)); !equalSeqs(got, []uint64{2, 3}) {
		t.Errorf("seqs %v", got)
	}
}

func TestReaderGapsAndRegressions(t *testing.T) {
	in := strings.Join([]string{
		"6,10,1,-;a",
		"6,11,1,-;b",
		"6,15,1,-;c", // 12-14 lost
		"6,15,1,-;d", // repeat
		"6,3,1,-;e",  // backwards
		"6,4,1,-;f",
		"6,18446744073709551615,1,-;g", // a huge jump
		"garbage line",
		"", // a blank line ends the record, so the next line is an orphan
		" ORPHAN=dict",
		"6,x,1,-;bad seq",
		"",
	}, "\n")
	var losses []Loss
	var bad []error
	rd := NewReader(strings.NewReader(in), Options{
		OnLoss:      func(l Loss) { losses = append(losses, l) },
		OnMalformed: func(raw []byte, err error) { bad = append(bad, err) },
	})
	got := readAll(t, rd)
	if len(got) != 7 {
		t.Fatalf("%d records", len(got))
	}
	st := rd.Stats()
	want := Stats{Records: 7, Malformed: 3, Lost: 3 + (1<<64 - 1 - 4 - 1), Gaps: 2, Regressions: 2}
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	wantLoss := []Loss{{After: 11, Next: 15, Count: 3}, {After: 4, Next: 1<<64 - 1, Count: 1<<64 - 1 - 4 - 1}}
	if len(losses) != 2 || losses[0] != wantLoss[0] || losses[1] != wantLoss[1] {
		t.Errorf("losses %+v, want %+v", losses, wantLoss)
	}
	if len(bad) != 3 || !errors.Is(bad[0], ErrNoSeparator) || !errors.Is(bad[1], ErrOrphanDict) || !errors.Is(bad[2], ErrSyntax) {
		t.Errorf("malformed: %v", bad)
	}
}

func TestReaderTooLong(t *testing.T) {
	long := strings.Repeat("x", 500)
	in := "6,1,1,-;short\n" +
		"6,2,1,-;" + long + "\n DEVICE=n1\n" + // line over the limit, dictionary too
		"6,3,1,-;ok\n" +
		"6,4,1,-;fits\n A=" + strings.Repeat("y", 60) + "\n B=" + strings.Repeat("z", 60) + "\n" + // dictionary pushes it over
		"6,5,1,-;last\n"
	var bad []error
	rd := NewReader(strings.NewReader(in), Options{MaxRecordSize: 100, OnMalformed: func(raw []byte, err error) {
		if len(raw) > 100 {
			t.Errorf("raw of %d bytes passed for a cut record", len(raw))
		}
		bad = append(bad, err)
	}})
	got := readAll(t, rd)
	if !equalSeqs(seqs(got), []uint64{1, 3, 5}) {
		t.Errorf("seqs %v", seqs(got))
	}
	// The orphaned " DEVICE=n1" after the cut line counts too.
	if len(bad) != 3 || !errors.Is(bad[0], ErrTooLong) || !errors.Is(bad[1], ErrOrphanDict) || !errors.Is(bad[2], ErrTooLong) {
		t.Errorf("malformed: %v", bad)
	}
}

// fakeDevice behaves like /dev/kmsg: each Read returns one record, EINVAL
// when the buffer is too small for it, or a scripted error.
type fakeDevice struct {
	steps []any // string records or errors
	reads int
}

func (d *fakeDevice) Read(p []byte) (int, error) {
	d.reads++
	if len(d.steps) == 0 {
		return 0, io.EOF
	}
	switch s := d.steps[0].(type) {
	case error:
		d.steps = d.steps[1:]
		return 0, &os.PathError{Op: "read", Path: "/dev/kmsg", Err: s}
	case string:
		if len(p) < len(s) {
			return 0, &os.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EINVAL}
		}
		d.steps = d.steps[1:]
		return copy(p, s), nil
	}
	panic("bad step")
}

func TestReaderOverrun(t *testing.T) {
	big := "6,12,3,-;" + strings.Repeat("b", 40000) + "\n"
	dev := &fakeDevice{steps: []any{
		syscall.EPIPE, // before anything was read: uncountable
		"6,1,1,-;a\n",
		"6,2,2,-;b\n SUBSYSTEM=pci\n",
		syscall.EPIPE, // the buffer wrapped: 3..9 were overwritten
		"6,10,3,-;c\n",
		big, // needs a larger buffer than the first one
		syscall.EPIPE,
		syscall.EPIPE,
		"6,20,4,-;d\n",
	}}
	var losses []Loss
	rd := NewReader(dev, Options{Framing: FramingRecord, OnLoss: func(l Loss) { losses = append(losses, l) }})
	got := readAll(t, rd)
	if !equalSeqs(seqs(got), []uint64{1, 2, 10, 12, 20}) {
		t.Fatalf("seqs %v", seqs(got))
	}
	if got[1].Dict == nil || len(got[3].Message) != 40000 {
		t.Errorf("records %+v", got[:2])
	}
	st := rd.Stats()
	want := Stats{Records: 5, Overruns: 4, Lost: 7 + 1 + 7, Gaps: 3}
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	wantLoss := []Loss{
		{Next: 1, Overrun: true},
		{After: 2, Next: 10, Count: 7, Overrun: true},
		{After: 10, Next: 12, Count: 1},
		{After: 12, Next: 20, Count: 7, Overrun: true},
	}
	if len(losses) != len(wantLoss) {
		t.Fatalf("losses %+v", losses)
	}
	for i := range wantLoss {
		if losses[i] != wantLoss[i] {
			t.Errorf("loss %d: %+v, want %+v", i, losses[i], wantLoss[i])
		}
	}

	// A record larger than MaxRecordSize on the device is an error, not a
	// silent stop.
	dev = &fakeDevice{steps: []any{big}}
	rd = NewReader(dev, Options{Framing: FramingRecord, MaxRecordSize: 1024})
	if _, err := rd.Next(context.Background()); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("oversized record: %v", err)
	}
}

func TestReaderMergeContinuations(t *testing.T) {
	tests := []struct {
		file     string
		messages []string
		seqs     [][2]uint64
		merged   uint64
	}{
		{
			file: "continuation-modern.kmsg",
			messages: []string{
				"smpboot: x86: Booting SMP configuration:.... node  #0, CPUs:      #1  #3",
				"a fragment from another task",
				"  #5  #7",
				"smp: Brought up 1 node, 16 CPUs",
			},
			seqs:   [][2]uint64{{300, 302}, {303, 303}, {304, 304}, {305, 305}},
			merged: 2,
		},
		{
			file: "continuation-legacy.kmsg",
			messages: []string{
				"Memory: 16G available",
				"CPU features: sse avx avx2",
				"Second line: done",
				"Console: colour dummy device 80x25",
			},
			seqs:   [][2]uint64{{20, 20}, {21, 24}, {25, 26}, {27, 27}},
			merged: 4,
		},
		{
			// Recorded from NVIDIA's open module 580.159.04 on an H200 (Linux
			// 6.18): nv_printf prefixes every NVRM line with KERN_CONT, so each
			// line the kernel could not append is a record flagged 'c'. Each
			// starts with "NVRM: " and stands alone, as dmesg shows it.
			file: "nvidia-580-open.kmsg",
			messages: []string{
				"nvidia: loading out-of-tree module taints kernel.",
				"nvidia-nvlink: Nvlink Core is being initialized, major device number 240",
				"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  ",
				"NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.",
				"NVRM: Persistence mode is deprecated and will be removed in a future release. Please use nvidia-persistenced instead.",
			},
			seqs:   [][2]uint64{{353, 353}, {354, 354}, {355, 355}, {356, 356}, {357, 357}},
			merged: 0,
		},
		{
			// Recorded on an H200 (580.159.04) as a CUDA program wrote to an
			// address it never allocated: the driver's three lines of an Xid, 10 µs
			// apart, each a 'c' record (the board serial number replaced).
			file: "nvidia-580-xid31.kmsg",
			messages: []string{
				"NVRM: GPU at PCI:0000:00:06: GPU-22403340-bf78-42fb-17b9-8068f2a5c3f1",
				"NVRM: GPU Board Serial Number: 0000000000000",
				"NVRM: Xid (PCI:0000:00:06): 31, pid=1103, name=fault, channel 0x0000000a, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_8 faulted @ 0x7fca_cfe00000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE",
			},
			seqs:   [][2]uint64{{358, 358}, {359, 359}, {360, 360}},
			merged: 0,
		},
		{
			// A fragment logged within ContinuationWait (by the kernel's clock) of
			// the record before it joins it; one logged 1.5 s later stands alone,
			// as it would when read live.
			file: "continuation-gap.kmsg",
			messages: []string{
				"Checking that the widget answers... still",
				" done",
				"next line",
			},
			seqs:   [][2]uint64{{10, 11}, {12, 12}, {13, 13}},
			merged: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			rd, err := Open(filepath.Join("testdata", tc.file), Options{MergeContinuations: true})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			got := readAll(t, rd)
			if len(got) != len(tc.messages) {
				t.Fatalf("%d records: %+v", len(got), got)
			}
			for i, r := range got {
				if r.Message != tc.messages[i] || r.Seq != tc.seqs[i][0] || r.LastSeq != tc.seqs[i][1] {
					t.Errorf("record %d: seq %d-%d %q, want %d-%d %q", i, r.Seq, r.LastSeq, r.Message, tc.seqs[i][0], tc.seqs[i][1], tc.messages[i])
				}
			}
			if st := rd.Stats(); st.Merged != tc.merged || st.Records != uint64(len(tc.messages)) {
				t.Errorf("stats %+v", st)
			}
			// Without merging every record stands alone.
			plain, err := Open(filepath.Join("testdata", tc.file), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			all := readAll(t, plain)
			if n := uint64(len(all)); n != uint64(len(tc.messages))+tc.merged {
				t.Errorf("unmerged: %d records", n)
			}
		})
	}
}

// fifo creates a FIFO and opens both ends; it returns the reader and the
// write end.
func fifo(t *testing.T, opts Options) (*Reader, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kmsg.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	wc := make(chan *os.File, 1)
	go func() {
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
		}
		wc <- w
	}()
	rd, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	w := <-wc
	if w == nil {
		t.FailNow()
	}
	t.Cleanup(func() { w.Close(); rd.Close() })
	return rd, w
}

type result struct {
	rec Record
	err error
}

func nextAsync(ctx context.Context, rd *Reader) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := rd.Next(ctx)
		ch <- result{r, err}
	}()
	return ch
}

func TestReaderFIFO(t *testing.T) {
	rd, w := fifo(t, Options{BootTime: testBoot, DictWait: 200 * time.Millisecond})
	if rd.dl == nil {
		t.Fatal("a FIFO should support read deadlines")
	}
	ctx := context.Background()

	// A record arrives in pieces: header line first, dictionary later.
	ch := nextAsync(ctx, rd)
	w.WriteString("4,1,10,-,caller=T9;NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error")
	time.Sleep(20 * time.Millisecond)
	w.WriteString("\n SUBSYSTEM=pci\n")
	time.Sleep(20 * time.Millisecond)
	w.WriteString(" DEVICE=+pci:0000:3b:00.0\n")
	time.Sleep(20 * time.Millisecond)
	w.WriteString("6,2,20,-;next\n")
	res := <-ch
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.rec.Seq != 1 || len(res.rec.Dict) != 2 || !strings.HasSuffix(res.rec.Message, "double bit error") {
		t.Errorf("record %+v", res.rec)
	}
	// The next record is already in; with no dictionary line after it, it
	// comes after DictWait at the latest.
	start := time.Now()
	r, err := rd.Next(ctx)
	if err != nil || r.Seq != 2 || r.Message != "next" {
		t.Fatalf("%+v, %v", r, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}

	// The writer closes: EOF.
	w.WriteString("6,5,30,-;last\n")
	w.Close()
	r, err = rd.Next(ctx)
	if err != nil || r.Seq != 5 {
		t.Fatalf("%+v, %v", r, err)
	}
	if _, err := rd.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("after the writer closed: %v", err)
	}
	if st := rd.Stats(); st.Records != 3 || st.Lost != 2 || st.Gaps != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestReaderCancel(t *testing.T) {
	rd, w := fifo(t, Options{})

	// Blocked with nothing to read: cancelling returns promptly.
	ctx, cancel := context.WithCancel(context.Background())
	ch := nextAsync(ctx, rd)
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case res := <-ch:
		if !errors.Is(res.err, context.Canceled) {
			t.Errorf("Next after cancel: %+v", res)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("cancel took %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after cancel")
	}
	// An already cancelled context returns at once.
	if _, err := rd.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}

	// A deadline works the same way.
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	if _, err := rd.Next(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}

	// The reader still works afterwards with a fresh context.
	ch = nextAsync(context.Background(), rd)
	time.Sleep(20 * time.Millisecond)
	w.WriteString("6,7,1,-;after cancel\n")
	select {
	case res := <-ch:
		if res.err != nil || res.rec.Message != "after cancel" {
			t.Errorf("%+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no record after cancel")
	}

	// Close unblocks a pending Next.
	ch = nextAsync(context.Background(), rd)
	time.Sleep(20 * time.Millisecond)
	rd.Close()
	select {
	case res := <-ch:
		if !errors.Is(res.err, os.ErrClosed) {
			t.Errorf("Next after Close: %v", res.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Next")
	}

	// Regular files have no deadlines; cancellation is seen between
	// records.
	f, err := Open(filepath.Join("testdata", "sample.kmsg"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cctx, ccancel := context.WithCancel(context.Background())
	if _, err := f.Next(cctx); err != nil {
		t.Fatal(err)
	}
	ccancel()
	if _, err := f.Next(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("regular file after cancel: %v", err)
	}
}

func TestReaderFIFOMergeWait(t *testing.T) {
	rd, w := fifo(t, Options{MergeContinuations: true, ContinuationWait: 30 * time.Millisecond, DictWait: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.WriteString("6,1,1,-,caller=T1;Booting CPUs:\n4,2,2,c,caller=T1; #1 #2\n")
	// The pipe stays open: the merged record must still come, once no
	// further fragment arrives within ContinuationWait.
	r, err := rd.Next(ctx)
	if err != nil || r.Message != "Booting CPUs: #1 #2" || r.LastSeq != 2 {
		t.Fatalf("%+v, %v", r, err)
	}
	w.WriteString("6,3,3,-;alone\n")
	r, err = rd.Next(ctx)
	if err != nil || r.Message != "alone" {
		t.Fatalf("%+v, %v", r, err)
	}
}

// The real device, when this machine lets us read it.
func TestReaderDevice(t *testing.T) {
	f, err := os.Open(DefaultDevice)
	if err != nil {
		t.Skipf("%s not readable here: %v", DefaultDevice, err)
	}
	f.Close()
	var bad []string
	var mu sync.Mutex
	rd, err := Open("", Options{OnMalformed: func(raw []byte, err error) {
		mu.Lock()
		bad = append(bad, err.Error())
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if rd.framing != FramingRecord || rd.dl == nil {
		t.Fatalf("device: framing %v, deadlines %v", rd.framing, rd.dl != nil)
	}
	// Drain what is there, then block until the timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var recs []Record
	for {
		r, err := rd.Next(ctx)
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next: %v", err)
			}
			break
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		t.Skip("the kernel log is empty")
	}
	st := rd.Stats()
	t.Logf("read %d records from %s, seq %d..%d; stats %+v", len(recs), DefaultDevice, recs[0].Seq, recs[len(recs)-1].Seq, st)
	if len(bad) > 0 {
		t.Errorf("malformed records on the real device: %v", bad)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq <= recs[i-1].Seq {
			t.Errorf("seq %d after %d", recs[i].Seq, recs[i-1].Seq)
		}
	}
	if recs[0].Time.IsZero() {
		t.Error("no wall-clock time")
	}

	// Resuming after the last record read delivers nothing old.
	last := recs[len(recs)-1].Seq
	if err := rd.SeekAfter(last - 1); err != nil {
		t.Fatal(err)
	}
	r, err := rd.Next(context.Background())
	if err != nil || r.Seq != last {
		t.Errorf("after SeekAfter(%d): %+v, %v", last-1, r, err)
	}

	// StartEnd and StartAfterClear open.
	for _, s := range []Start{StartEnd, StartAfterClear} {
		e, err := Open("", Options{Start: s})
		if err != nil {
			t.Errorf("Start %d: %v", s, err)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		if s == StartEnd {
			if r, err := e.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("StartEnd delivered %+v, %v (a new kernel message may have arrived)", r, err)
			}
		}
		cancel()
		e.Close()
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(filepath.Join("testdata", "sample.kmsg"), Options{Start: StartAfterClear}); err == nil {
		t.Error("StartAfterClear on a regular file should fail")
	}
	if _, err := Open(filepath.Join("testdata", "sample.kmsg"), Options{Start: Start(42)}); err == nil {
		t.Error("unknown Start should fail")
	}
	rd, err := Open(filepath.Join("testdata", "sample.kmsg"), Options{Start: StartEnd})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if _, err := rd.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("StartEnd on a file: %v", err)
	}
}
