package logline

import (
	"testing"
	"time"
)

var parseCases = []struct {
	raw    string
	format Format
	origin Origin
	msg    string
}{
	{"[  903.609564] NVRM: RmInitAdapter failed!", FormatDmesg, OriginKernel, "NVRM: RmInitAdapter failed!"},
	{"[   36.764462][  T291] pcieport 0000:00:00.0: AER: x", FormatDmesg, OriginKernel, "pcieport 0000:00:00.0: AER: x"},
	{"[Tue Feb 14 18:48:25 2023] mlx5_core 0000:02:00.0 ens2f0np0: Link down", FormatDmesg, OriginKernel, "mlx5_core 0000:02:00.0 ens2f0np0: Link down"},
	{"<4>[  201.670809] Oops: 0002 [#1] SMP", FormatDmesg, OriginKernel, "Oops: 0002 [#1] SMP"},
	{"[999999999.000001] x", FormatDmesg, OriginKernel, "x"},
	// Ten digits of seconds are no uptime but UCX's wall-clock time stamp.
	{"[1641387609.196524] [n-62-31-9:181277:0]         dc_mlx5.c:505  UCX  ERROR x", FormatPlain, OriginUnknown, "[1641387609.196524] [n-62-31-9:181277:0]         dc_mlx5.c:505  UCX  ERROR x"},
	{"Jan  5 13:00:09 n-62 python[181277]: [1641387609.196524] [n-62:181277:0] x", FormatSyslog, OriginUnknown, "[1641387609.196524] [n-62:181277:0] x"},
	{"6,3973,227996636,-;nvidia-peermem nv_get_p2p_free_callback:127 ERROR", FormatKmsg, OriginKernel, "nvidia-peermem nv_get_p2p_free_callback:127 ERROR"},
	{"4,120,5000,c,caller=T12;NVRM: Xid (PCI:0000:01:00): 13, x", FormatKmsg, OriginKernel, "NVRM: Xid (PCI:0000:01:00): 13, x"},
	{"14,1,2,-;systemd[1]: hello", FormatKmsg, OriginUnknown, "hello"},
	{"14,1,2,-;hello", FormatKmsg, OriginUnknown, "hello"},
	{" SUBSYSTEM=pci", FormatDict, OriginKernel, ""},
	{"Oct 30 09:49:36 pc kernel: NVRM: GPU 0000:03:00.0: GPU has fallen off the bus.", FormatSyslog, OriginKernel, "NVRM: GPU 0000:03:00.0: GPU has fallen off the bus."},
	{"May 11 10:54:31 localhost kernel: [26825.855448] INFO: task x:1 blocked", FormatSyslog, OriginKernel, "INFO: task x:1 blocked"},
	{"Sep 18 03:19:01 ubuntu2404 systemd[1]: nvidia-fabricmanager.service: Failed", FormatSyslog, OriginUnknown, "nvidia-fabricmanager.service: Failed"},
	{"Nov 23 10:00:00 gpu-7 WARN kernel: x", FormatSyslog, OriginKernel, "x"},
	{"2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer: gfp_mask=0x6200ca", FormatDmesg, OriginKernel, "pool invoked oom-killer: gfp_mask=0x6200ca"},
	{"kern  :warn  : 2025-01-21T04:41:44,283575+00:00 NVRM: Xid (PCI:0000:38:00): 13, x", FormatDmesg, OriginKernel, "NVRM: Xid (PCI:0000:38:00): 13, x"},
	// An RFC 3339 time with a dot is no dmesg time (dmesg writes a decimal comma): a
	// shipper's or kubectl --timestamps' prefix, taken off, naming no origin.
	{"2025-11-24T03:20:21.001128133Z gpu-server320 [5] NCCL INFO misc/socket.cc:64 -> 6", FormatPlain, OriginUnknown, "gpu-server320 [5] NCCL INFO misc/socket.cc:64 -> 6"},
	{"2025-01-16T17:24:58.390Z <TASK>", FormatPlain, OriginUnknown, "<TASK>"},
	{"2024-01-02T03:04:05.123456789Z stderr F NCCL WARN x", FormatCRI, OriginPod, "NCCL WARN x"},
	{"2024-01-02T03:04:05.123456789+00:00 stdout P partial", FormatCRI, OriginPod, "partial"},
	{"[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] x", FormatPlain, OriginUnknown, "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] x"},
	{"kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", FormatPlain, OriginKernel, "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."},
	{"Mar 21 21:43:00 kernel: NVRM: GPU0 _kgspProcessRpcEvent: x", FormatSyslog, OriginKernel, "NVRM: GPU0 _kgspProcessRpcEvent: x"},
	{"RuntimeError: CUDA error: an illegal memory access was encountered", FormatPlain, OriginUnknown, "RuntimeError: CUDA error: an illegal memory access was encountered"},
	// A program's journal line pasted without its date and host: its tag goes, as
	// under a syslog prefix.
	{"mcelog[808]: Hardware event. This is not a software error.", FormatPlain, OriginUnknown, "Hardware event. This is not a software error."},
	{"slurmstepd[21034]: error: Detected 1 oom_kill event in StepId=4242.batch.", FormatPlain, OriginUnknown, "error: Detected 1 oom_kill event in StepId=4242.batch."},
	{"rasdaemon[1337]: rasdaemon: Can't write to set_event", FormatPlain, OriginUnknown, "rasdaemon: Can't write to set_event"},
	{"nv-fabricmanager[1929]:x", FormatPlain, OriginUnknown, "x"},
	// The kernel's own lines that name a task the same way stay whole.
	{"pt_main_thread[40711]: segfault at 7f31c0000000 ip 00007f35a2c1d8b6 sp 00007f34f7ffd9c0 error 4 in libnccl.so.2[7f35a2a00000+1e3d000]", FormatPlain, OriginUnknown, "pt_main_thread[40711]: segfault at 7f31c0000000 ip 00007f35a2c1d8b6 sp 00007f34f7ffd9c0 error 4 in libnccl.so.2[7f35a2a00000+1e3d000]"},
	{"python3[4001]: unhandled exception: DABT (current EL), ESR 0x92000004", FormatPlain, OriginUnknown, "python3[4001]: unhandled exception: DABT (current EL), ESR 0x92000004"},
	{"kernel: python3[4001]: segfault at 0 ip 0 sp 0 error 4", FormatPlain, OriginKernel, "python3[4001]: segfault at 0 ip 0 sp 0 error 4"},
	{"[  12.000001] python3[4001]: segfault at 0 ip 0 sp 0 error 4", FormatDmesg, OriginKernel, "python3[4001]: segfault at 0 ip 0 sp 0 error 4"},
	{"4,120,5000,-;python3[4001]: segfault at 0 ip 0 sp 0 error 4", FormatKmsg, OriginKernel, "python3[4001]: segfault at 0 ip 0 sp 0 error 4"},
	// Not a tag: no pid, a space in the name, a bracket first.
	{"mcelog: failed to prefill DIMM database", FormatPlain, OriginUnknown, "mcelog: failed to prefill DIMM database"},
	{"Web Content[88]: x", FormatPlain, OriginUnknown, "Web Content[88]: x"},
	{"[rank7]:[E626 05:14:36.393067540 ProcessGroupNCCL.cpp:1743] x", FormatPlain, OriginUnknown, "[rank7]:[E626 05:14:36.393067540 ProcessGroupNCCL.cpp:1743] x"},
}

