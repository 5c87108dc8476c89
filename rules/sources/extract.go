package sources

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/faultline-dev/faultline/rules/printf"
)

// MaxSource bounds the size of a source file the extractor reads.
const MaxSource = 8 << 20

// printCall describes an error-level printing function: where its format argument
// is, and what its level argument must be for the call to be error-level.
type printCall struct {
	format int // index of the argument that starts the format
	level  int // index of a level argument that must name an error level; -1: none
	// concat: the message is every argument from format on, joined (C++ macros
	// such as TORCH_CHECK that build it with c10::str); runtime values become %s.
	concat bool
}

// errorCalls are the printing calls the inventory lists: KERN_ERR and above;
// lowerCalls the warning and informational ones, listed only on request (a rule
// may be for a warning, such as an NVMe timeout).
var errorCalls, lowerCalls = map[string]printCall{}, map[string]printCall{}

func init() {
	add := func(format, level int, names string) {
		for _, n := range strings.Fields(names) {
			errorCalls[n] = printCall{format: format, level: level}
		}
	}
	add(0, -1, `pr_emerg pr_alert pr_crit pr_err pr_emerg_ratelimited pr_err_ratelimited pr_crit_ratelimited
		pr_alert_ratelimited pr_err_once pr_crit_once panic`)
	add(0, 0, `printk printk_ratelimited printk_once printk_deferred`)
	add(1, -1, `dev_emerg dev_alert dev_crit dev_err dev_err_ratelimited dev_err_once
		dev_crit_ratelimited dev_alert_ratelimited pci_emerg pci_alert pci_crit pci_err
		pci_err_ratelimited netdev_emerg netdev_alert netdev_crit netdev_err netdev_err_once
		mlx5_core_err mlx5_core_err_rl mlx4_err ibdev_err ibdev_err_ratelimited
		xfs_emerg xfs_alert xfs_crit xfs_err xfs_alert_ratelimited xfs_err_ratelimited`)
	add(0, -1, `ucs_error ucs_fatal`)
	// DRM's printk macros (the amdgpu driver's DRM_ERROR; DRM_WARN below).
	add(0, -1, `DRM_ERROR`)
	// DRM's device macros and i915's and nouveau's (drm_err(drm, fmt, ...),
	// gt_err(gt, fmt, ...), nvkm_error(subdev, fmt, ...)); the lower ones below.
	add(1, -1, `drm_err drm_err_once drm_err_ratelimited gt_err gt_err_ratelimited guc_err guc_err_ratelimited
		nvkm_error nvkm_error_ratelimited`)
	add(0, -1, `DC_ERROR DC_LOG_ERROR`)
	// ucs_log(level, fmt, ...): UCX passes the level in a variable (the error level
	// a transport configured), so it is listed as an error.
	add(1, -1, `ucs_log`)
	// The NVIDIA RM prints Xid lines with portDbgPrintf, which has no level: always printed.
	add(0, -1, `portDbgPrintf`)
	// NV_ERROR_LOG_DATA(pGpu, num, fmt, ...) prints "NVRM: " fmt unconditionally (the
	// GSP RPC dumps); NV_ERROR_LOG_COND does when it logs no Xid.
	add(2, -1, `NV_ERROR_LOG_DATA NV_ERROR_LOG_COND`)
	add(2, -1, `xfs_alert_tag slave_err`)
	add(1, -1, `ata_dev_err ata_link_err ata_port_err`)
	// NIC and PCIe hotplug drivers' wrappers: netif_err(priv, type, dev, fmt), ixgbe's
	// e_err(msglvl, fmt) and e_dev_err(fmt), pciehp's ctrl_err(ctrl, fmt).
	add(3, -1, `netif_emerg netif_alert netif_crit netif_err`)
	add(1, -1, `e_err e_crit ctrl_err`)
	// Lustre's debug macros (libcfs): CERROR(fmt, ...), LCONSOLE_ERROR_MSG(errnum,
	// fmt, ...), and those that take the debug mask first, CDEBUG(mask, fmt, ...) and
	// DEBUG_REQ(mask, req, fmt, ...): the mask decides the level (printf.LustreLevel).
	add(0, -1, `CERROR CEMERG LCONSOLE_ERROR LCONSOLE_EMERG`)
	add(1, -1, `LCONSOLE_ERROR_MSG`)
	add(1, 0, `CDEBUG CDEBUG_LIMIT`)
	add(2, 0, `DEBUG_REQ`)
	add(0, -1, `e_dev_err`)
	add(1, 0, `NV_PRINTF nv_printf`)
	add(2, 0, `NV_DEV_PRINTF sdev_printk scmd_printk shost_printk`)
	// dev_printk(level, dev, fmt, ...) and its PCI and netdev forms: the level first.
	add(2, 0, `dev_printk pci_printk netdev_printk`)
	// nvidia-modeset: nvEvoLogDev(pDevEvo, EVO_LOG_ERROR, fmt, ...), nvEvoLogDisp
	// likewise, nvEvoLog(EVO_LOG_ERROR, fmt, ...); nvkms_log prints the level's word,
	// so the call is recorded with its level ("nvEvoLogDev(EVO_LOG_ERROR)").
	add(2, 1, `nvEvoLogDev nvEvoLogDisp`)
	add(1, 0, `nvEvoLog`)
	add(2, 0, `sd_printk`)
	add(2, 1, `ext4_msg`)
	add(1, -1, `ext4_error EXT4_ERROR_INODE`)
	add(2, -1, `ext4_error_err ext4_abort EXT4_ERROR_INODE_ERR EXT4_ERROR_FILE`)
	add(3, -1, `ext4_error_inode_block`)
	add(4, -1, `ext4_error_inode ext4_error_file`)
	add(5, -1, `ext4_error_inode_err`)
	add(2, 1, `edac_mc_printk edac_device_printk edac_pci_printk`)
	// device-mapper's DMERR(fmt, ...) and friends print "device-mapper: " and the
	// target's DM_MSG_PREFIX (dm-mpath's "multipath") before fmt.
	add(0, -1, `DMERR DMERR_LIMIT DMCRIT DMCRIT_LIMIT`)
	add(3, 1, `edac_mc_chipset_printk`)
	add(2, 0, `edac_printk`)
	add(0, -1, `WARN`)
	// aws-ofi-nccl's NCCL_OFI_WARN(fmt, ...): NCCL's logger at WARN, "NET/OFI " first.
	add(0, -1, `NCCL_OFI_WARN`)
	// PyTorch (c10): exceptions and warnings whose message is the remaining
	// arguments joined; LOG(ERROR) << ... streams are read in extract.
	for _, c := range []struct {
		format int
		names  string
		lower  bool
	}{{1, `TORCH_CHECK C10_THROW_ERROR`, false}, {2, `TORCH_CHECK_WITH`, false}, {0, `TORCH_WARN TORCH_WARN_ONCE`, true}} {
		for _, n := range strings.Fields(c.names) {
			if c.lower {
				lowerCalls[n] = printCall{format: c.format, level: -1, concat: true}
			} else {
				errorCalls[n] = printCall{format: c.format, level: -1, concat: true}
			}
		}
	}
	// User-space programs of GPU nodes: mcelog's Eprintf/SYSERRprintf/Lprintf, Slurm's
	// error()/fatal(), syslog(3) and nvidia-persistenced's syslog_device (level first),
	// rasdaemon's log(where, level, fmt), libfabric's EFA_WARN/FI_WARN, rdma-core's verbs_err and mlx5_err.
	add(0, -1, `Eprintf SYSERRprintf Lprintf error fatal`)
	add(1, 0, `syslog SYSLOG_VERBOSE`)
	add(2, 1, `syslog_device SYSLOG_DEVICE_VERBOSE log`)
	add(1, -1, `EFA_WARN EFA_WARN_ONCE verbs_err mlx5_err`)
	add(2, -1, `FI_WARN FI_WARN_ONCE FI_WARN_SPARSE`)
	lower := func(format, level int, names string) {
		for _, n := range strings.Fields(names) {
			lowerCalls[n] = printCall{format: format, level: level}
		}
	}
	lower(0, -1, `pr_warn pr_warning pr_notice pr_info pr_warn_ratelimited pr_warn_once
		pr_info_ratelimited pr_notice_ratelimited INFO ucs_warn ucs_diag DRM_WARN DMWARN DMWARN_LIMIT`)
	lower(1, -1, `dev_warn dev_notice dev_info dev_warn_ratelimited dev_warn_once pci_warn
		pci_notice pci_info netdev_warn netdev_notice netdev_info mlx5_core_warn mlx5_core_warn_rl
		mlx5_core_info mlx4_warn mlx4_info ibdev_warn ibdev_info ipoib_warn xfs_warn
		xfs_notice xfs_info xfs_warn_ratelimited xfs_warn_once`)
	lower(2, -1, `slave_warn slave_info`)
	lower(1, -1, `drm_warn drm_notice drm_info drm_warn_once drm_notice_once drm_info_once gt_warn gt_notice
		gt_info gt_warn_once gt_notice_ratelimited guc_warn guc_notice guc_info nvkm_warn nvkm_info`)
	lower(1, -1, `ata_dev_warn ata_dev_info ata_link_warn ata_link_info ata_port_warn ata_port_info fprintf`)
	lower(1, -1, `ext4_warning ext4_warning_inode`)
	// mcelog's decoded machine checks (Wprintf, Gprintf: syslog at warning), Slurm's
	// warning() and info(), rdma-core's verbs_warn.
	lower(0, -1, `Wprintf Gprintf warning info`)
	lower(1, -1, `verbs_warn`)
	lower(3, -1, `netif_warn netif_notice netif_info`)
	lower(1, -1, `e_warn e_info ctrl_warn ctrl_info netdev_warn_once netdev_info_once mlx5_core_warn_once`)
	lower(0, -1, `e_dev_warn e_dev_info`)
	lower(0, -1, `CWARN CNETERR LCONSOLE_WARN LCONSOLE_INFO`)
}

