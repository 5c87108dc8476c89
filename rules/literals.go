package rules

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// minLiteralLen is the shortest literal worth prefiltering on: shorter ones match
// too many benign lines to save work, so such rules run their regex on every line.
const minLiteralLen = 3

// maxExact bounds the cross products built for small alternations such as (Fatal|Non-fatal).
const maxExact = 16

// maxPrefix bounds the sets of prefixes kept for an alternation's branches (see
// litInfo.prefix), and the literals built from them.
const maxPrefix = 64

// regex is a rule's regular expression: what the engine reads of its syntax, from
// one parse, and the program, compiled on first use. Most rules never meet a line
// that holds their literals, so most are never compiled.
type regex struct {
	expr string
	// literals: every match contains one of them, compared ASCII
	// case-insensitively; nil means no such set was found (the regex must run on
	// every line).
	literals []string
	// sets: every match contains one literal of each set (see literalSetsOf).
	sets [][]string
	// anchored: the regex holds ^ or \A, which match at the text's start but not in
	// its middle.
	anchored bool
	// startAnchored: every match starts at the text's start (\A first in every
	// branch), so a failing run costs about one try: checking sets first costs more.
	startAnchored bool
	// names are the capture names by index, as the program's SubexpNames.
	names []string

	once sync.Once
	prog *regexp.Regexp
}

// parseRegex parses expr (RE2 syntax, as regexp.Compile does) for its regex.
func parseRegex(expr string) (*regex, error) {
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	s := tree.Simplify()
	a := newAnalysis()
	return &regex{expr: expr, literals: a.literalsOf(s), sets: a.literalSetsOf(s), anchored: anchoredAt(tree),
		startAnchored: startAnchored(tree), names: tree.CapNames()}, nil
}

// compiled returns the program, compiling it the first time. regexp.Compile fails
// only where syntax.Parse does, which parseRegex has ruled out.
func (r *regex) compiled() *regexp.Regexp {
	r.once.Do(func() { r.prog = regexp.MustCompile(r.expr) })
	return r.prog
}

// literalsOf returns the required literals of a simplified regex (see regex).
func (a *analysis) literalsOf(re *syntax.Regexp) []string {
	info := a.analyze(re)
	if !usable(info.required) {
		return nil
	}
	return withoutSuperstrings(dedupe(info.required))
}

func usable(set []string) bool {
	if len(set) == 0 {
		return false
	}
	for _, s := range set {
		if len(s) < minLiteralLen {
			return false
		}
	}
	return true
}

// analysis reads the literals of one parsed regex. The required sets visit a
// node's sub-expressions again for every alternation above them, so what a node
// matches is worked out once (memo); the litInfo kept there is shared, never
// changed in place.
type analysis struct {
	memo map[*syntax.Regexp]litInfo
}

func newAnalysis() *analysis { return &analysis{memo: map[*syntax.Regexp]litInfo{}} }

// litInfo describes what a sub-expression matches.
// exact: the sub-expression matches exactly one of these strings (nil: unknown).
// required: every match contains one of these strings (nil: unknown).
// prefix: every match starts with one of these strings (nil: unknown). A literal
// before an alternation of branches that each start with their own words
// ("NVRM: (?:GSP RPC timeout|FATAL: ...)", as syntax.Parse factors common prefixes
// out) then yields the joined literals, rarer than the shared word alone.
type litInfo struct {
	exact    []string
	required []string
	prefix   []string
}

func (a *analysis) analyze(re *syntax.Regexp) litInfo {
	if in, ok := a.memo[re]; ok {
		return in
	}
	in := a.analyzeOp(re)
	if in.exact != nil {
		in.prefix = in.exact
	}
	a.memo[re] = in
	return in
}

