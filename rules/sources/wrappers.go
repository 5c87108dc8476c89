package sources

import (
	"regexp"
	"strings"
)

// A wrapper is a driver's own printing macro that passes its arguments to a known
// printing call, as most EDAC drivers do:
//
//	#define sbridge_printk(level, fmt, arg...) edac_printk(level, "sbridge", fmt, ##arg)
//
// A call of the wrapper is read as the call it expands to, so its format and level
// are found where the wrapper is used, not in the macro's body (where the format is
// a parameter).
type wrapper struct {
	params   []string // the macro's parameters; a variadic one last, without its dots
	variadic bool
	inner    string   // the known call the body makes
	args     []string // the body's arguments to it, as written
}

// wrapperHeadRe matches a function-like macro's head: its name and parameters.
var wrapperHeadRe = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)\n]*)\)`)

// wrappers finds the file's macros whose whole body is one known printing call
// (optionally inside do { } while (0)) and whose format argument comes from a
// parameter.
func wrappers(code string) map[string]wrapper {
	out := map[string]wrapper{}
	for _, loc := range wrapperHeadRe.FindAllStringSubmatchIndex(code, -1) {
		name := code[loc[2]:loc[3]]
		if _, known := errorCalls[name]; known {
			continue
		}
		if _, known := lowerCalls[name]; known {
			continue
		}
		w := wrapper{}
		for _, p := range strings.Split(code[loc[4]:loc[5]], ",") {
			p = strings.TrimSpace(p)
			if rest, ok := strings.CutSuffix(p, "..."); ok {
				w.variadic, p = true, strings.TrimSpace(rest)
				if p == "" {
					p = "__VA_ARGS__"
				}
			}
			w.params = append(w.params, p)
		}
		body := unwrapDoWhile(strings.TrimSpace(macroBody(code, loc[1])))
		body = strings.TrimSpace(strings.TrimSuffix(body, ";"))
		j := 0
		for j < len(body) && isIdent(body[j]) {
			j++
		}
		w.inner = body[:j]
		pc, known := errorCalls[w.inner]
		if !known {
			pc, known = lowerCalls[w.inner]
		}
		rest := strings.TrimSpace(body[j:])
		if !known || w.inner == "" || !strings.HasPrefix(rest, "(") {
			continue
		}
		end := matchParen(rest, 0)
		if end != len(rest)-1 {
			continue // more than one call, or an expression around it
		}
		w.args = splitArgs(rest[1:end])
		if pc.format >= len(w.args) || !mentions(w.args[pc.format], w.params) {
			continue
		}
		out[name] = w
	}
	return out
}

// unwrapDoWhile returns the statements of a "do { ... } while (0)" body, or the
// body as it is.
func unwrapDoWhile(body string) string {
	m := doWhileRe.FindStringSubmatch(body)
	if m == nil {
		return body
	}
	return strings.TrimSpace(m[1])
}

var doWhileRe = regexp.MustCompile(`^do\s*\{([\s\S]*)\}\s*while\s*\(\s*0\s*\)$`)

// macroBody returns a macro's body from the end of its head to the end of its
// (backslash-continued) line, the continuations as blanks.
func macroBody(code string, from int) string {
	i := from
	for i < len(code) && (code[i] != '\n' || code[i-1] == '\\') {
		i++
	}
	return strings.ReplaceAll(code[from:i], "\\\n", " ")
}

// mentions reports whether an argument uses one of the parameters (outside its
// string literals).
func mentions(arg string, params []string) bool {
	marks := map[string]string{}
	for _, p := range params {
		marks[p] = "\x00"
	}
	return substitute(arg, marks) != arg
}

// expand returns the inner call's arguments for one use of the wrapper: each
// parameter replaced by the caller's argument, the variadic one by the rest.
func (w wrapper) expand(callArgs []string) ([]string, bool) {
	n := len(w.params)
	if w.variadic {
		n--
	}
	if len(callArgs) < n {
		return nil, false
	}
	vals := map[string]string{}
	for i := 0; i < n; i++ {
		vals[w.params[i]] = callArgs[i]
	}
	if w.variadic {
		vals[w.params[n]] = strings.Join(callArgs[n:], ", ")
	}
	out := make([]string, 0, len(w.args))
	for _, a := range w.args {
		a = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(a), "##"))
		out = append(out, substitute(a, vals))
	}
	return out, true
}

// substitute replaces the identifiers of code outside its string and character
// literals by their values.
func substitute(code string, vals map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(code); {
		c := code[i]
		switch {
		case c == '"' || c == '\'':
			j := skipQuoted(code, i) + 1
			if j > len(code) {
				j = len(code)
			}
			b.WriteString(code[i:j])
			i = j
		case isIdentStart(c):
			j := i
			for j < len(code) && isIdent(code[j]) {
				j++
			}
			if v, ok := vals[code[i:j]]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(code[i:j])
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// wrappedMessage reads one use of a wrapper as the call it expands to.
func wrappedMessage(w wrapper, callArgs []string, macros map[string]string, all bool, resolve func(string) (string, bool), assigned func(string) string) (Message, bool) {
	args, ok := w.expand(callArgs)
	if !ok {
		return Message{}, false
	}
	pc, ok := errorCalls[w.inner]
	if !ok && all {
		pc, ok = lowerCalls[w.inner]
	}
	if !ok {
		return Message{}, false
	}
	m, ok := callMessage(w.inner, pc, args, macros, all, resolve, assigned)
	if !ok {
		return m, false
	}
	// EDAC drivers name themselves in their wrappers ("EDAC sbridge: ",
	// "EDAC sbridge MC0: "): the call is recorded with that name.
	if i, named := namedByArg[w.inner]; named && i < len(args) {
		if name, lit := literal(args[i], macros); lit && name != "" {
			m.Call = w.inner + "(" + name + ")"
		}
	}
	return m, true
}

// Some printing calls print a name they take from elsewhere, which the call is
// recorded with (printf.Prefix prints it): the EDAC calls from an argument (the
// driver's wrapper passes it), device-mapper's from the file's DM_MSG_PREFIX.
var (
	namedByArg   = map[string]int{"edac_printk": 1, "edac_mc_chipset_printk": 2}
	namedByMacro = map[string]string{
		"DMERR": "DM_MSG_PREFIX", "DMERR_LIMIT": "DM_MSG_PREFIX", "DMCRIT": "DM_MSG_PREFIX",
		"DMCRIT_LIMIT": "DM_MSG_PREFIX", "DMWARN": "DM_MSG_PREFIX", "DMWARN_LIMIT": "DM_MSG_PREFIX",
	}
)
