package sources

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/faultline-dev/faultline/rules/printf"
)

// A made-up driver exercising what the extractor must handle: pr_fmt, string
// macros, adjacent literals, levels, comments, multi-line calls, function names,
// calls in macro bodies.
const sample = `
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt
#define dev_fmt pr_fmt
#define DEMO_PFX "demo: "

/* pr_err("in a comment") */
static int demo_probe(struct pci_dev *pdev,
		      const struct pci_device_id *id)
{
	// dev_err(&pdev->dev, "commented out\n");
	dev_err(&pdev->dev, "probe failed, err %d\n", err);
	dev_info(&pdev->dev, "info is not listed\n");
	dev_warn(&pdev->dev, "I/O %d QID %d timeout, aborting\n", tag, qid);
	netdev_info(netdev, "NIC Link is Down\n");
	printk(KERN_ERR DEMO_PFX "bad state 0x%" PRIx64 "\n", st);
	printk(KERN_INFO DEMO_PFX "not listed\n");
	if (x) {
		mlx5_core_err(dev, "cmd %s(0x%x) timeout\n",
			      name, op);
	}
	return 0;
}

void
other_fn(void)
{
	pr_crit("a \"quoted\" word, (parens) and commas\n");
	NV_PRINTF(LEVEL_ERROR, "GSP RM heartbeat timed out\n");
	NV_PRINTF(LEVEL_INFO, "not listed\n");
	NV_PRINTF(LEVEL_WARNING, "a warning is listed\n");
	dev_err(dev, fmt_variable, a);
	xfs_alert_tag(mp, XFS_PTAG_SHUTDOWN, "Please umount the filesystem");
#if 0
	pr_err("never compiled\n");
#endif
}

#define DEMOCHECK(cmd) do {				\
	int err = cmd;					\
	if (err) {					\
		pr_err("demo check failed: %d\n", err);	\
		return err;				\
	}						\
} while (0)
#define DEMO_LOUD(x) pr_info("not listed either\n")
static void demo_cqe(int log_level) { ucs_log(log_level, "%s on %s:%d\n", err, dev, port); }
static void demo_rport(struct device *dev) { dev_printk(KERN_ERR, dev, "rport time out\n"); dev_printk(KERN_DEBUG, dev, "not listed\n"); }
#define demo_printk(level, fmt, arg...) \
	edac_printk(level, "demo fmt", fmt, ##arg)
#define demo_mc_printk(mci, level, fmt, ...) do { edac_mc_chipset_printk(mci, level, "demo", fmt, __VA_ARGS__); } while (0)
static void demo_mce(void) { demo_printk(KERN_ERR, "HANDLING MCE MEMORY ERROR\n"); demo_printk(KERN_DEBUG, "not listed\n");
	demo_mc_printk(mci, KERN_WARNING, "CPU %d: Machine Check Event: %u\n", cpu, bank); }
#define DM_MSG_PREFIX "multipath"
static void demo_path(void) { DMWARN("Failing path %s.", name); }
`

