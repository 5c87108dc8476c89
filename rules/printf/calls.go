package printf

import (
	"fmt"
	"strings"
)

// Printing functions and macros add a prefix before the format they are given:
// dev_err the driver and device, mlx5_core_err the function and line, NV_PRINTF
// "NVRM: " and the function. The prefixes below are what each prints, with a
// realistic device; a source entry names its call, and the generated line starts
// with the prefix that call prints.
var (
	plainCalls = words(`printk pr_emerg pr_alert pr_crit pr_err pr_warn pr_warning pr_notice pr_info
		pr_emerg_ratelimited pr_err_ratelimited pr_warn_ratelimited pr_crit_ratelimited pr_alert_ratelimited pr_err_once
		pr_warn_once pr_info_once pr_info_ratelimited pr_notice_ratelimited pr_cont printk_ratelimited printk_once printk_deferred
		nv_printf nvDbg_Printf portDbgPrintf NV_PRINTF_STRING nvswitch_os_print ucs_log_fatal_error
		fprintf printf mlx5_err log_unit_struct syslog SYSLOG_VERBOSE Wprintf Gprintf Lprintf`)
	// DRM's printk macros: DRM_WARN and DRM_INFO print "[drm] ", DRM_ERROR the
	// caller as %ps prints it (function and module) and "*ERROR* ".
	drmCalls = words(`DRM_ERROR DRM_WARN DRM_INFO DRM_NOTE`)
	// DRM's device macros since 5.8 (include/drm/drm_print.h __drm_printk):
	// dev_<level> of the DRM device with "[drm] " first, drm_err's "*ERROR* " after
	// it; i915's gt_err and friends (intel_gt_print.h, 6.5 and later) add "GT%u: ".
	// guc_err and friends (intel_guc_print.h) add "GUC: " after that; amdgpu's
	// display core logs its errors through DC_ERROR and DC_LOG_ERROR, drm_err.
	drmDevCalls = words(`drm_err drm_warn drm_notice drm_info drm_err_once drm_warn_once
		drm_err_ratelimited drm_notice_once drm_info_once gt_err gt_warn gt_notice gt_info
		gt_err_ratelimited gt_warn_once gt_notice_ratelimited guc_err guc_warn guc_notice guc_info
		guc_err_ratelimited DC_ERROR DC_LOG_ERROR`)
	// nouveau's nvkm_error and friends (nvkm/core/subdev.h): dev_<level> of the GPU
	// with the subdevice's name first ("fifo: ", "gr: ").
	nvkmCalls = words(`nvkm_error nvkm_warn nvkm_info nvkm_error_ratelimited`)
	devCalls  = words(`dev_emerg dev_alert dev_crit dev_err dev_warn dev_notice dev_info
		dev_err_ratelimited dev_warn_ratelimited dev_err_once dev_warn_once dev_crit_ratelimited
		dev_alert_ratelimited dev_info_ratelimited dev_notice_ratelimited dev_err_probe
		pci_emerg pci_alert pci_crit pci_err pci_warn pci_notice pci_info pci_err_ratelimited
		pci_warn_ratelimited pci_info_ratelimited dev_printk pci_printk e_dev_err e_dev_warn e_dev_info
		ctrl_err ctrl_warn ctrl_info`)
	netdevCalls = words(`netdev_emerg netdev_alert netdev_crit netdev_err netdev_warn netdev_notice
		netdev_info netdev_err_once netdev_warn_once netdev_printk net_err_ratelimited e_err e_warn e_info
		netdev_info_once e_crit netif_emerg netif_alert netif_crit netif_err netif_warn netif_notice netif_info`)
	mlx5FuncCalls = words(`mlx5_core_err mlx5_core_err_rl mlx5_core_warn mlx5_core_warn_rl
		mlx5_core_warn_once mlx5_core_dbg`)
)

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// Device names by the driver a source file belongs to (dev_err prints "driver device: ").
var devices = []struct{ path, dev, netdev string }{
	{"mellanox/mlx5", "mlx5_core 0000:3b:00.0", "mlx5_core 0000:3b:00.0 eth2"},
	{"mellanox/mlx4", "mlx4_core 0000:5e:00.0", "mlx4_en 0000:5e:00.0 eth3"},
	// The paths of the Ethernet drivers before Linux 3.2 moved them under a vendor.
	{"drivers/net/mlx5/", "mlx5_core 0000:3b:00.0", "mlx5_core 0000:3b:00.0 eth2"},
	{"drivers/net/mlx4/", "mlx4_core 0000:5e:00.0", "mlx4_en 0000:5e:00.0 eth3"},
	{"drivers/net/ixgbe/", "ixgbe 0000:01:00.0", "ixgbe 0000:01:00.0 eth2"},
	{"drivers/net/i40e/", "i40e 0000:3b:00.0", "i40e 0000:3b:00.0 eth2"},
	{"drivers/net/igb/", "igb 0000:02:00.0", "igb 0000:02:00.0 eno1"},
	{"drivers/net/bnxt/", "bnxt_en 0000:3b:00.0", "bnxt_en 0000:3b:00.0 eno1np0"},
	{"drivers/block/nvme", "nvme 0000:01:00.0", ""},
	{"infiniband/hw/mlx5", "mlx5_core 0000:3b:00.0", "mlx5_core 0000:3b:00.0 eth2"},
	{"infiniband/ulp/ipoib", "mlx5_core 0000:3b:00.0", "ib0"},
	{"infiniband/core", "mlx5_core 0000:3b:00.0", "ib0"},
	{"intel/ixgbe", "ixgbe 0000:01:00.0", "ixgbe 0000:01:00.0 eth2"},
	{"intel/i40e", "i40e 0000:3b:00.0", "i40e 0000:3b:00.0 eth2"},
	{"intel/igb", "igb 0000:02:00.0", "igb 0000:02:00.0 eno1"},
	{"intel/igc", "igc 0000:05:00.0", "igc 0000:05:00.0 enp5s0"},
	{"intel/ice", "ice 0000:17:00.0", "ice 0000:17:00.0 ens1f0"},
	{"broadcom/bnxt", "bnxt_en 0000:3b:00.0", "bnxt_en 0000:3b:00.0 eno1np0"},
	{"amazon/ena", "ena 0000:00:05.0", "ena 0000:00:05.0 eth0"},
	{"ethernet/sfc", "sfc 0000:06:00.0", "sfc 0000:06:00.0 ens1f0np0"},
	{"intel/e1000/", "e1000 0000:00:03.0", "e1000 0000:00:03.0 eth0"},
	{"infiniband/hw/efa", "efa 0000:00:06.0", "efa 0000:00:06.0 eth1"},
	{"drm/amd", "amdgpu 0000:c3:00.0", ""},
	{"drm/i915", "i915 0000:00:02.0", ""},
	{"drm/nouveau", "nouveau 0000:01:00.0", ""},
	{"drivers/nvme", "nvme nvme0", "nvme0"},
	{"drivers/pci", "pcieport 0000:00:01.0", ""},
	{"drivers/net/bonding", "bond0", "bond0"},
	// The host adapters print on their PCI device; the SCSI core on the disk.
	{"drivers/scsi/hpsa", "hpsa 0000:03:00.0", ""},
	{"drivers/block/cciss", "cciss 0000:06:00.0", ""},
	{"drivers/scsi/megaraid", "megaraid_sas 0000:61:00.0", ""},
	{"drivers/scsi/smartpqi", "smartpqi 0000:89:00.0", ""},
	{"drivers/scsi/mpt3sas", "mpt3sas 0000:02:00.0", ""},
	{"drivers/scsi/aacraid", "aacraid 0000:04:00.0", ""},
	{"drivers/scsi", "sd 0:0:0:0", ""},
	{"drivers/ata", "ata1.00", ""},
	{"drivers/edac", "EDAC MC0", ""},
	{"", "pci 0000:3b:00.0", "eth2"},
}

