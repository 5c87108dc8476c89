package scan

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/faultline-dev/faultline/rules"
)

// JSONLWriter returns an emit function writing one JSON object per line (control
// characters come out as JSON escapes).
func JSONLWriter(w io.Writer) func(Match) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return func(m Match) error { return enc.Encode(m) }
}

// textFlushRows bounds the rows the aligned table holds before it writes them out.
const textFlushRows = 64

// TextWriter prints matches as an aligned table, with the input's name before the
// line number when withFile is set; call the returned flush at the end. Text taken
// from the log is escaped: a log line cannot drive the terminal.
func TextWriter(w io.Writer, withFile bool) (emit func(Match) error, flush func() error) {
	// The table writes each cell and its padding apart: gathered, a flush of its
	// rows is one write, not a thousand.
	bw := bufio.NewWriterSize(w, 64<<10)
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	flush = func() error {
		if err := tw.Flush(); err != nil {
			return err
		}
		return bw.Flush()
	}
	rows := 0
	emit = func(m Match) error {
		if rows%textFlushRows == 0 {
			if rows > 0 {
				if err := flush(); err != nil {
					return err
				}
			}
			fmt.Fprintln(tw, "LINE\tNODE\tSEVERITY\tACTION\tMODE\tRULE\tCAPTURES\tTEXT")
		}
		rows++
		line := strconv.Itoa(m.Line)
		if withFile {
			line = Escape(m.File) + ":" + line
		}
		node := Escape(m.Node)
		if node == "" {
			node = "-"
		}
		_, err := fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%s\n", line, node, m.Severity, m.Action, m.Mode, m.Pack, m.Rule,
			fmtCaptures(m.Captures), clip(Escape(strings.TrimSpace(m.Text)), 100))
		return err
	}
	return emit, flush
}

// Escape makes text from a log safe to print on a terminal: control characters,
// other non-printing runes and invalid UTF-8 become Go-style escapes (\x1b,
// \u202e, \t).
func Escape(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// WriteSummary prints one row per rule that matched, most severe first.
func (s *Scanner) WriteSummary(w io.Writer) error {
	type row struct {
		r  *rules.Compiled
		st *RuleStats
	}
	var rows []row
	for r, st := range s.Stats.PerRule {
		rows = append(rows, row{r, st})
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.r.Severity.Rank() != b.r.Severity.Rank() {
			return a.r.Severity.Rank() > b.r.Severity.Rank()
		}
		if a.st.Matches != b.st.Matches {
			return a.st.Matches > b.st.Matches
		}
		return a.r.String() < b.r.String()
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nscanned %d lines", s.Stats.Lines)
	if s.Stats.Truncated > 0 {
		fmt.Fprintf(tw, " (%d longer than %d bytes, truncated)", s.Stats.Truncated, MaxLineBytes)
	}
	if s.Stats.Merged > 0 {
		fmt.Fprintf(tw, " (%d of hosts past the first %d counted with their input's lines without a host)", s.Stats.Merged, MaxStreams)
	}
	if s.Stats.Untimed > 0 {
		fmt.Fprintf(tw, " (%d without a time of their own)", s.Stats.Untimed)
	}
	fmt.Fprintf(tw, "; %d rules matched\n", len(rows))
	if len(rows) == 0 {
		return tw.Flush()
	}
	fmt.Fprintln(tw, "RULE\tSEVERITY\tACTION\tMATCHES\tFIRED\tDESCRIPTION")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.r, r.r.Severity, r.r.Action, r.st.Matches, r.st.Fired, clip(r.r.Description, 70))
	}
	return tw.Flush()
}

func fmtCaptures(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = Escape(k) + "=" + Escape(m[k])
	}
	return strings.Join(parts, ",")
}

// clip shortens s to at most n runes.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, k := 0, 0
	for k < n-1 {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		k++
	}
	return s[:i] + "…"
}
