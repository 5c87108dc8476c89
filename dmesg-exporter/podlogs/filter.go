package podlogs

import (
	"fmt"
	"regexp"
	"strings"
)

func compile(what, expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("podlogs: %s filter %q: %w", what, expr, err)
	}
	return re, nil
}

func compileAll(what string, exprs []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, e := range exprs {
		re, err := compile(what, e)
		if err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

// matchPod applies the filters to a pod directory name.
func (t *Tailer) matchPod(dir string) bool {
	parts := strings.Split(dir, "_")
	if len(parts) != 3 {
		return false
	}
	ns, pod := parts[0], parts[1]
	if len(t.include) > 0 && !anyMatch(t.include, ns) {
		return false
	}
	if anyMatch(t.exclude, ns) {
		return false
	}
	if t.podName != nil && !t.podName.MatchString(pod) {
		return false
	}
	return t.cfg.Allow == nil || t.cfg.Allow(ns, pod, parts[2])
}

func anyMatch(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
