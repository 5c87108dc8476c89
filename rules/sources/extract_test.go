package sources

import (
	"reflect"
	"testing"
)

// A made-up driver exercising what the extractor must handle: pr_fmt, string
// macros, adjacent literals, levels, comments, multi-line calls, function names.
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
	dev_info(&pdev->dev, "info is not error level\n");
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
	NV_PRINTF(LEVEL_INFO, "not an error\n");
	dev_err(dev, fmt_variable, a);
	xfs_alert_tag(mp, XFS_PTAG_SHUTDOWN, "Please umount the filesystem");
#if 0
	pr_err("never compiled\n");
#endif
}
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
		{Line: 13, Call: "printk", Level: "err", Func: "demo_probe", Format: "demo: bad state 0x%llx\n"},
		{Line: 16, Call: "mlx5_core_err", Level: "err", Func: "demo_probe", Format: "cmd %s(0x%x) timeout\n"},
		{Line: 25, Call: "pr_crit", Level: "crit", Func: "other_fn", Format: "a \"quoted\" word, (parens) and commas\n"},
		{Line: 26, Call: "NV_PRINTF", Level: "err", Func: "other_fn", Format: "GSP RM heartbeat timed out\n"},
		{Line: 29, Call: "xfs_alert_tag", Level: "alert", Func: "other_fn", Format: "Please umount the filesystem"},
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
