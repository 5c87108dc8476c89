package printf

import (
	"fmt"
	"strconv"
	"strings"
)

// Lustre's debug macros print to the console through libcfs (cfs_print_to_console
// in 2.12, cfs_vprint_to_console since): "LustreError: " for a message with
// D_ERROR or D_EMERG in its mask, "Lustre: " otherwise ("LNetError: " and "LNet: "
// for the LNet and LND subsystems), then, unless the mask has D_CONSOLE, the
// process, the file, line and function: "1234:0:(client.c:2356:ptlrpc_expire_one_request()) ".
// DEBUG_REQ adds "@@@ " before its format; LCONSOLE_ERROR_MSG(errnum, ...) the
// message number and its checksum ("166-1: "), LCONSOLE_ERROR number 0 ("0-0: ").

// lustreMaskCalls record their mask in the call's name: "CDEBUG(D_ERROR)",
// "DEBUG_REQ(D_WARNING)", "CDEBUG_LIMIT(D_CONSOLE|D_ERROR)".
var lustreMaskCalls = words(`CDEBUG CDEBUG_LIMIT DEBUG_REQ`)

// lustreCallMasks are the masks of the macros that fix theirs.
var lustreCallMasks = map[string]string{
	"CERROR": "D_ERROR", "CEMERG": "D_EMERG", "CWARN": "D_WARNING", "CNETERR": "D_NETERROR",
	"LCONSOLE_ERROR": "D_CONSOLE|D_ERROR", "LCONSOLE_ERROR_MSG": "D_CONSOLE|D_ERROR",
	"LCONSOLE_EMERG": "D_CONSOLE|D_EMERG", "LCONSOLE_WARN": "D_CONSOLE|D_WARNING",
	"LCONSOLE_INFO": "D_CONSOLE",
}

// LustreMaskCall reports whether call takes its debug mask as an argument.
func LustreMaskCall(call string) bool { return lustreMaskCalls[call] }

// lustreBits are the bits of a debug mask written as a C expression ("D_ERROR",
// "D_CONSOLE | D_WARNING", "cond ? D_INFO : D_WARNING").
func lustreBits(mask string) map[string]bool {
	bits := map[string]bool{}
	for _, f := range strings.FieldsFunc(mask, func(r rune) bool {
		return !(r == '_' || 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9')
	}) {
		bits[f] = true
	}
	return bits
}

// LustreLevel is the level the console prints a debug mask at, and the mask's
// console bits in a fixed order ("D_CONSOLE|D_WARNING"). A mask with none of them
// (D_HA, D_NET, an unknown variable) is not printed by default.
func LustreLevel(mask string) (level, canonical string, ok bool) {
	bits := lustreBits(mask)
	var kept []string
	for _, b := range []string{"D_CONSOLE", "D_EMERG", "D_ERROR", "D_WARNING", "D_NETERROR"} {
		if bits[b] {
			kept = append(kept, b)
		}
	}
	switch {
	case bits["D_EMERG"]:
		level = "emerg"
	case bits["D_ERROR"]:
		level = "err"
	case bits["D_WARNING"] || bits["D_NETERROR"]:
		level = "warn"
	case bits["D_CONSOLE"]:
		level = "info"
	default:
		return "", "", false
	}
	return level, strings.Join(kept, "|"), true
}

// LustreMask returns the debug mask a Lustre print call prints with, and whether
// call is one.
func LustreMask(call string) (string, bool) {
	if m, ok := lustreCallMasks[call]; ok {
		return m, true
	}
	name, arg, ok := strings.Cut(call, "(")
	if !ok || !strings.HasSuffix(arg, ")") {
		return "", false
	}
	if name == "LCONSOLE_ERROR_MSG" {
		return lustreCallMasks[name], true
	}
	if !lustreMaskCalls[name] {
		return "", false
	}
	return strings.TrimSuffix(arg, ")"), true
}

// lustreErrnum is the "%x-%x: " that LCONSOLE_ERROR_MSG prints first: the message
// number (the call's argument, "LCONSOLE_ERROR_MSG(0x166)") and LERRCHKSUM of it.
func lustreErrnum(call string) (string, bool) {
	if call == "LCONSOLE_ERROR" {
		return "0-0: ", true
	}
	arg, ok := strings.CutPrefix(call, "LCONSOLE_ERROR_MSG(")
	if !ok {
		return "", false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(arg, ")"), 0, 32)
	if err != nil {
		return "", false
	}
	return fmt.Sprintf("%x-%x: ", n, n&0xf^n>>4&0xf^n>>8&0xf), true
}

// lustrePrefix is what a Lustre print call prints before its format in file and
// function fn.
func lustrePrefix(call, mask, fn, file string, variant int) string {
	bits := lustreBits(mask)
	who := "Lustre"
	if strings.HasPrefix(file, "lnet/lnet/") || strings.HasPrefix(file, "lnet/klnds/") {
		who = "LNet"
	}
	p := who + ": "
	if bits["D_ERROR"] || bits["D_EMERG"] {
		p = who + "Error: "
	}
	if !bits["D_CONSOLE"] {
		base := file[strings.LastIndexByte(file, '/')+1:]
		p += fmt.Sprintf("%d:0:(%s:%d:%s()) ", 12345+variant, base, 210+variant, fn)
	}
	if strings.HasPrefix(call, "DEBUG_REQ") {
		p += "@@@ "
	}
	if e, ok := lustreErrnum(call); ok {
		p += e
	}
	return p
}