// programCases: the program a line names, under every prefix that names one.
var programCases = []struct{ raw, program string }{
	{"Nov  3 10:01:02 gpu-7 slurmstepd[1234]: error: x", "slurmstepd"},
	{"mcelog[808]: MCE 0", "mcelog"},
	{"14,1,2,-;systemd[1]: hello", "systemd"},
	{"kernel: x", "kernel"},
	{"pt_main_thread[40711]: segfault at 0 ip 0 sp 0 error 4", ""},
	{"6,1,2,-;nvidia[1]: x", ""},
}

func TestParseProgram(t *testing.T) {
	for _, c := range programCases {
		if p := Parse(c.raw); p.Program != c.program {
			t.Errorf("Parse(%q).Program = %q, want %q", c.raw, p.Program, c.program)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range parseCases {
		p := Parse(c.raw)
		if p.Format != c.format || p.Origin != c.origin || p.Message != c.msg {
			t.Errorf("Parse(%q) = %+v, want format %s origin %q message %q", c.raw, p, c.format, c.origin, c.msg)
		}
	}
}

func utc(y int, m time.Month, d, hh, mm, ss, ns int) time.Time {
	return time.Date(y, m, d, hh, mm, ss, ns, time.UTC)
}

// timeCases: the line's own time and host under every supported prefix.
var timeCases = []struct {
	name   string
	raw    string
	clock  Clock
	time   time.Time
	uptime time.Duration
	host   string
	msg    string
}{
	{"raw dmesg", "[  123.456789] eth0: Link down", ClockBoot, time.Time{}, 123456789 * time.Microsecond, "", "eth0: Link down"},
	{"raw dmesg, empty fraction", "[  999.] INFO: task x", ClockBoot, time.Time{}, 999 * time.Second, "", "INFO: task x"},
	{"dmesg with caller id", "[   36.764462][  T291] x", ClockBoot, time.Time{}, 36764462 * time.Microsecond, "", "x"},
	{"console level and dmesg", "<4>[  201.670809] Oops", ClockBoot, time.Time{}, 201670809 * time.Microsecond, "", "Oops"},
	{"dmesg -T", "[Mon Nov 23 10:00:00 2026] eth0: Link down", ClockWall, utc(2026, 11, 23, 10, 0, 0, 0), 0, "", "eth0: Link down"},
	{"dmesg -T, day padded", "[Thu Nov  5 10:00:00 2026] x", ClockWall, utc(2026, 11, 5, 10, 0, 0, 0), 0, "", "x"},
	{"dmesg -T, German", "[Di Okt 14 18:48:25 2025] x", ClockWall, utc(2025, 10, 14, 18, 48, 25, 0), 0, "", "x"},
	{"dmesg -T, French", "[mar. déc.  3 10:00:00 2026] x", ClockWall, utc(2026, 12, 3, 10, 0, 0, 0), 0, "", "x"},
	{"syslog short", "Nov 23 10:00:00 gpu-7 kernel: eth0: Link down", ClockWallNoYear, utc(0, 11, 23, 10, 0, 0, 0), 0, "gpu-7", "eth0: Link down"},
	{"syslog short, day padded", "Nov  3 10:00:00 gpu-7 kernel: x", ClockWallNoYear, utc(0, 11, 3, 10, 0, 0, 0), 0, "gpu-7", "x"},
	{"syslog, German Okt", "Okt 23 10:00:00 gpu-7 kernel: x", ClockWallNoYear, utc(0, 10, 23, 10, 0, 0, 0), 0, "gpu-7", "x"},
	{"syslog, German Mär", "Mär  3 10:00:00 gpu-7 kernel: x", ClockWallNoYear, utc(0, 3, 3, 10, 0, 0, 0), 0, "gpu-7", "x"},
	{"syslog, French déc.", "déc. 23 10:00:00 gpu-7 kernel: x", ClockWallNoYear, utc(0, 12, 23, 10, 0, 0, 0), 0, "gpu-7", "x"},
	{"syslog, Spanish", "dic 23 10:00:00 gpu-7 kernel: x", ClockWallNoYear, utc(0, 12, 23, 10, 0, 0, 0), 0, "gpu-7", "x"},
	{"syslog, unknown month: no time", "Foo 23 10:00:00 gpu-7 kernel: x", ClockNone, time.Time{}, 0, "gpu-7", "x"},
	{"syslog wins over the dmesg time inside", "May 11 10:54:31 gpu-7 kernel: [26825.855448] x", ClockWallNoYear, utc(0, 5, 11, 10, 54, 31, 0), 0, "gpu-7", "x"},
	{"journal short-precise", "Nov 23 10:00:00.123456 gpu-7 kernel: x", ClockWallNoYear, utc(0, 11, 23, 10, 0, 0, 123456000), 0, "gpu-7", "x"},
	{"journal short-iso-precise / RFC 3339", "2026-11-23T10:00:00.123456+01:00 gpu-7 kernel: x", ClockWall, utc(2026, 11, 23, 9, 0, 0, 123456000), 0, "gpu-7", "x"},
	{"journal short-iso", "2026-11-23T10:00:00+0100 gpu-7 kernel: x", ClockWall, utc(2026, 11, 23, 9, 0, 0, 0), 0, "gpu-7", "x"},
	{"RFC 3339 UTC", "2026-11-23T10:00:00Z gpu-7 kernel: x", ClockWall, utc(2026, 11, 23, 10, 0, 0, 0), 0, "gpu-7", "x"},
	{"dmesg --time-format iso", "2026-11-23T10:00:00,283575-02:00 NVRM: x", ClockWall, utc(2026, 11, 23, 12, 0, 0, 283575000), 0, "", "NVRM: x"},
	{"a shipper's RFC 3339 prefix", "2026-11-23T10:00:00.5Z NCCL INFO x", ClockWall, utc(2026, 11, 23, 10, 0, 0, 500000000), 0, "", "NCCL INFO x"},
	{"kmsg record", "6,3964,206764307,-;NVRM: x", ClockBoot, time.Time{}, 206764307 * time.Microsecond, "", "NVRM: x"},
	{"CRI pod log", "2026-11-23T10:00:00.5Z stderr F NCCL WARN x", ClockWall, utc(2026, 11, 23, 10, 0, 0, 500000000), 0, "", "NCCL WARN x"},
	{"application ISO", "2026-11-23 10:00:00,250 - trainer - INFO - Saving", ClockWall, utc(2026, 11, 23, 10, 0, 0, 250000000), 0, "", "2026-11-23 10:00:00,250 - trainer - INFO - Saving"},
	{"application ISO after a level", "INFO 2026-11-23T10:00:00Z rank 3 x", ClockWall, utc(2026, 11, 23, 10, 0, 0, 0), 0, "", "INFO 2026-11-23T10:00:00Z rank 3 x"},
	{"no time", "RuntimeError: CUDA error", ClockNone, time.Time{}, 0, "", "RuntimeError: CUDA error"},
	{"impossible date: no time", "2026-13-45T10:00:00Z gpu-7 kernel: x", ClockNone, time.Time{}, 0, "gpu-7", "x"},
}

func TestParseTime(t *testing.T) {
	for _, c := range timeCases {
		p := Parse(c.raw)
		if p.Clock != c.clock || !p.Time.Equal(c.time) || p.Uptime != c.uptime || p.Host != c.host || p.Message != c.msg {
			t.Errorf("%s: Parse(%q) = clock %d time %v uptime %v host %q message %q; want clock %d time %v uptime %v host %q message %q",
				c.name, c.raw, p.Clock, p.Time, p.Uptime, p.Host, p.Message, c.clock, c.time, c.uptime, c.host, c.msg)
		}
	}
}

// FuzzParseLine: any input parses without panic, and the message is a suffix of the
// line (prefix removal never invents text).
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"[  1.0] x", "6,1,2,-;x", " KEY=v", "Oct 30 09:49:36 h kernel: x", "2024-01-02T03:04:05Z stdout F x", "<4>[1.0] x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p := Parse(raw)
		if p.Continuation {
			return
		}
		if len(p.Message) > len(raw) || raw[len(raw)-len(p.Message):] != p.Message && trimmed(raw)[len(trimmed(raw))-len(p.Message):] != p.Message {
			t.Fatalf("message %q is not a suffix of %q", p.Message, raw)
		}
	})
}