// lowerLevels are the level arguments below error.
var lowerLevels = map[string]string{
	"KERN_WARNING": "warn", "KERN_NOTICE": "notice", "KERN_INFO": "info",
	"LEVEL_WARNING": "warn", "LEVEL_NOTICE": "notice", "LEVEL_INFO": "info",
	"NV_DBG_WARNINGS": "warn", "NV_DBG_INFO": "info",
	"EVO_LOG_WARN": "warn", "EVO_LOG_INFO": "info",
	"LOG_WARNING": "warn", "LOG_NOTICE": "notice", "LOG_INFO": "info",
}

// errorLevels are the level arguments that make a call error-level.
var errorLevels = map[string]string{
	"KERN_EMERG": "emerg", "KERN_ALERT": "alert", "KERN_CRIT": "crit", "KERN_ERR": "err",
	"LEVEL_ERROR": "err", "LEVEL_FATAL": "fatal", "NV_DBG_ERRORS": "err", "EVO_LOG_ERROR": "err",
	"LOG_EMERG": "emerg", "LOG_ALERT": "alert", "LOG_CRIT": "crit", "LOG_ERR": "err",
}

// builtinMacros are the string macros of headers that formats concatenate.
var builtinMacros = map[string]string{
	"PRIx64": "llx", "PRIX64": "llX", "PRIu64": "llu", "PRId64": "lld", "PRIi64": "lli",
	"PRIx32": "x", "PRIu32": "u", "PRId32": "d", "PRIxPTR": "lx",
	"NvU64_fmtx": "llx", "NvU64_fmtX": "llX", "NvU64_fmtu": "llu", "NvU64_fmtd": "lld",
	"NvU64_fmto": "llo", "NV_PCI_DEV_FMT": "%04x:%02x:%02x.%x", "NV_PRINTF_ADDR_FMT": "%llx",
	"UCS_PTR_FMT": "%p", "UCT_IB_IFACE_FMT": "%s:%d", "UCS_SOCKADDR_STRING_LEN": "",
	"KERN_SOH": "", "KERN_CONT": "", "KERN_EMERG": "", "KERN_ALERT": "", "KERN_CRIT": "",
	"KERN_ERR": "", "KERN_WARNING": "", "KERN_NOTICE": "", "KERN_INFO": "", "KERN_DEBUG": "",
	"DRV_NAME": "%s", "DRIVER_NAME": "%s",
	"HW_ERR": "[Hardware Error]: ", "FW_BUG": "[Firmware Bug]: ", "FW_WARN": "[Firmware Warn]: ",
	"FW_INFO": "[Firmware Info]: ",
	// Lustre's identifiers (lustre_idl.h, lustre_dlm.h): a FID, an object id, a lock resource.
	"DFID_NOBRACE": "%#llx:0x%x:0x%x", "DFID": "[%#llx:0x%x:0x%x]", "DOSTID": "%#llx:%llu",
	"DLDLMRES": "[%#llx:%#llx:%#llx].%#llx", "DEXT": "[%#llx, %#llx)",
}

