package printf

import (
	"strings"
	"testing"
)

func TestInstantiate(t *testing.T) {
	cases := []struct {
		format  string
		variant int
		fixed   map[int]string
		want    string
	}{
		{"NVRM: GPU at PCI:%04x:%02x:%02x: %s\n", 0, nil, "NVRM: GPU at PCI:001f:1f:1f: Resource temporarily unavailable\n"},
		{"NVRM: Xid (PCI:%04x:%02x:%02x): %d, %s", 0, map[int]string{4: "79"}, "NVRM: Xid (PCI:001f:1f:1f): 79, eth2"},
		{"100%% done, %u left", 1, nil, "100% done, 4294967295 left"},
		{"addr %pI4 mac %pM: %pS", 0, nil, "addr 192.168.1.10 mac b8:59:9f:aa:bb:cc: mlx5_cmd_exec+0x2c/0x50 [mlx5_core]"},
		{"%-6s|%5d|%#x|%llx", 0, nil, "mlx5_0|    4|0x1f|1f"},
		{"%*s[%.*s]", 0, nil, "  mlx5_0[timeout]"},
		{"%08x %-3d", 1, nil, "deadbeef -110"},
		{"%06d", 1, nil, "-00110"},
		{"status:%#06x", 0, nil, "status:0x001f"},
		{"%04x:%02x:%02x.%x", 1, nil, "beef:ef:ef.deadbeef"},
		{"ptr %p, %pfoo", 0, nil, "ptr 00000000a1b2c3d4, 00000000a1b2c3d4foo"},
		// %*ph and its separators print the bytes themselves, the width their count.
		{"CDB %16phN : hardware error", 0, nil, "CDB 00112233445566778899aabbccddeeff : hardware error"},
		{"sense %4ph|%3phC|%2phD|%*phN|%phN", 0, nil, "sense 00 11 22 33|00:11:22|00-11|0011223344556677|00"},
	}
	for _, c := range cases {
		got, err := Instantiate(c.format, c.variant, c.fixed)
		if err != nil {
			t.Fatalf("%q: %v", c.format, err)
		}
		if got.Text != c.want {
			t.Errorf("Instantiate(%q, %d) = %q, want %q", c.format, c.variant, got.Text, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, f := range []string{"trailing %", "bad %k verb", "no verb %ll", strings.Repeat("x", MaxFormat+1)} {
		if _, err := Parse(f); err == nil {
			t.Errorf("Parse(%.20q) accepted a broken format", f)
		}
	}
}

func TestExpand(t *testing.T) {
	in, err := Instantiate("GPU %04x:%02x:%02x.%x lost, status %d", 0, map[int]string{5: "-5"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Expand("$1:$2:$3.$4 ($5)", in.Values)
	if err != nil || got != "001f:1f:1f.1f (-5)" {
		t.Errorf("Expand = %q, %v", got, err)
	}
	if _, err := Expand("$6", in.Values); err == nil {
		t.Error("Expand accepted $6 for five conversions")
	}
}

// TestUserSpacePrefixes: what the printing calls of node tools print before the format.
func TestUserSpacePrefixes(t *testing.T) {
	cases := []struct {
		call, fn, file string
		variant        int
		want           string
	}{
		{"error", "", "src/slurmd/slurmstepd/req.c", 0, "slurmstepd: error: "},
		{"error", "", "src/slurmd/slurmd/req.c", 1, "[2026-11-23T19:26:50.123] error: "},
		{"Eprintf", "", "mcelog.c", 0, "mcelog: "},
		{"log", "", "ras-mc-handler.c", 0, "rasdaemon: "},
		{"syslog_device", "", "nvidia-persistenced.c", 0, "device 0000:3b:00.0 - "},
		{"EFA_WARN", "efa_cq_handle_error", "prov/efa/src/efa_cq.c", 0, "libfabric:12345:1732394000::efa:cq:efa_cq_handle_error():210<warn> "},
		{"verbs_err", "efa_create_qp", "providers/efa/verbs.c", 0, "rdmap16s27: efa_create_qp:210: "},
	}
	for _, c := range cases {
		got, err := Prefix(c.call, c.fn, "", c.file, c.variant)
		if err != nil || got != c.want {
			t.Errorf("Prefix(%s, %s) = %q, %v; want %q", c.call, c.file, got, err, c.want)
		}
		if !UserCall(c.call) {
			t.Errorf("%s is not a user-space call", c.call)
		}
	}
}

// TestEDACPrefixes: the EDAC core's printing macros, and a driver's wrappers, which
// the extractor records with the driver's name.
func TestEDACPrefixes(t *testing.T) {
	cases := []struct{ call, want string }{
		{"edac_printk", "EDAC MC: "},
		{"edac_printk(sbridge)", "EDAC sbridge: "},
		{"edac_mc_chipset_printk(sbridge)", "EDAC sbridge MC0: "},
		{"edac_mc_printk", "EDAC MC0: "},
		{"edac_device_printk", "EDAC DEVICE0: "},
		{"edac_pci_printk", "EDAC PCI0: "},
		// device-mapper's macros, with the target's prefix the extractor records.
		{"DMERR(multipath)", "device-mapper: multipath: "},
		{"DMWARN_LIMIT(thin)", "device-mapper: thin: "},
		{"DMERR", "device-mapper: "},
	}
	for _, c := range cases {
		got, err := Prefix(c.call, "", "", "drivers/edac/sb_edac.c", 0)
		if err != nil || got != c.want {
			t.Errorf("Prefix(%s) = %q, %v; want %q", c.call, got, err, c.want)
		}
	}
}

// TestDRMPrefixes: DRM's printk macros as the amdgpu, i915 and nouveau drivers print them.
func TestDRMPrefixes(t *testing.T) {
	cases := []struct{ call, fn, prFmt, file, want string }{
		{"DRM_ERROR", "amdgpu_job_timedout", "", "drivers/gpu/drm/amd/amdgpu/amdgpu_job.c", "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* "},
		{"DRM_WARN", "", "", "drivers/gpu/drm/amd/amdgpu/amdgpu_device.c", "[drm] "},
		{"dev_err", "", "amdgpu: ", "drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c", "amdgpu 0000:c3:00.0: amdgpu: "},
		// The device macros of 5.8 and later, i915's GT and GuC ones, amdgpu's display core.
		{"drm_err", "", "", "drivers/gpu/drm/i915/gt/intel_reset.c", "i915 0000:00:02.0: [drm] *ERROR* "},
		{"drm_notice", "", "", "drivers/gpu/drm/i915/gt/intel_reset.c", "i915 0000:00:02.0: [drm] "},
		{"gt_notice", "", "", "drivers/gpu/drm/i915/gt/intel_reset.c", "i915 0000:00:02.0: [drm] GT0: "},
		{"gt_err", "", "", "drivers/gpu/drm/i915/gt/intel_reset.c", "i915 0000:00:02.0: [drm] *ERROR* GT0: "},
		{"guc_err", "", "", "drivers/gpu/drm/i915/gt/uc/intel_guc_submission.c", "i915 0000:00:02.0: [drm] *ERROR* GT0: GUC: "},
		{"DC_ERROR", "", "", "drivers/gpu/drm/amd/display/dc/dc_dmub_srv.c", "amdgpu 0000:c3:00.0: [drm] *ERROR* "},
		// nouveau's nvkm_error: the GPU, then the subdevice or engine the file is of.
		{"nvkm_error", "", "", "drivers/gpu/drm/nouveau/nvkm/engine/fifo/gf100.c", "nouveau 0000:01:00.0: fifo: "},
		{"nvkm_warn", "", "", "drivers/gpu/drm/nouveau/nvkm/subdev/mmu/base.c", "nouveau 0000:01:00.0: mmu: "},
	}
	for _, c := range cases {
		got, err := Prefix(c.call, c.fn, c.prFmt, c.file, 0)
		if err != nil || got != c.want {
			t.Errorf("Prefix(%s, %s) = %q, %v; want %q", c.call, c.file, got, err, c.want)
		}
	}
}

// TestDevicePrefixOldPaths: a driver's lines name the driver in its file's pre-3.2
// path too (drivers/net/ixgbe/ before drivers/net/ethernet/intel/ixgbe/), not a
// generic PCI device.
func TestDevicePrefixOldPaths(t *testing.T) {
	for _, c := range []struct{ call, file, want string }{
		{"dev_err", "drivers/net/ethernet/intel/ixgbe/ixgbe_main.c", "ixgbe 0000:01:00.0: "},
		{"dev_err", "drivers/net/ixgbe/ixgbe_main.c", "ixgbe 0000:01:00.0: "},
		{"dev_err", "drivers/net/mlx5/core/main.c", "mlx5_core 0000:3b:00.0: "},
		{"netdev_err", "drivers/net/igb/igb_main.c", "igb 0000:02:00.0 eno1: "},
		{"dev_err", "drivers/block/nvme-core.c", "nvme 0000:01:00.0: "},
		{"dev_err", "drivers/net/tg3.c", "pci 0000:3b:00.0: "},
	} {
		if p, err := Prefix(c.call, "f", "", c.file, 0); err != nil || p != c.want {
			t.Errorf("Prefix(%s, %s) = %q, %v; want %q", c.call, c.file, p, err, c.want)
		}
	}
}