// nvkmSubdev is the name nouveau prints for the subdevice or engine a file of
// nvkm/subdev/<name>/ or nvkm/engine/<name>/ belongs to.
func nvkmSubdev(file string) string {
	for _, dir := range []string{"/nvkm/subdev/", "/nvkm/engine/"} {
		if i := strings.Index(file, dir); i >= 0 {
			name, _, _ := strings.Cut(file[i+len(dir):], "/")
			return name
		}
	}
	return "nvkm"
}

func device(file string) (dev, netdev string) {
	for _, d := range devices {
		if strings.Contains(file, d.path) {
			return d.dev, d.netdev
		}
	}
	return "", ""
}

// DeviceCall reports whether call prints a device (dev_err, pci_err, netdev_err),
// so that a file's dev_fmt, not its pr_fmt, comes before the format.
func DeviceCall(call string) bool {
	return devCalls[call] || netdevCalls[call] || drmDevCalls[call] || nvkmCalls[call]
}

// UserCall reports whether call prints from a user-space program (UCX, NCCL, a
// tool's printf) rather than from the kernel.
func UserCall(call string) bool {
	return userCalls[call] || strings.HasPrefix(call, "ucs_")
}

var userCalls = words(`WARN INFO TRACE NCCL_OFI_WARN printf fprintf mlx5_err ucs_log_fatal_error log_unit_struct
	syslog SYSLOG_VERBOSE syslog_device SYSLOG_DEVICE_VERBOSE Wprintf Gprintf Lprintf Eprintf SYSERRprintf
	log error fatal warning info EFA_WARN EFA_WARN_ONCE FI_WARN FI_WARN_ONCE FI_WARN_SPARSE verbs_err verbs_warn
	TORCH_CHECK TORCH_CHECK_WITH C10_THROW_ERROR TORCH_WARN TORCH_WARN_ONCE LOG(FATAL) LOG(ERROR) LOG(WARNING)`)