// Message is one print call of a source file that the inventory lists.
type Message struct {
	Line   int    `yaml:"line" json:"line"`
	Call   string `yaml:"call" json:"call"`
	Level  string `yaml:"level" json:"level"`
	Func   string `yaml:"func,omitempty" json:"func,omitempty"`
	Format string `yaml:"format" json:"format"`
	// Versions are the versions of the file that print it, newest first.
	Versions []string `yaml:"versions" json:"versions"`
	// Rule is the rule a line generated from the format matched when the inventory
	// was written; the coverage test checks it still does.
	Rule string `yaml:"rule,omitempty" json:"rule,omitempty"`
	// Ignore says in one line why no rule is meant to catch the message.
	Ignore string `yaml:"ignore,omitempty" json:"ignore,omitempty"`
}

var (
	defineHeadRe = regexp.MustCompile(`^#\s*define\s+([A-Za-z_]\w*)(?:\([^)\n]*\))?`)
	defineStrRe  = regexp.MustCompile(`(?m)^\s*#\s*define\s+([A-Za-z_]\w*)\s+((?:"(?:[^"\\\n]|\\.)*"\s*)+)$`)
	prFmtRe      = regexp.MustCompile(`(?m)^\s*#\s*define\s+pr_fmt\(\s*fmt\s*\)\s+(.*?)\s*fmt\s*$`)
	devFmtLitRe  = regexp.MustCompile(`(?m)^\s*#\s*define\s+dev_fmt\(\s*fmt\s*\)\s+(.*?)\s*fmt\s*$`)
	devFmtRe     = regexp.MustCompile(`(?m)^\s*#\s*define\s+dev_fmt(?:\(\s*fmt\s*\)\s+pr_fmt\(\s*fmt\s*\)|\s+pr_fmt)\s*$`)
	stringRe     = regexp.MustCompile(`"((?:[^"\\\n]|\\.)*)"`)
)