func (a *analysis) analyzeOp(re *syntax.Regexp) litInfo {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return litInfo{exact: []string{""}}
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return foldLiteral(re.Rune)
		}
		s := string(re.Rune)
		return litInfo{exact: []string{s}, required: []string{s}}
	case syntax.OpCharClass:
		if s, ok := asciiLetterClass(re.Rune); ok {
			return litInfo{exact: []string{s}, required: []string{s}}
		}
		if set := smallClass(re.Rune); set != nil {
			return litInfo{exact: set, required: set}
		}
		return litInfo{}
	case syntax.OpCapture:
		return a.analyze(re.Sub[0])
	case syntax.OpQuest:
		// x? is "" or x: exact when x is (" expedited" in "detected(?: expedited)?"),
		// so the words around it still join; it requires nothing.
		in := a.analyze(re.Sub[0])
		if in.exact != nil && len(in.exact) < maxExact {
			return litInfo{exact: append([]string{""}, in.exact...)}
		}
		return litInfo{}
	case syntax.OpPlus:
		in := a.analyze(re.Sub[0])
		return litInfo{required: in.required, prefix: in.prefix}
	case syntax.OpRepeat:
		if re.Min == 0 {
			return litInfo{}
		}
		in := a.analyze(re.Sub[0])
		if re.Min == 1 && re.Max == 1 {
			return in
		}
		return litInfo{required: in.required, prefix: in.prefix}
	case syntax.OpConcat:
		return a.analyzeConcat(re.Sub)
	case syntax.OpAlternate:
		var out litInfo
		exactOK, reqOK, prefixOK := true, true, true
		for _, sub := range re.Sub {
			in := a.analyze(sub)
			if in.exact == nil {
				exactOK = false
			}
			if in.required == nil {
				reqOK = false
			}
			if in.prefix == nil {
				prefixOK = false
			}
			out.exact = append(out.exact, in.exact...)
			out.required = append(out.required, in.required...)
			out.prefix = append(out.prefix, in.prefix...)
		}
		if !exactOK || len(out.exact) > maxExact {
			out.exact = nil
		}
		if !reqOK {
			out.required = nil
		}
		if !prefixOK || len(out.prefix) > maxPrefix {
			out.prefix = nil
		}
		if out.exact != nil && (out.required == nil || !usable(out.required)) {
			out.required = out.exact
		}
		return out
	}
	return litInfo{}
}

// analyzeConcat joins adjacent exact pieces into longer literals (cross products of
// small alternations) and keeps the best candidate set seen.
func (a *analysis) analyzeConcat(subs []*syntax.Regexp) litInfo {
	var best []string
	consider := func(set []string) {
		if better(set, best) {
			best = set
		}
	}
	run := []string{""}
	allExact := true
	// prefix: what every match starts with, while it is known.
	var prefix []string
	prefixOpen := true
	for _, sub := range subs {
		in := a.analyze(sub)
		if in.exact != nil && len(run)*len(in.exact) <= maxExact {
			next := make([]string, 0, len(run)*len(in.exact))
			for _, a := range run {
				for _, b := range in.exact {
					next = append(next, a+b)
				}
			}
			run = next
			continue
		}
		// The exact run before this piece, joined with how the piece starts, is
		// in every match too.
		if in.prefix != nil && len(run)*len(in.prefix) <= maxPrefix {
			joined := make([]string, 0, len(run)*len(in.prefix))
			for _, a := range run {
				for _, b := range in.prefix {
					joined = append(joined, a+b)
				}
			}
			consider(nonEmpty(joined))
			if prefixOpen {
				prefix, prefixOpen = joined, false
			}
		} else if prefixOpen {
			prefix, prefixOpen = run, false
		}
		allExact = false
		consider(nonEmpty(run))
		consider(in.required)
		if in.exact != nil {
			run = in.exact // too many combinations: restart the run from this piece
		} else {
			run = []string{""}
		}
	}
	consider(nonEmpty(run))
	out := litInfo{required: best}
	if allExact {
		out.exact = run
	}
	if prefixOpen {
		prefix = run
	}
	if len(prefix) > 0 && len(prefix) <= maxPrefix {
		out.prefix = prefix
	}
	return out
}

func nonEmpty(set []string) []string {
	for _, s := range set {
		if s == "" {
			return nil
		}
	}
	return set
}

// better prefers sets whose shortest member is longer, then smaller sets.
func better(a, b []string) bool {
	if len(a) == 0 {
		return false
	}
	if len(b) == 0 {
		return true
	}
	ma, mb := minLen(a), minLen(b)
	if ma != mb {
		return ma > mb
	}
	return len(a) < len(b)
}

func minLen(set []string) int {
	m := -1
	for _, s := range set {
		if m < 0 || len(s) < m {
			m = len(s)
		}
	}
	return m
}