func TestExtract(t *testing.T) {
	x, err := Extract("drivers/demo/demo.c", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	msgs := x.Messages
	if x.Prefix != "demo: " || x.DevPrefix != "demo: " {
		t.Errorf("prefix %q, dev prefix %q, want %q (pr_fmt with KBUILD_MODNAME, dev_fmt as pr_fmt)", x.Prefix, x.DevPrefix, "demo: ")
	}
	want := []Message{
		{Line: 11, Call: "dev_err", Level: "err", Func: "demo_probe", Format: "probe failed, err %d\n"},
		{Line: 13, Call: "dev_warn", Level: "warn", Func: "demo_probe", Format: "I/O %d QID %d timeout, aborting\n"},
		{Line: 14, Call: "netdev_info", Level: "info", Func: "demo_probe", Format: "NIC Link is Down\n"},
		{Line: 15, Call: "printk", Level: "err", Func: "demo_probe", Format: "demo: bad state 0x%llx\n"},
		{Line: 18, Call: "mlx5_core_err", Level: "err", Func: "demo_probe", Format: "cmd %s(0x%x) timeout\n"},
		{Line: 27, Call: "pr_crit", Level: "crit", Func: "other_fn", Format: "a \"quoted\" word, (parens) and commas\n"},
		{Line: 28, Call: "NV_PRINTF", Level: "err", Func: "other_fn", Format: "GSP RM heartbeat timed out\n"},
		{Line: 30, Call: "NV_PRINTF", Level: "warn", Func: "other_fn", Format: "a warning is listed\n"},
		{Line: 32, Call: "xfs_alert_tag", Level: "alert", Func: "other_fn", Format: "Please umount the filesystem"},
		{Line: 41, Call: "pr_err", Level: "err", Func: "DEMOCHECK", Format: "demo check failed: %d\n"},
		{Line: 46, Call: "ucs_log", Level: "err", Func: "demo_cqe", Format: "%s on %s:%d\n"},
		{Line: 47, Call: "dev_printk", Level: "err", Func: "demo_rport", Format: "rport time out\n"},
		// A driver's own wrappers are read as the calls they expand to.
		{Line: 51, Call: "edac_printk(demo fmt)", Level: "err", Func: "demo_mce", Format: "HANDLING MCE MEMORY ERROR\n"},
		{Line: 52, Call: "edac_mc_chipset_printk(demo)", Level: "warn", Func: "demo_mce", Format: "CPU %d: Machine Check Event: %u\n"},
		// device-mapper's macros carry the target's prefix.
		{Line: 54, Call: "DMWARN(multipath)", Level: "warn", Func: "demo_path", Format: "Failing path %s."},
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("Extract:\n got %+v\nwant %+v", msgs, want)
	}
}

func TestExtractLimits(t *testing.T) {
	if _, err := Extract("big.c", make([]byte, MaxSource+1)); err == nil {
		t.Error("a file over the size limit was read")
	}
	if _, err := Extract("x.c", []byte("void f(void) { dev_err(d, \"x\"; }")); err == nil {
		t.Error("an unbalanced call was accepted")
	}
}

// TestMergeVersions merges two versions of a file: an unchanged wording is one
// entry listing both versions, a changed one an entry per wording, a changed
// pr_fmt makes every pr_err format of that version a wording of its own, and
// re-extracting a version replaces what it printed.
func TestMergeVersions(t *testing.T) {
	v6 := "#define pr_fmt(fmt) \"nvme: \" fmt\nvoid f(void) {\n\tpr_err(\"controller is down\\n\");\n\tdev_warn(d, \"I/O tag %d timeout, aborting\\n\", t);\n}\n"
	v5 := "void f(void) {\n\tpr_err(\"controller is down\\n\");\n\tdev_warn(d, \"I/O %d QID %d timeout, aborting\\n\", t, q);\n}\n"
	inv := &Inventory{Project: "linux", File: "drivers/nvme/host/core.c", Source: "kernel"}
	for _, v := range []struct{ version, src string }{{"v5.10.262", v5}, {"v6.12.117", v6}, {"v6.1.192", v6}} {
		x, err := Extract(inv.File, []byte(v.src))
		if err != nil {
			t.Fatal(err)
		}
		inv.Merge(Version{Version: v.version}, x, NewestFirst)
	}
	var got []string
	for _, m := range inv.Messages {
		got = append(got, fmt.Sprintf("%s %q %v", m.Call, m.Format, m.Versions))
	}
	want := []string{
		`pr_err "controller is down\n" [v6.12.117 v6.1.192]`,
		`dev_warn "I/O tag %d timeout, aborting\n" [v6.12.117 v6.1.192]`,
		`pr_err "controller is down\n" [v5.10.262]`,
		`dev_warn "I/O %d QID %d timeout, aborting\n" [v5.10.262]`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged:\n got %q\nwant %q", got, want)
	}
	if vs := []string{inv.Versions[0].Version, inv.Versions[1].Version, inv.Versions[2].Version}; !reflect.DeepEqual(vs, []string{"v6.12.117", "v6.1.192", "v5.10.262"}) {
		t.Errorf("versions %v, want newest first", vs)
	}
	x, err := Extract(inv.File, []byte(v5))
	if err != nil {
		t.Fatal(err)
	}
	inv.Merge(Version{Version: "v6.1.192"}, x, NewestFirst)
	if n := len(inv.Messages); n != 4 || !reflect.DeepEqual(inv.Messages[2].Versions, []string{"v6.1.192", "v5.10.262"}) {
		t.Errorf("re-extracting v6.1.192 with v5.10's text: %+v", inv.Messages)
	}
	if err := inv.Drop("v6.1.192"); err != nil {
		t.Fatal(err)
	}
	if len(inv.Versions) != 2 || len(inv.Messages) != 4 || !reflect.DeepEqual(inv.Messages[0].Versions, []string{"v6.12.117"}) {
		t.Errorf("after dropping v6.1.192: %+v %+v", inv.Versions, inv.Messages)
	}
	if err := inv.Drop("v1"); err == nil {
		t.Error("dropping an unknown version was accepted")
	}
}

func TestVersionLess(t *testing.T) {
	ordered := []string{"v4.18.0", "v5.4.0", "v5.10.262", "v6.1.192", "v6.12.117", "v7.2"}
	for i := 1; i < len(ordered); i++ {
		if !VersionLess(ordered[i-1], ordered[i]) || VersionLess(ordered[i], ordered[i-1]) {
			t.Errorf("%s < %s does not hold", ordered[i-1], ordered[i])
		}
	}
	if !VersionLess("535.288.01", "595.45.04") || !VersionLess("v2.29.7-1", "v2.30.7-1") || VersionLess("v1.22.0", "v1.22.0") {
		t.Error("driver or library versions misordered")
	}
}

// TestExtractNodeTools: the printing calls of node daemons and tools, with their
// levels: syslog and syslog_device take the level first, rasdaemon's log() second.
func TestExtractNodeTools(t *testing.T) {
	src := `
void f(void)
{
	syslog(LOG_ERR, "Failed to open %s: %s", path, strerror(errno));
	syslog(LOG_INFO, "not listed");
	syslog_device(&dev->pci_info, LOG_WARNING, "Could not Enable UVM Persistence mode : 0x%x", st);
	log(ALL, LOG_ERR, "Cannot access mc_event ce trigger ` + "`%s`" + `\n", trigger);
	Eprintf("Cannot open pidfile ` + "`%s'" + `", pidfile);
	Wprintf("Hardware event. This is not a software error.\n");
	error("Detected %u oom-kill event(s) in %ps.", n, &step_id);
	info("not listed either");
	EFA_WARN(FI_LOG_CQ, "Unable to poll CQ: %s\n", fi_strerror(-ret));
	verbs_err(verbs_get_ctx(ctx), "Failed to create QP\n");
}
`
	x, err := Extract("tool.c", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range x.Messages {
		got = append(got, fmt.Sprintf("%s %s %q", m.Call, m.Level, m.Format))
	}
	want := []string{
		`syslog err "Failed to open %s: %s"`,
		`syslog_device warn "Could not Enable UVM Persistence mode : 0x%x"`,
		"log err \"Cannot access mc_event ce trigger `%s`\\n\"",
		"Eprintf err \"Cannot open pidfile `%s'\"",
		`Wprintf warn "Hardware event. This is not a software error.\n"`,
		`error err "Detected %u oom-kill event(s) in %ps."`,
		`EFA_WARN err "Unable to poll CQ: %s\n"`,
		`verbs_err err "Failed to create QP\n"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Extract:\n got %q\nwant %q", got, want)
	}
}

// TestExtractCxx reads PyTorch's C++ messages: TORCH_CHECK and friends join their
// message arguments (c10::str inside them too), LOG(ERROR) streams join their
// operands; runtime values are %s and a literal % is doubled; a message variable
// is read from the c10::str it was built with.
func TestExtractCxx(t *testing.T) {
	const src = `namespace c10d {
void ProcessGroupNCCL::watchdog() {
  TORCH_CHECK(ok, "NCCL communicator was aborted on rank ", rank_, ".");
  TORCH_CHECK_WITH(DistBackendError, false, c10::str("Timeout at ", 100, "%"));
  TORCH_WARN("watchdog is ", "slow");
  LOG(ERROR) << logPrefix() << "Heartbeat monitor timed out! " << n;
  LOG(INFO) << "not listed";
  TORCH_CHECK(cond);
  std::string msg = c10::str("[Rank ", rank_, "] Watchdog caught collective operation timeout: ", *this);
  LOG(ERROR) << msg;
  C10_THROW_ERROR(DistBackendError, msg + e.what() + ". This may indicate a network set up issue.");
}
}
#define C10D_ASSERT(cmd) do { \
    fprintf(                  \
        stderr,               \
        "NCCL error in: %s\n", \
        f);                   \
  } while (0)
`
	x, err := Extract("torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range x.Messages {
		got = append(got, fmt.Sprintf("%d %s %s %q", m.Line, m.Call, m.Level, m.Format))
	}
	want := []string{
		`3 TORCH_CHECK err "NCCL communicator was aborted on rank %s."`,
		`4 TORCH_CHECK_WITH err "Timeout at %s%%"`,
		`5 TORCH_WARN warn "watchdog is slow"`,
		`6 LOG(ERROR) err "%sHeartbeat monitor timed out! %s"`,
		`10 LOG(ERROR) err "[Rank %s] Watchdog caught collective operation timeout: %s"`,
		`11 C10_THROW_ERROR err "[Rank %s] Watchdog caught collective operation timeout: %s%s. This may indicate a network set up issue."`,
		`15 fprintf warn "NCCL error in: %s\n"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Extract:\n got %q\nwant %q", got, want)
	}
	for _, m := range x.Messages {
		if !printf.KnownCall(m.Call) || !printf.UserCall(m.Call) {
			t.Errorf("%s: not a known user-space call", m.Call)
		}
	}
}

// TestExtractNvkms reads nvidia-modeset's logging calls: the level argument picks
// the entry's level and is kept in the call, since nvkms_log prints its word.
func TestExtractNvkms(t *testing.T) {
	src := `static void f(NVDevEvoPtr pDevEvo)
{
    nvEvoLogDev(pDevEvo, EVO_LOG_ERROR,
                "Idling display engine timed out: 0x%08x:%d:%d:%d", a, b, c, d);
    nvEvoLogDisp(pDispEvo, EVO_LOG_WARN, "HDMI FRL link training failed.");
    nvEvoLogDev(pDevEvo, EVO_LOG_INFO, "informational");
}
`
	extractWant(t, "src/nvidia-modeset/src/nvkms-demo.c", src, []Message{
		{Line: 3, Call: "nvEvoLogDev(EVO_LOG_ERROR)", Level: "err", Func: "f", Format: "Idling display engine timed out: 0x%08x:%d:%d:%d"},
		{Line: 5, Call: "nvEvoLogDisp(EVO_LOG_WARN)", Level: "warn", Func: "f", Format: "HDMI FRL link training failed."},
	})
	for call, prefix := range map[string]string{
		"nvEvoLogDev(EVO_LOG_ERROR)": "nvidia-modeset: ERROR: GPU:0: ",
		"nvEvoLogDisp(EVO_LOG_WARN)": "nvidia-modeset: WARNING: GPU:0: ",
		"nvEvoLog(EVO_LOG_ERROR)":    "nvidia-modeset: ERROR: ",
	} {
		if got, err := printf.Prefix(call, "f", "", "nvkms-demo.c", 0); err != nil || got != prefix {
			t.Errorf("Prefix(%s) = %q, %v; want %q", call, got, err, prefix)
		}
	}
}

// TestExtractNcclOfi reads aws-ofi-nccl's NCCL_OFI_WARN, which NCCL's logger prints
// as a NCCL WARN with "NET/OFI " before the format.
func TestExtractNcclOfi(t *testing.T) {
	src := `int f(void)
{
	NCCL_OFI_WARN("Couldn't open AV. RC: %d, ERROR: %s", ret, fi_strerror(-ret));
}
`
	extractWant(t, "src/nccl_ofi_ofiutils.cpp", src, []Message{{Line: 3, Call: "NCCL_OFI_WARN", Level: "err", Func: "f", Format: "Couldn't open AV. RC: %d, ERROR: %s"}})
	if p, err := printf.Prefix("NCCL_OFI_WARN", "f", "", "src/nccl_ofi_ofiutils.cpp", 0); err != nil || p != "gpu-node-7:12345:12400 [3] NCCL WARN NET/OFI " {
		t.Errorf("Prefix(NCCL_OFI_WARN) = %q, %v", p, err)
	}
}

// TestWriteKeepsPrefixWithoutFrom writes a version that has a pr_fmt prefix but no
// "from" (an extract run without -from) and reads it back: the prefix, trailing
// space included, survives, and writing does not fail.
func TestWriteKeepsPrefixWithoutFrom(t *testing.T) {
	dir := t.TempDir()
	inv := &Inventory{
		Project: "linux", File: "drivers/iommu/intel/dmar.c", Source: "kernel",
		Versions: []Version{{Version: "v6.8.0", Prefix: "DMAR: "}, {Version: "v5.15.135", From: "a tree", Prefix: "DMAR: "}},
		Messages: []Message{{Line: 1, Call: "pr_err", Level: "err", Format: "fault\n", Versions: []string{"v6.8.0", "v5.15.135"}, Ignore: "a test message"}},
	}
	p := filepath.Join(dir, "linux__dmar.c.yaml")
	if err := Write(p, inv); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Versions) != 2 {
		t.Fatalf("read back %d inventories: %+v", len(got), got)
	}
	for _, v := range got[0].Versions {
		if v.Prefix != "DMAR: " {
			t.Errorf("version %s: prefix %q, want %q", v.Version, v.Prefix, "DMAR: ")
		}
	}
}