func trimmed(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

func BenchmarkParse(b *testing.B) {
	lines := []string{
		"Nov 23 10:00:00 gpu-001 kernel: [1000.081000] cni0: port 3(veth4aa2) entered blocking state",
		"[  903.609564] NVRM: RmInitAdapter failed!",
		"2026-11-23T10:00:00.123456+01:00 gpu-7 kernel: x",
		"6,3964,206764307,-;NVRM: x",
	}
	for i := 0; i < b.N; i++ {
		_ = Parse(lines[i%len(lines)])
	}
}

// TestDateMatchesTimeDate: the day counting agrees with time.Date over four
// centuries either side of the epoch, leap days and year 0 included.
func TestDateMatchesTimeDate(t *testing.T) {
	for y := -400; y <= 2400; y += 7 {
		for m := 1; m <= 12; m++ {
			for _, d := range []int{1, 15, 28, 29, 31} {
				want := time.Date(y, time.Month(m), d, 13, 14, 15, 16, time.UTC).Add(-3600 * time.Second)
				if got := date(y, m, d, 13, 14, 15, 16, 3600); !got.Equal(want) {
					t.Fatalf("date(%d-%02d-%02d) = %v, want %v", y, m, d, got, want)
				}
			}
		}
	}
	// Year 0 (syslog dates) has a table of its own: every day, and days past a
	// month's end, which roll over.
	for m := 1; m <= 12; m++ {
		for d := 1; d <= 31; d++ {
			if got, want := date(0, m, d, 1, 2, 3, 0, 0), time.Date(0, time.Month(m), d, 1, 2, 3, 0, time.UTC); !got.Equal(want) {
				t.Fatalf("date(0000-%02d-%02d) = %v, want %v", m, d, got, want)
			}
		}
	}
	if got := date(0, 2, 29, 0, 0, 0, 0, 0); got.Month() != time.February || got.Day() != 29 {
		t.Errorf("year 0 is a leap year: %v", got)
	}
}

// TestParserIsParse: a Parser, which reuses the last syslog date it read, parses
// every line of a sequence as Parse does: repeated dates, dates that only grow a
// fraction or a digit, other shapes between them.
func TestParserIsParse(t *testing.T) {
	lines := []string{
		"Nov 23 00:00:01 gpu-001 kernel: [1.000001] a",
		"Nov 23 00:00:01 gpu-002 kernel: [1.000002] b",
		"Nov 23 00:00:01.5 gpu-002 kernel: c", // same text, then a fraction
		"Nov 23 00:00:01.52 gpu-002 kernel: d",
		"Nov 23 00:00:01.52 gpu-003 kernel: e",
		"Nov 23 00:00:011 gpu-003 kernel: f", // one digit more: no syslog date
		"Nov 23 00:00:01",                    // the date alone
		"Nov 23 00:00:01\tgpu-004 kernel: g", // a tab after it
		"Nov 23 00:00:02 gpu-001 kernel: h",
		"Dec 31 23:59:59 gpu-001 kernel: i",
		"Jan  1 00:00:00 gpu-001 kernel: j",
		"Jan  1 00:00:00 gpu-001 kernel: j",
		"janv.  1 00:00:00 gpu-001 kernel: k",
		"Janvier 1 00:00:00 gpu-001 kernel: l",
	}
	for _, c := range parseCases {
		lines = append(lines, c.raw, lines[0])
	}
	var pr Parser
	for _, raw := range lines {
		got := Parsed{Format: FormatCRI, Host: "left from the line before", Clock: ClockBoot, Continuation: true}
		if pr.Parse(raw, &got); got != Parse(raw) {
			t.Fatalf("Parser.Parse(%q) = %+v, Parse: %+v", raw, got, Parse(raw))
		}
	}
	if pr.n == 0 {
		t.Fatal("the parser remembered no date: the test does not exercise it")
	}
}