// foldLiteral handles a case-insensitive literal. The prefilter folds ASCII only,
// while Go's (?i) also folds k to the Kelvin sign and s to the long s (and any
// non-ASCII letter to its Unicode folds), so such runes split the literal and only
// the ASCII-safe pieces are required.
func foldLiteral(runes []rune) litInfo {
	var pieces []string
	var cur strings.Builder
	safe := true
	for _, r := range runes {
		if r >= utf8.RuneSelf || r == 'k' || r == 'K' || r == 's' || r == 'S' {
			safe = false
			if cur.Len() > 0 {
				pieces = append(pieces, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteRune(unicode.ToLower(r))
	}
	if cur.Len() > 0 {
		pieces = append(pieces, cur.String())
	}
	if safe {
		s := string(pieces[0])
		return litInfo{exact: []string{s}, required: []string{s}}
	}
	var best string
	for _, p := range pieces {
		if len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return litInfo{}
	}
	return litInfo{required: []string{best}}
}

// asciiLetterClass recognises classes like [Xx]: one ASCII letter in either case,
// which the case-insensitive prefilter treats as that letter.
func asciiLetterClass(ranges []rune) (string, bool) {
	var letter rune = -1
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1]; r++ {
			if r >= utf8.RuneSelf || !unicode.IsLetter(r) {
				return "", false
			}
			l := unicode.ToLower(r)
			if letter >= 0 && l != letter {
				return "", false
			}
			letter = l
		}
	}
	if letter < 0 {
		return "", false
	}
	return string(letter), true
}

// smallClass expands a class of at most 4 ASCII characters (such as [rz] or [-_])
// into its members, so concatenations around it still yield literals.
func smallClass(ranges []rune) []string {
	var out []string
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1]; r++ {
			if r >= utf8.RuneSelf || len(out) == 4 {
				return nil
			}
			out = append(out, string(r))
		}
	}
	return out
}

func dedupe(set []string) []string {
	out := set[:0:0]
	for _, s := range set {
		if !slices.ContainsFunc(out, func(o string) bool { return asciiEqualFold(o, s) }) {
			out = append(out, s)
		}
	}
	return out
}

// asciiEqualFold reports whether a and b are equal with ASCII letters folded, as
// the prefilter compares them (sets are small: no map, no lower-cased copies).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if fold[a[i]] != fold[b[i]] {
			return false
		}
	}
	return true
}

// maxSets and maxSetSize bound the extra literal checks a rule gets before its regex.
// A set joined from an alternation's branches (see alternateSets) may be larger,
// up to maxJoinedSetSize: it rejects lines that hold a branch's common word and none
// of the rarer words of every branch, where the regex's failing run costs most.
const (
	maxSets          = 6
	maxSetSize       = 8
	maxJoinedSetSize = 32
)

// literalSetsOf returns sets of lower-case literals such that every match of a
// simplified regex contains one literal of each set: the pieces of a concatenation
// are each required, where literalsOf keeps only the best. Checking them is much
// cheaper than running a regex that fails, as most do on a candidate line.
func (a *analysis) literalSetsOf(re *syntax.Regexp) [][]string {
	var out [][]string
	seen := map[string]bool{}
	for _, set := range a.requiredSets(re) {
		if len(out) == maxSets {
			break
		}
		if len(set) > maxJoinedSetSize {
			continue
		}
		set = dedupe(set)
		for i, l := range set {
			set[i] = strings.ToLower(l)
		}
		set = withoutSuperstrings(set)
		sort.Strings(set)
		if k := strings.Join(set, "\x00"); !seen[k] {
			seen[k] = true
			out = append(out, set)
		}
	}
	return out
}

// withoutSuperstrings drops the members of a set that contain another member
// (ASCII case-insensitively, as the prefilter reads them): a line holding
// "foobar" holds "bar", so {"bar", "foobar"} asks for "bar".
func withoutSuperstrings(set []string) []string {
	low := make([]string, len(set))
	for i, l := range set {
		low[i] = strings.ToLower(l)
	}
	out := set[:0]
	for i, l := range set {
		redundant := false
		for j, m := range low {
			if i != j && len(m) < len(l) && strings.Contains(low[i], m) {
				redundant = true
				break
			}
		}
		if !redundant {
			out = append(out, l)
		}
	}
	return out
}

func (a *analysis) requiredSets(re *syntax.Regexp) [][]string {
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return a.requiredSets(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return a.requiredSets(re.Sub[0])
		}
		return nil
	case syntax.OpConcat:
		var out [][]string
		if r := a.analyze(re).required; usable(r) && len(r) <= maxSetSize {
			out = append(out, r)
		}
		for _, sub := range re.Sub {
			out = append(out, a.requiredSets(sub)...)
		}
		return out
	case syntax.OpAlternate:
		return a.alternateSets(re)
	}
	if r := a.analyze(re).required; usable(r) && len(r) <= maxSetSize {
		return [][]string{r}
	}
	return nil
}