// extractWant extracts file's src and fails the test unless the messages are want.
func extractWant(t *testing.T, file, src string, want []Message) {
	t.Helper()
	x, err := Extract(file, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(x.Messages, want) {
		t.Errorf("Extract:\n got %+v\nwant %+v", x.Messages, want)
	}
}

// TestExtractLustre: Lustre's debug macros, with the level their mask prints at;
// a mask held in a variable is read from what the function assigns it; debug-only
// masks are not listed. Prefix renders what libcfs prints before each on the console.
func TestExtractLustre(t *testing.T) {
	src := `int ptlrpc_expire_one_request(struct ptlrpc_request *req, int async_unlink)
{
	unsigned int debug_mask = D_RPCTRACE;

	if (allow)
		debug_mask = D_WARNING;
	DEBUG_REQ(debug_mask, req, "Request sent has %s: [sent %lld/real %lld]",
		  "timed out for slow reply", req->rq_sent, req->rq_real_sent);
	CERROR("%s: connection lost\n", name);
	CDEBUG(D_HA, "not listed: %d\n", rc);
	LCONSOLE_ERROR_MSG(0x166, "%s: operation %s to node %s failed: rc = %d\n", a, b, c, rc);
	CDEBUG(D_CONSOLE | D_WARNING, "%s: evicted\n", name);
	CWARN("%s: slow\n", name);
}
`
	extractWant(t, "lustre/ptlrpc/client.c", src, []Message{
		{Line: 7, Call: "DEBUG_REQ(D_WARNING)", Level: "warn", Func: "ptlrpc_expire_one_request", Format: "Request sent has %s: [sent %lld/real %lld]"},
		{Line: 9, Call: "CERROR", Level: "err", Func: "ptlrpc_expire_one_request", Format: "%s: connection lost\n"},
		{Line: 11, Call: "LCONSOLE_ERROR_MSG(0x166)", Level: "err", Func: "ptlrpc_expire_one_request", Format: "%s: operation %s to node %s failed: rc = %d\n"},
		{Line: 12, Call: "CDEBUG(D_CONSOLE|D_WARNING)", Level: "warn", Func: "ptlrpc_expire_one_request", Format: "%s: evicted\n"},
		{Line: 13, Call: "CWARN", Level: "warn", Func: "ptlrpc_expire_one_request", Format: "%s: slow\n"},
	})
	for _, c := range []struct{ call, file, want string }{
		{"DEBUG_REQ(D_WARNING)", "lustre/ptlrpc/client.c", "Lustre: 12345:0:(client.c:210:f()) @@@ "},
		{"CERROR", "lustre/ptlrpc/import.c", "LustreError: 12345:0:(import.c:210:f()) "},
		{"CERROR", "lnet/klnds/o2iblnd/o2iblnd_cb.c", "LNetError: 12345:0:(o2iblnd_cb.c:210:f()) "},
		{"CNETERR", "lnet/lnet/lib-move.c", "LNet: 12345:0:(lib-move.c:210:f()) "},
		{"LCONSOLE_ERROR_MSG(0x166)", "lustre/ptlrpc/client.c", "LustreError: 166-1: "},
		{"LCONSOLE_ERROR_MSG(0x11)", "lustre/ptlrpc/client.c", "LustreError: 11-0: "},
		{"LCONSOLE_ERROR", "lustre/obdclass/obd_mount.c", "LustreError: 0-0: "},
		{"CDEBUG(D_CONSOLE|D_WARNING)", "lustre/ldlm/ldlm_lockd.c", "Lustre: "},
	} {
		if p, err := printf.Prefix(c.call, "f", "", c.file, 0); err != nil || p != c.want {
			t.Errorf("Prefix(%s, %s) = %q, %v; want %q", c.call, c.file, p, err, c.want)
		}
	}
}