// Extract lists the print calls of one C or C++ source file that can mean a
// fault: every call at warning level or above, and the informational calls whose
// format speaks of a link or a carrier (NIC link down/up, PCIe link lost), with
// their format strings as printed (adjacent literals and string macros joined);
// it also returns the file's pr_fmt prefix if it has one.
func Extract(file string, src []byte) (Extracted, error) {
	x, err := extract(file, src, true)
	if err != nil {
		return x, err
	}
	kept := x.Messages[:0]
	for _, m := range x.Messages {
		if m.Level != "info" && m.Level != "notice" || linkStateRe.MatchString(m.Format) {
			kept = append(kept, m)
		}
	}
	x.Messages = kept
	return x, nil
}

// linkStateRe finds the informational formats of link state: drivers print a
// NIC's link going down or up, and a PCIe link's loss, at info or notice level.
var linkStateRe = regexp.MustCompile(`(?i)\blink\b|carrier|\blnk\b`)

// ExtractAll is Extract with every informational call too (to find a rule's
// sources; the inventory does not list them).
func ExtractAll(file string, src []byte) (Extracted, error) {
	return extract(file, src, true)
}

// Extracted is what Extract finds in one file.
type Extracted struct {
	// Prefix is the file's pr_fmt; DevPrefix the same when the file also defines
	// dev_fmt as pr_fmt (dev_err and friends print it after the device then).
	Prefix, DevPrefix string
	Messages          []Message
}

