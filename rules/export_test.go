package rules

// MatchNaive is the reference matcher: every rule's regexes on the line, without
// the prefilter. Match must always return the same hits; tests and benchmarks use it.
func (e *Engine) MatchNaive(l Line, dst []Hit) []Hit {
	done := make([]bool, len(e.groups))
	for i := range e.set.Rules {
		dst = e.eval(i, l, true, e.set.Rules[i].Companion != nil, done, dst)
	}
	return dst
}