// alternateSets returns the required sets of an alternation: its branches' best
// literals together (what analyze gives), and, for each set a branch requires, that
// set joined with the best literals of the other branches: a match of that branch
// holds a member of the set, a match of another branch that branch's best literal.
// Where one branch's literal is common in benign lines ("mlx5_core " before
// ".*(?i:fail|error|...)", "detected " of "Detected ... for GPU"), the set of its
// rarer words rejects the line before the regex, whose failing run on a long line
// is the costliest thing the engine does.
func (a *analysis) alternateSets(re *syntax.Regexp) [][]string {
	all := a.analyze(re).required
	if !usable(all) {
		return nil
	}
	var out [][]string
	if len(all) <= maxSetSize {
		out = append(out, all)
	}
	bests := make([][]string, len(re.Sub))
	for i, sub := range re.Sub {
		bests[i] = a.analyze(sub).required
		if !usable(bests[i]) {
			return out
		}
	}
	for i, sub := range re.Sub {
		others := len(all) - len(bests[i])
		if others >= maxJoinedSetSize {
			continue // every joined set would be too large to check
		}
		for _, set := range a.requiredSets(sub) {
			if len(set)+others > maxJoinedSetSize {
				continue
			}
			joined := slices.Clone(set)
			for j, b := range bests {
				if j != i {
					joined = append(joined, b...)
				}
			}
			if usable(joined) {
				out = append(out, joined)
			}
		}
	}
	return out
}

// containsFold reports whether s contains the lower-case literal, folding ASCII
// letters of s.
func containsFold(s, lower string) bool { return indexFold(s, lower) >= 0 }

// windowBack is how far before the first required literal matchesNear starts its
// first search: far enough for the word or two a pattern names before its literal
// ("eno1 NIC Link is Up").
const windowBack = 16

// matchesNear reports whether re matches text, as re.MatchString does, for a regex
// without start anchors whose every match holds one of some literals, the first of
// which text holds from byte p on (-1: none). Go's regexp tries every start position
// up to the leftmost match, which on a long line costs more than the match itself;
// a search from a little before p usually finds it. It starts after the last space
// before p (the word a pattern names before its literal: "eno1 NIC Link is Up",
// where the earliest start of the window is "eno1: igb: eno1 NIC...", twice the
// cost), then, if that finds nothing, after the first ASCII byte of the window that
// is no word character (a pattern whose prefix holds a space: "Port: 1 Link
// ACTIVE"). After such a byte \b and \B read as at the text's start: a match either
// search finds is a match of the whole text. When both find none, the whole text is
// searched.
func matchesNear(re *regexp.Regexp, text string, p int) bool {
	lo := max(1, p-windowBack)
	tried := 0
	for a := p; a >= lo; a-- {
		if text[a-1] == ' ' {
			if re.MatchString(text[a:]) {
				return true
			}
			tried = a
			break
		}
	}
	for a := lo; a <= p; a++ {
		if c := text[a-1]; c < utf8.RuneSelf && !isWordByte(c) {
			if a != tried && re.MatchString(text[a:]) {
				return true
			}
			break
		}
	}
	return re.MatchString(text)
}

// isWordByte reports whether c is a word character of \b: an ASCII letter, digit
// or underscore.
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// startAnchored reports whether every match of re starts at the text's start.
func startAnchored(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginText:
		return true
	case syntax.OpCapture:
		return startAnchored(re.Sub[0])
	case syntax.OpConcat:
		return len(re.Sub) > 0 && startAnchored(re.Sub[0])
	case syntax.OpAlternate:
		return !slices.ContainsFunc(re.Sub, func(sub *syntax.Regexp) bool { return !startAnchored(sub) })
	}
	return false
}

// anchoredAt reports whether a regex holds ^ or \A.
func anchoredAt(re *syntax.Regexp) bool {
	var walk func(*syntax.Regexp) bool
	walk = func(re *syntax.Regexp) bool {
		if re.Op == syntax.OpBeginLine || re.Op == syntax.OpBeginText {
			return true
		}
		return slices.ContainsFunc(re.Sub, walk)
	}
	return walk(re)
}

// indexFold returns the index of the first occurrence of the lower-case literal in
// s, folding ASCII letters of s, or -1.
func indexFold(s, lower string) int {
	if len(lower) == 0 {
		return 0
	}
	// IndexByte (vectorised) finds the places to compare, by the literal's byte
	// that log text holds least often: a letter in either case.
	k := 0
	for i := 1; i < len(lower); i++ {
		if byteFreq[lower[i]] < byteFreq[lower[k]] {
			k = i
		}
	}
	c := lower[k]
	other := c // the byte's other case, if it is a letter
	if 'a' <= c && c <= 'z' {
		other = c - 'a' + 'A'
	}
	next := func(b byte, from int) int {
		if from >= len(s) {
			return len(s)
		}
		if j := strings.IndexByte(s[from:], b); j >= 0 {
			return from + j
		}
		return len(s)
	}
	lo, up := next(c, k), len(s)
	if other != c {
		up = next(other, k)
	}
	for {
		i := min(lo, up)
		if i == len(s) {
			return -1
		}
		if start := i - k; start+len(lower) <= len(s) && equalFold(s[start:start+len(lower)], lower) {
			return start
		}
		if i == lo {
			lo = next(c, i+1)
		} else {
			up = next(other, i+1)
		}
	}
}
