// Package markdown reads what the project's documentation shows, for the tests that
// keep it equal to the code: the command lines of its code blocks and its relative
// links.
package markdown

import (
	"bufio"
	"bytes"
	"regexp"
	"strings"
)

// Command is one command line of a code block: the program and its arguments, as a
// shell would split them.
type Command struct {
	// File and Line say where it starts (Line 1-based).
	File string
	Line int
	// Args are the words, the program first; a $VAR or $(...) is one word of its own,
	// kept as written.
	Args []string
}

// String is the command line, its words joined by spaces.
func (c Command) String() string { return strings.Join(c.Args, " ") }

// Commands returns the command lines of program (its name, or a path ending in
// /program) in the fenced code blocks of md: a line continued with a backslash is
// one line, a "$ " prompt is dropped, lines without one in a block that has some are
// the commands' output, and each command of a list (;, &&, ||, &, |) counts alone.
func Commands(file string, md []byte, program string) []Command {
	var out []Command
	for _, b := range codeBlocks(md) {
		prompted := false
		for _, l := range b.lines {
			if strings.HasPrefix(strings.TrimSpace(l.text), "$ ") {
				prompted = true
			}
		}
		for _, l := range joinContinued(b.lines) {
			text := strings.TrimSpace(l.text)
			if prompted {
				var ok bool
				if text, ok = strings.CutPrefix(text, "$ "); !ok {
					continue
				}
			}
			for _, words := range split(text) {
				if len(words) > 0 && (words[0] == program || strings.HasSuffix(words[0], "/"+program)) {
					out = append(out, Command{File: file, Line: l.n, Args: words})
				}
			}
		}
	}
	return out
}

type line struct {
	n    int
	text string
}

type block struct{ lines []line }

var fence = regexp.MustCompile("^\\s*(```|~~~)")

// codeBlocks returns the fenced code blocks of md, whatever their language.
func codeBlocks(md []byte) []block {
	var (
		out  []block
		cur  *block
		open string
	)
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		t := sc.Text()
		if m := fence.FindStringSubmatch(t); m != nil {
			switch {
			case cur == nil:
				cur, open = &block{}, m[1]
			case m[1] == open:
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, line{n, t})
		}
	}
	return out
}

// joinContinued joins the lines that end with a backslash to the next.
func joinContinued(ls []line) []line {
	var out []line
	for i := 0; i < len(ls); i++ {
		l := ls[i]
		for strings.HasSuffix(strings.TrimRight(l.text, " \t"), `\`) && i+1 < len(ls) {
			i++
			l.text = strings.TrimSuffix(strings.TrimRight(l.text, " \t"), `\`) + " " + strings.TrimSpace(ls[i].text)
		}
		out = append(out, l)
	}
	return out
}

// split splits a shell line into its commands' words: quotes group, a # that starts
// a word starts a comment, and ;, &&, ||, & and | end a command. It is no shell: it
// knows what the documentation's lines use.
func split(s string) [][]string {
	var (
		cmds  [][]string
		words []string
		w     strings.Builder
		inW   bool
		quote rune
		depth int // inside $( ... )
	)
	word := func() {
		if inW {
			words = append(words, w.String())
		}
		w.Reset()
		inW = false
	}
	end := func() {
		word()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case depth > 0:
			w.WriteRune(r)
			if r == '(' {
				depth++
			} else if r == ')' {
				depth--
			}
		case r == '\'' || r == '"':
			quote, inW = r, true
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			w.WriteString("$(")
			i++
			depth, inW = 1, true
		case r == '#' && !inW:
			end()
			return cmds
		case r == ' ' || r == '\t':
			word()
		case r == ';' || r == '&' || r == '|':
			end()
			if i+1 < len(rs) && rs[i+1] == r {
				i++
			}
		default:
			w.WriteRune(r)
			inW = true
		}
	}
	end()
	return cmds
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Links returns the targets of md's inline links that point into the repository
// (no scheme, no bare #anchor), without their #anchor.
func Links(md []byte) []string {
	var out []string
	for _, m := range link.FindAllSubmatch(md, -1) {
		target := string(m[1])
		if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		target, _, _ = strings.Cut(target, "#")
		out = append(out, target)
	}
	return out
}