// KnownCall reports whether Prefix knows what call prints before its format.
func KnownCall(call string) bool {
	_, err := Prefix(call, "f", "", "x.c", 0)
	return err == nil
}

// Prefix returns the text that call prints before its format, in file and function
// fn, given the file's pr_fmt for pr_* calls or its dev_fmt for dev_* calls.
func Prefix(call, fn, prFmt, file string, variant int) (string, error) {
	if fn == "" {
		fn = "rm_function"
	}
	pr := func() (string, error) {
		in, err := Instantiate(prFmt, variant, nil)
		return in.Text, err
	}
	dev, netdev := device(file)
	if mask, ok := LustreMask(call); ok {
		return lustrePrefix(call, mask, fn, file, variant), nil
	}
	switch {
	case call == "" || plainCalls[call]:
		return pr()
	case call == "panic":
		return "Kernel panic - not syncing: ", nil
	case drmCalls[call]:
		if call != "DRM_ERROR" {
			return "[drm] ", nil
		}
		module := "drm"
		if strings.Contains(file, "drm/amd/") {
			module = "amdgpu"
		}
		return "[drm:" + fn + " [" + module + "]] *ERROR* ", nil
	case drmDevCalls[call]:
		p := dev + ": [drm] "
		if strings.Contains(strings.ToLower(call), "err") {
			p += "*ERROR* "
		}
		if strings.HasPrefix(call, "gt_") || strings.HasPrefix(call, "guc_") {
			p += "GT0: "
		}
		if strings.HasPrefix(call, "guc_") {
			p += "GUC: "
		}
		return p, nil
	case nvkmCalls[call]:
		return dev + ": " + nvkmSubdev(file) + ": ", nil
	case devCalls[call]:
		// A file that defines dev_fmt prints it after the device (prFmt is then it).
		p, err := pr()
		return dev + ": " + p, err
	case netdevCalls[call]:
		p, err := pr()
		return netdev + ": " + p, err
	case mlx5FuncCalls[call]:
		return fmt.Sprintf("%s: %s:%d:(pid %d): ", dev, fn, 1042+variant, 2611+variant), nil
	case call == "mlx5_core_info" || call == "mlx5_core_info_rl":
		return dev + ": ", nil
	case strings.HasPrefix(call, "mlx4_"):
		return "mlx4_core 0000:5e:00.0: ", nil
	case strings.HasPrefix(call, "ipoib_"):
		return "ib0: ", nil
	case strings.HasPrefix(call, "ibdev_"):
		return dev + " mlx5_0: ", nil
	case call == "NV_PRINTF" || call == "NV_PRINTF_EX" || call == "NV_ERROR_LOG":
		// RmMsgPrefix: "NVRM: ", then the GPU instance when known, then the function.
		if variant%2 == 1 {
			return "NVRM: GPU0 " + fn + ": ", nil
		}
		return "NVRM: " + fn + ": ", nil
	case call == "NV_ERROR_LOG_DATA" || call == "NV_ERROR_LOG_COND":
		// NV_PRINTF_ADD_PREFIX: "NVRM: ", no function.
		return "NVRM: ", nil
	case call == "NV_DEV_PRINTF" || call == "NV_DEV_PRINTF_STATUS":
		return "NVRM: GPU 0000:3b:00.0: ", nil
	case strings.HasPrefix(call, "nvEvoLog"):
		// nvkms_log: "nvidia-modeset: ", the level's word, then "GPU:%d: " for a
		// device's or display's message (nvVEvoLog); the call carries its level.
		lvl := "ERROR: "
		if strings.Contains(call, "EVO_LOG_WARN") {
			lvl = "WARNING: "
		} else if strings.Contains(call, "EVO_LOG_INFO") {
			lvl = ""
		}
		if strings.HasPrefix(call, "nvEvoLog(") || call == "nvEvoLog" {
			return "nvidia-modeset: " + lvl, nil
		}
		return "nvidia-modeset: " + lvl + "GPU:0: ", nil
	case strings.HasPrefix(call, "xfs_"):
		return "XFS (sda1): ", nil
	case call == "TORCH_CHECK" || call == "TORCH_CHECK_WITH" || call == "C10_THROW_ERROR":
		// PyTorch raises the message; Python prints the exception's type before it.
		return "RuntimeError: ", nil
	case call == "TORCH_WARN" || call == "TORCH_WARN_ONCE" || call == "LOG(FATAL)" || call == "LOG(ERROR)" || call == "LOG(WARNING)":
		// c10's glog-style prefix: level letter, date, time, file:line; TORCH_WARN adds "Warning: ".
		lvl, warn := map[string]string{"LOG(FATAL)": "F", "LOG(ERROR)": "E"}[call], ""
		if lvl == "" {
			lvl = "W"
		}
		if strings.HasPrefix(call, "TORCH_WARN") {
			warn = "Warning: "
		}
		base := file[strings.LastIndexByte(file, '/')+1:]
		return fmt.Sprintf("[%s1127 06:46:14.%09d %s:%d] %s", lvl, 408271257+variant, base, 607+variant, warn), nil
	case call == "WARN" || call == "INFO" || call == "TRACE":
		return fmt.Sprintf("gpu-node-7:%d:%d [%d] NCCL %s ", 12345+variant, 12400+variant, 3+variant, call), nil
	case call == "NCCL_OFI_WARN":
		// aws-ofi-nccl passes "NET/OFI " fmt to NCCL's logger at WARN.
		return fmt.Sprintf("gpu-node-7:%d:%d [%d] NCCL WARN NET/OFI ", 12345+variant, 12400+variant, 3+variant), nil
	case call == "ucs_error" || call == "ucs_warn" || call == "ucs_fatal" || call == "ucs_diag" || call == "ucs_log":
		// UCS_LOG_FMT: time, [host:pid:thread], file:line, component, level.
		lvl := map[string]string{"ucs_error": "ERROR", "ucs_log": "ERROR", "ucs_warn": "WARN", "ucs_fatal": "FATAL", "ucs_diag": "DIAG"}[call]
		base := file[strings.LastIndexByte(file, '/')+1:]
		return fmt.Sprintf("[1732394000.%06d] [gpu-node-7:%-5d:%d] %17s:%-4d %-4s %-5s ", 123456+variant, 12345+variant, variant, base, 179+variant, "UCX", lvl), nil
	case strings.HasPrefix(call, "ata_dev_"):
		return "ata1.00: ", nil
	case strings.HasPrefix(call, "ata_link_") || strings.HasPrefix(call, "ata_port_"):
		return "ata1: ", nil
	case named(call, "edac_printk") != "":
		// A driver's wrapper names it: edac_printk(sbridge) prints "EDAC sbridge: ".
		return "EDAC " + named(call, "edac_printk") + ": ", nil
	case named(call, "edac_mc_chipset_printk") != "":
		return "EDAC " + named(call, "edac_mc_chipset_printk") + " MC0: ", nil
	case call == "edac_printk":
		return "EDAC MC: ", nil
	case strings.HasPrefix(call, "DMERR") || strings.HasPrefix(call, "DMWARN") || strings.HasPrefix(call, "DMCRIT"):
		// device-mapper's macros: "device-mapper: ", the target's DM_MSG_PREFIX
		// (recorded on the call: DMERR(multipath)) and ": ".
		base, _, _ := strings.Cut(call, "(")
		if target := named(call, base); target != "" {
			return "device-mapper: " + target + ": ", nil
		}
		return "device-mapper: ", nil
	case call == "edac_device_printk":
		return "EDAC DEVICE0: ", nil
	case call == "edac_pci_printk":
		return "EDAC PCI0: ", nil
	case strings.HasPrefix(call, "edac_mc_"):
		return "EDAC MC0: ", nil
	case strings.HasPrefix(call, "sdev_") || strings.HasPrefix(call, "scmd_"):
		return "sd 0:0:0:0: [sda] ", nil
	case strings.HasPrefix(call, "shost_"):
		return "scsi host0: ", nil
	case call == "sd_printk":
		return "sd 0:0:0:0: [sda] ", nil
	case call == "ext4_msg":
		return "EXT4-fs (sda1): ", nil
	case call == "ext4_warning":
		return "EXT4-fs warning (device sda1): " + fn + ":1580: ", nil
	case call == "ext4_warning_inode":
		return "EXT4-fs warning (device sda1): " + fn + ":1580: inode #12: comm kworker/u16:3: ", nil
	case call == "ext4_error" || call == "ext4_error_err" || call == "ext4_abort":
		return "EXT4-fs error (device sda1): " + fn + ":1580: comm kworker/u16:3: ", nil
	case call == "ext4_error_file" || call == "EXT4_ERROR_FILE":
		return "EXT4-fs error (device sda1): " + fn + ":1580: inode #12: comm python3: path /data/x: ", nil
	case strings.HasPrefix(call, "ext4_error_inode") || strings.HasPrefix(call, "EXT4_ERROR_INODE"):
		return "EXT4-fs error (device sda1): " + fn + ":1580: inode #12: comm kworker/u16:3: ", nil
	case call == "slave_err" || call == "slave_warn" || call == "slave_info":
		return "bond0: (slave eth2): ", nil
	case call == "Eprintf" || call == "SYSERRprintf":
		// mcelog's errors on stderr (through syslog, the tag is the program's name).
		return "mcelog: ", nil
	case call == "log":
		// rasdaemon's log(): syslog, and stderr after the tool's name.
		return "rasdaemon: ", nil
	case call == "syslog_device" || call == "SYSLOG_DEVICE_VERBOSE":
		// nvidia-persistenced names the device before the message.
		return "device 0000:3b:00.0 - ", nil
	case call == "error" || call == "fatal" || call == "warning" || call == "info":
		// Slurm's log: the level, after the daemon's time in its log file, or after
		// "slurmstepd: " in a job's output.
		lvl := map[string]string{"error": "error: ", "fatal": "fatal: ", "warning": "warning: ", "info": ""}[call]
		step := strings.Contains(file, "slurmstepd")
		switch {
		case variant%2 == 1 && step:
			return "[2026-11-23T19:26:50.123] [1234.batch] " + lvl, nil
		case variant%2 == 1:
			return "[2026-11-23T19:26:50.123] " + lvl, nil
		case step:
			return "slurmstepd: " + lvl, nil
		}
		return lvl, nil
	case strings.HasPrefix(call, "EFA_WARN") || strings.HasPrefix(call, "FI_WARN"):
		// libfabric's fi_log: package:pid:time:prefix:provider:subsystem:func():line<level>.
		prov := "core"
		if i := strings.Index(file, "prov/"); i >= 0 {
			prov, _, _ = strings.Cut(file[i+len("prov/"):], "/")
		}
		return fmt.Sprintf("libfabric:%d:%d::%s:cq:%s():%d<warn> ", 12345+variant, 1732394000+variant, prov, fn, 210+variant), nil
	case call == "verbs_err" || call == "verbs_warn":
		// rdma-core's verbs_log: the device, the function and the line.
		dev := "mlx5_0"
		if strings.Contains(file, "providers/efa") {
			dev = "rdmap16s27"
		}
		return fmt.Sprintf("%s: %s:%d: ", dev, fn, 210+variant), nil
	}
	return "", fmt.Errorf("unknown printing call %q", call)
}

// named returns the name a call was recorded with ("sbridge" of
// edac_printk(sbridge)), or "" when call is not base with a name.
func named(call, base string) string {
	rest, ok := strings.CutPrefix(call, base+"(")
	if !ok || !strings.HasSuffix(rest, ")") {
		return ""
	}
	return strings.TrimSuffix(rest, ")")
}

// Message instantiates what call prints with format: its prefix, then the format
// filled with generated values (Values hold the format's conversions only).
func Message(call, fn, prFmt, file, format string, variant int, fixed map[int]string) (Instance, error) {
	p, err := Prefix(call, fn, prFmt, file, variant)
	if err != nil {
		return Instance{}, err
	}
	in, err := Instantiate(format, variant, fixed)
	if err != nil {
		return Instance{}, err
	}
	in.Text = p + in.Text
	return in, nil
}

// Lines splits a printed message into the log lines it becomes: printk ends a
// record at each newline.
func Lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}
