package logline

import "testing"

func TestParse(t *testing.T) {
	cases := []struct {
		raw    string
		format Format
		origin Origin
		msg    string
	}{
		{"[  903.609564] NVRM: RmInitAdapter failed!", FormatDmesg, OriginKernel, "NVRM: RmInitAdapter failed!"},
		{"[   36.764462][  T291] pcieport 0000:00:00.0: AER: x", FormatDmesg, OriginKernel, "pcieport 0000:00:00.0: AER: x"},
		{"[Tue Feb 14 18:48:25 2023] mlx5_core 0000:02:00.0 ens2f0np0: Link down", FormatDmesg, OriginKernel, "mlx5_core 0000:02:00.0 ens2f0np0: Link down"},
		{"<4>[  201.670809] Oops: 0002 [#1] SMP", FormatDmesg, OriginKernel, "Oops: 0002 [#1] SMP"},
		{"6,3973,227996636,-;nvidia-peermem nv_get_p2p_free_callback:127 ERROR", FormatKmsg, OriginKernel, "nvidia-peermem nv_get_p2p_free_callback:127 ERROR"},
		{"4,120,5000,c,caller=T12;NVRM: Xid (PCI:0000:01:00): 13, x", FormatKmsg, OriginKernel, "NVRM: Xid (PCI:0000:01:00): 13, x"},
		{"14,1,2,-;systemd[1]: hello", FormatKmsg, OriginUnknown, "systemd[1]: hello"},
		{" SUBSYSTEM=pci", FormatDict, OriginKernel, ""},
		{"Oct 30 09:49:36 pc kernel: NVRM: GPU 0000:03:00.0: GPU has fallen off the bus.", FormatSyslog, OriginKernel, "NVRM: GPU 0000:03:00.0: GPU has fallen off the bus."},
		{"May 11 10:54:31 localhost kernel: [26825.855448] INFO: task x:1 blocked", FormatSyslog, OriginKernel, "INFO: task x:1 blocked"},
		{"Sep 18 03:19:01 ubuntu2404 systemd[1]: nvidia-fabricmanager.service: Failed", FormatSyslog, OriginUnknown, "nvidia-fabricmanager.service: Failed"},
		{"2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer: gfp_mask=0x6200ca", FormatDmesg, OriginKernel, "pool invoked oom-killer: gfp_mask=0x6200ca"},
		{"kern  :warn  : 2025-01-21T04:41:44,283575+00:00 NVRM: Xid (PCI:0000:38:00): 13, x", FormatDmesg, OriginKernel, "NVRM: Xid (PCI:0000:38:00): 13, x"},
		{"2024-01-02T03:04:05.123456789Z stderr F NCCL WARN x", FormatCRI, OriginPod, "NCCL WARN x"},
		{"2024-01-02T03:04:05.123456789+00:00 stdout P partial", FormatCRI, OriginPod, "partial"},
		{"[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] x", FormatPlain, OriginUnknown, "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] x"},
		{"kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", FormatPlain, OriginKernel, "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."},
		{"RuntimeError: CUDA error: an illegal memory access was encountered", FormatPlain, OriginUnknown, "RuntimeError: CUDA error: an illegal memory access was encountered"},
	}
	for _, c := range cases {
		p := Parse(c.raw)
		if p.Format != c.format || p.Origin != c.origin || p.Message != c.msg {
			t.Errorf("Parse(%q) = %+v, want format %s origin %q message %q", c.raw, p, c.format, c.origin, c.msg)
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