func extract(file string, src []byte, all bool) (x Extracted, err error) {
	if len(src) > MaxSource {
		return x, fmt.Errorf("%s: %d bytes is over the limit of %d", file, len(src), MaxSource)
	}
	code := dropIfZero(stripComments(string(src)))
	macros := map[string]string{}
	for k, v := range builtinMacros {
		macros[k] = v
	}
	mod := strings.TrimSuffix(path.Base(file), path.Ext(file))
	macros["KBUILD_MODNAME"] = mod
	for _, m := range defineStrRe.FindAllStringSubmatch(code, -1) {
		macros[m[1]] = joinLiterals(m[2])
	}
	if m := prFmtRe.FindStringSubmatch(code); m != nil {
		x.Prefix, _ = literal(m[1], macros)
		if devFmtRe.MatchString(code) {
			x.DevPrefix = x.Prefix
		}
	}
	if m := devFmtLitRe.FindStringSubmatch(code); m != nil {
		x.DevPrefix, _ = literal(m[1], macros)
	}
	wraps := wrappers(code)
	var depth int
	var braces []bool // per open brace: a namespace's
	var fn, lastIdent string
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c == '"' || c == '\'':
			i = skipQuoted(code, i)
		case c == '{':
			// A C++ namespace's braces do not nest functions.
			ns := namespaceRe.MatchString(code[:i])
			braces = append(braces, ns)
			if ns {
				continue
			}
			if depth == 0 {
				fn = lastIdent
			}
			depth++
		case c == '}':
			if n := len(braces); n > 0 {
				ns := braces[n-1]
				braces = braces[:n-1]
				if ns {
					continue
				}
			}
			if depth > 0 {
				depth--
			}
		case c == '#' && atLineStart(code, i):
			// A macro body is scanned like code (headers print from macros such as
			// NCCL's CUDACHECK); its messages are attributed to the macro.
			if m := defineHeadRe.FindStringSubmatch(code[i:]); m != nil {
				lastIdent, fn = m[1], m[1]
				i += len(m[0]) - 1
				continue
			}
			for i < len(code) && (code[i] != '\n' || code[i-1] == '\\') {
				i++
			}
		case isIdentStart(c) && (i == 0 || !isIdent(code[i-1])):
			j := i
			for j < len(code) && isIdent(code[j]) {
				j++
			}
			name := code[i:j]
			k := j
			for k < len(code) && (code[k] == ' ' || code[k] == '\t' || code[k] == '\n') {
				k++
			}
			if k < len(code) && code[k] == '(' {
				// Conditional compilation can unbalance braces, so a print call
				// counts at any depth; a name at depth 0 may start a function.
				if depth == 0 {
					lastIdent = name
				}
				if name == "LOG" {
					if m, end, ok := logStream(code, k, all, resolver(code, i, macros)); ok {
						m.Line, m.Func = lineOf(code, i), fn
						x.Messages = append(x.Messages, m)
						i = end
						continue
					}
				}
				pc, ok := errorCalls[name]
				if !ok && all {
					pc, ok = lowerCalls[name]
				}
				w, wrapped := wraps[name]
				if ok || wrapped {
					end := matchParen(code, k)
					if end < 0 {
						return x, fmt.Errorf("%s:%d: unbalanced call to %s", file, lineOf(code, i), name)
					}
					args, resolve, assigned := splitArgs(code[k+1:end]), resolver(code, i, macros), assignments(code, i)
					var m Message
					var found bool
					if ok {
						m, found = callMessage(name, pc, args, macros, all, resolve, assigned)
					} else {
						m, found = wrappedMessage(w, args, macros, all, resolve, assigned)
					}
					if found {
						m.Line, m.Func = lineOf(code, i), fn
						x.Messages = append(x.Messages, m)
					}
					i = end
					continue
				}
			}
			i = j - 1
		}
	}
	return x, nil
}

