package lokisource

import (
	"fmt"
	"regexp"
	"strings"
)

// matcherRE is one LogQL label matcher: name, operator, quoted value.
var matcherRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"$`)

// maxMatcher bounds a matcher's length (a regex over a naming convention, not a
// list of nodes).
const maxMatcher = 4096

// WithMatcher returns the selectors with one more label matcher each, e.g.
// node=~"gpu-a-.*" for a shard whose nodes follow a naming convention, so Loki
// sends the shard only its nodes' lines. A matcher that starts with "|" is added
// as a label filter after each selector instead ({source="kernel"} |
// node=~"gpu-a-.*"): the form for a label Loki keeps as structured metadata, which
// no stream selector can name (a stream matcher on it would select nothing).
func (s Selectors) WithMatcher(m string) (Selectors, error) {
	m = strings.TrimSpace(m)
	if len(m) > maxMatcher {
		return nil, fmt.Errorf("stream matcher: %d bytes, at most %d", len(m), maxMatcher)
	}
	filter := strings.HasPrefix(m, "|")
	if filter {
		m = strings.TrimSpace(m[1:])
	}
	if !matcherRE.MatchString(m) {
		return nil, fmt.Errorf("stream matcher %q: want one LogQL label matcher, e.g. node=~\"gpu-a-.*\", or a label filter, e.g. | node=~\"gpu-a-.*\"", m)
	}
	out := make(Selectors, len(s))
	for name, sel := range s {
		sel = strings.TrimSpace(sel)
		if !strings.HasPrefix(sel, "{") || !strings.HasSuffix(sel, "}") {
			return nil, fmt.Errorf("%s selector %q: want a LogQL stream selector {...}", name, sel)
		}
		if filter {
			out[name] = sel + " | " + m
		} else {
			out[name] = strings.TrimSuffix(sel, "}") + ", " + m + "}"
		}
	}
	return out, nil
}