func callMessage(name string, pc printCall, args []string, macros map[string]string, all bool, resolve func(string) (string, bool), assigned func(string) string) (Message, bool) {
	m := Message{Call: name, Level: "err"}
	if mask, ok := printf.LustreMask(name); ok {
		m.Level, _, _ = printf.LustreLevel(mask)
		if name == "LCONSOLE_ERROR_MSG" && len(args) > 0 {
			m.Call = name + "(" + strings.TrimSpace(args[0]) + ")" // its number is printed
		}
	} else if pc.level >= 0 && printf.LustreMaskCall(name) {
		if pc.level >= len(args) {
			return m, false
		}
		mask := args[pc.level]
		if id := strings.TrimSpace(mask); identRe.MatchString(id) && !strings.HasPrefix(id, "D_") {
			mask = assigned(id) // a variable: the masks the function sets it to
		}
		l, canon, ok := printf.LustreLevel(mask)
		if !ok || l == "info" && !all {
			return m, false
		}
		m.Level, m.Call = l, name+"("+canon+")"
	} else if pc.level >= 0 {
		if pc.level >= len(args) {
			return m, false
		}
		lv := strings.Fields(strings.TrimSpace(args[pc.level]))
		if len(lv) == 0 {
			return m, false
		}
		l, ok := errorLevels[lv[0]]
		if !ok && all {
			l, ok = lowerLevels[lv[0]]
		}
		if !ok {
			return m, false
		}
		m.Level = l
		if strings.HasPrefix(name, "nvEvoLog") {
			m.Call = name + "(" + lv[0] + ")"
		}
	} else if _, low := lowerCalls[name]; low {
		m.Level = "warn"
		if strings.Contains(name, "info") || name == "INFO" || name == "ucs_diag" {
			m.Level = "info"
		} else if strings.Contains(name, "notice") {
			m.Level = "notice"
		}
	} else if strings.HasSuffix(name, "crit") || strings.Contains(name, "_crit") {
		m.Level = "crit"
	} else if strings.Contains(name, "alert") {
		m.Level = "alert"
	} else if strings.Contains(name, "emerg") || name == "panic" || name == "ucs_fatal" {
		m.Level = "emerg"
	}
	if macro, named := namedByMacro[name]; named {
		if name := macros[macro]; name != "" {
			m.Call += "(" + name + ")"
		}
	}
	if pc.format >= len(args) {
		return m, false
	}
	if pc.concat {
		f, ok := joined(args[pc.format:], macros, resolve)
		if !ok || strings.TrimSpace(f) == "" {
			return m, false
		}
		if strings.HasPrefix(name, "TORCH_WARN") {
			m.Level = "warn"
		}
		m.Format = f
		return m, true
	}
	f, ok := literal(args[pc.format], macros)
	if !ok || strings.TrimSpace(f) == "" {
		return m, false
	}
	m.Format = f
	return m, true
}

// logLevels are the glog/c10 levels of LOG(LEVEL) << ... that the inventory lists.
var logLevels = map[string]string{"FATAL": "crit", "ERROR": "err", "WARNING": "warn"}

// logStream reads a C++ log stream, LOG(ERROR) << a << b;, whose call's
// parenthesis opens at open: the message is the streamed operands joined. It
// returns the index of the statement's end.
func logStream(code string, open int, all bool, resolve func(string) (string, bool)) (Message, int, bool) {
	end := matchParen(code, open)
	if end < 0 {
		return Message{}, 0, false
	}
	lv, ok := logLevels[strings.TrimSpace(code[open+1:end])]
	if !ok || lv == "warn" && !all {
		return Message{}, 0, false
	}
	j := end + 1
	for j < len(code) && (code[j] == ' ' || code[j] == '\t' || code[j] == '\n') {
		j++
	}
	if !strings.HasPrefix(code[j:], "<<") {
		return Message{}, 0, false
	}
	stop := statementEnd(code, j, len(code))
	if stop < 0 {
		return Message{}, 0, false
	}
	stream := code[j+2 : stop]
	parts := splitTop(stream, func(i int) int {
		if stream[i] == '<' && i+1 < len(stream) && stream[i+1] == '<' {
			return 2
		}
		return 0
	})
	f, ok := joined(parts, nil, resolve)
	if !ok || strings.TrimSpace(f) == "" {
		return Message{}, 0, false
	}
	name := "LOG(" + strings.TrimSpace(code[open+1:end]) + ")"
	return Message{Call: name, Level: lv, Format: f}, stop, true
}

// joined builds the message of C++ code that joins its pieces (c10::str's
// arguments, a stream's operands): string literals as written, with % doubled,
// and c10::str(...) read inside; any other value is a runtime string (%s). It
// reports whether any piece was a literal.
func joined(args []string, macros map[string]string, resolve func(string) (string, bool)) (string, bool) {
	var b strings.Builder
	found := false
	for _, a := range args {
		a = strings.TrimSpace(a)
		if in, ok := strings.CutPrefix(a, "c10::str("); ok && strings.HasSuffix(in, ")") && matchParen(a, len("c10::str")) == len(a)-1 {
			f, ok := joined(splitArgs(in[:len(in)-1]), macros, resolve)
			b.WriteString(f)
			found = found || ok
			continue
		}
		if resolve != nil && identRe.MatchString(a) {
			// A message built before into a variable: std::string msg = c10::str(...).
			if f, ok := resolve(a); ok {
				b.WriteString(f)
				found = true
				continue
			}
		}
		if parts := splitPlus(a); len(parts) > 1 {
			// std::string pieces joined with +.
			f, ok := joined(parts, macros, resolve)
			b.WriteString(f)
			found = found || ok
			continue
		}
		if strings.HasPrefix(a, "\"") {
			if f, ok := literal(a, macros); ok {
				b.WriteString(strings.ReplaceAll(f, "%", "%%"))
				found = true
				if end := skipQuoted(a, 0); !onlyLiterals(a) && end > 0 {
					b.WriteString("%s")
				}
				continue
			}
		}
		b.WriteString("%s")
	}
	return b.String(), found
}

var (
	identRe     = regexp.MustCompile(`^[A-Za-z_]\w*$`)
	namespaceRe = regexp.MustCompile(`(?:\bnamespace(?:\s+[\w:]+)?|\bextern\s+"C")\s*$`)
)

// assignedExprs returns the expressions that the code before offset i (within
// 6000 bytes) assigns to an identifier, in order.
func assignedExprs(code string, i int, ident string) []string {
	from := max(i-6000, 0)
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(ident) + `\s*=[^=]`)
	var out []string
	for _, loc := range re.FindAllStringIndex(code[from:i], -1) {
		start := from + loc[1] - 1
		if end := statementEnd(code, start, i); end >= 0 {
			out = append(out, strings.ReplaceAll(code[start:end], "\\\n", "\n"))
		}
	}
	return out
}

// resolver finds, for a message variable used by the call at i, what it was
// built from in the lines before: std::string msg = c10::str(...); or
// std::string err = "..." + x + "...";.
func resolver(code string, i int, macros map[string]string) func(string) (string, bool) {
	return func(ident string) (string, bool) {
		exprs := assignedExprs(code, i, ident)
		if len(exprs) == 0 {
			return "", false
		}
		return joined(exprs[len(exprs)-1:], macros, nil)
	}
}

// assignments returns a function that joins, with "|", what the code before the
// call at i assigns to an identifier: the values a variable passed as a Lustre
// debug mask may hold ("debug_mask = D_WARNING").
func assignments(code string, i int) func(string) string {
	return func(ident string) string { return strings.Join(assignedExprs(code, i, ident), "|") }
}

// splitPlus splits an expression at its top-level + operators.
func splitPlus(s string) []string {
	return splitTop(s, func(i int) int {
		if s[i] == '+' && (i+1 >= len(s) || s[i+1] != '+') && (i == 0 || s[i-1] != '+') {
			return 1
		}
		return 0
	})
}

// onlyLiterals reports whether an argument is adjacent string literals alone.
func onlyLiterals(a string) bool {
	rest := strings.TrimSpace(a)
	for rest != "" {
		if rest[0] != '"' {
			return false
		}
		end := skipQuoted(rest, 0)
		rest = strings.TrimSpace(rest[end+1:])
	}
	return true
}

// literal joins the string literals and string macros of one argument; an
// unknown macro among them prints something unknown, so it becomes %s.
func literal(arg string, macros map[string]string) (string, bool) {
	var b strings.Builder
	found := false
	// A macro body's line continuations are blanks.
	rest := strings.TrimSpace(strings.ReplaceAll(arg, "\\\n", "\n"))
	for rest != "" {
		switch {
		case rest[0] == '"':
			end := skipQuoted(rest, 0)
			b.WriteString(unescapeC(rest[1:end]))
			rest = rest[end+1:]
			found = true
		case isIdentStart(rest[0]):
			j := 0
			for j < len(rest) && isIdent(rest[j]) {
				j++
			}
			id := rest[:j]
			if v, ok := macros[id]; ok {
				b.WriteString(v)
			} else if found || strings.HasPrefix(strings.TrimSpace(rest[j:]), "\"") {
				b.WriteString("%s")
			} else {
				return "", false // a variable as the format: nothing to list
			}
			rest = rest[j:]
		default:
			if !found {
				return "", false
			}
			return b.String(), true // "fmt" followed by an operator: keep what was read
		}
		rest = strings.TrimLeft(rest, " \t\n")
	}
	return b.String(), found
}

func joinLiterals(s string) string {
	var b strings.Builder
	for _, m := range stringRe.FindAllStringSubmatch(s, -1) {
		b.WriteString(unescapeC(m[1]))
	}
	return b.String()
}

// unescapeC turns C escapes into the characters printed.
func unescapeC(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
		case '0':
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// stripComments blanks comments, keeping newlines so line numbers hold.
func stripComments(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"' || b[i] == '\'':
			i = skipQuoted(s, i)
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				b[i] = ' '
				i++
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			for i < len(b) && !(b[i] == '*' && i+1 < len(b) && b[i+1] == '/') {
				if b[i] != '\n' {
					b[i] = ' '
				}
				i++
			}
			if i+1 < len(b) {
				b[i], b[i+1] = ' ', ' '
				i++
			}
		}
	}
	return string(b)
}

// dropIfZero blanks the lines of #if 0 blocks (up to their #else or #endif),
// keeping newlines: code that is never compiled prints nothing.
func dropIfZero(s string) string {
	lines := strings.Split(s, "\n")
	depth := 0 // nesting inside a dead block; 0 when live
	for i, l := range lines {
		t := strings.TrimSpace(l)
		directive := ""
		if strings.HasPrefix(t, "#") {
			directive = strings.TrimSpace(t[1:])
		}
		switch {
		case depth == 0 && (directive == "if 0" || strings.HasPrefix(directive, "if 0 ")):
			depth = 1
			lines[i] = ""
		case depth > 0 && strings.HasPrefix(directive, "if"):
			depth++
			lines[i] = ""
		case depth > 0 && strings.HasPrefix(directive, "endif"):
			depth--
			lines[i] = ""
		case depth == 1 && (strings.HasPrefix(directive, "else") || strings.HasPrefix(directive, "elif")):
			depth = 0
			lines[i] = ""
		case depth > 0:
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// skipQuoted returns the index of the closing quote of the literal at i.
func skipQuoted(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j
		case '\n':
			return j
		}
	}
	return len(s) - 1
}

// statementEnd returns the index of the ';' that ends the statement starting at
// from (outside brackets and literals), looking no further than limit; -1 if none.
func statementEnd(code string, from, limit int) int {
	depth := 0
	for k := from; k < limit; k++ {
		switch code[k] {
		case '"', '\'':
			k = skipQuoted(code, k)
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ';':
			if depth == 0 {
				return k
			}
		}
	}
	return -1
}

func matchParen(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			i = skipQuoted(s, i)
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func splitArgs(s string) []string {
	return splitTop(s, func(i int) int {
		if s[i] == ',' {
			return 1
		}
		return 0
	})
}

// splitTop splits s at the separators outside brackets and literals: sep(i) is the
// length of the separator that starts at i (0: none).
func splitTop(s string, sep func(i int) int) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			i = skipQuoted(s, i)
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		default:
			if n := sep(i); depth == 0 && n > 0 {
				out = append(out, s[start:i])
				start = i + n
				i += n - 1
			}
		}
	}
	return append(out, s[start:])
}

func atLineStart(s string, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch s[j] {
		case '\n':
			return true
		case ' ', '\t':
			continue
		default:
			return false
		}
	}
	return true
}

func lineOf(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdent(c byte) bool      { return isIdentStart(c) || c >= '0' && c <= '9' }
