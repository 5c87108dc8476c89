package rules

import (
	"fmt"
	"slices"
	"strings"
)

// TaintKeyPrefix is the prefix of the taint keys a pack may use without an
// allowance: the controller's admission policy lets it write no others.
const TaintKeyPrefix = "faultline.io/"

// TaintEffects are the effects Kubernetes knows.
var TaintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// TaintPolicy is which taints the packs of a load may ask for. A NoExecute taint
// evicts every pod of the node at once, PodDisruptionBudgets or not, and a key
// outside faultline.io/ belongs to someone else: either needs the operator's
// allowance where the packs are loaded (--allow-taint-effects,
// --allow-taint-key-prefixes). The zero policy is the default: the effects
// NoSchedule and PreferNoSchedule, keys under faultline.io/.
type TaintPolicy struct {
	// Effects are the effects a taint may have; empty: DefaultTaintEffects. It
	// includes NoSchedule, every rule's default effect (Check).
	Effects []string
	// KeyPrefixes are the prefixes, each ending in "/", a taint key may have
	// besides faultline.io/.
	KeyPrefixes []string
}

// DefaultTaintEffects are the effects a taint may have without an allowance.
func DefaultTaintEffects() []string { return []string{"NoSchedule", "PreferNoSchedule"} }

// Check reports a policy that cannot be used: an unknown effect, effects without
// NoSchedule, a key prefix that does not end a key's prefix part.
func (p TaintPolicy) Check() error {
	for _, e := range p.Effects {
		if !slices.Contains(TaintEffects, e) {
			return fmt.Errorf("taint effect %q: want one of %s", e, strings.Join(TaintEffects, ", "))
		}
	}
	if len(p.Effects) > 0 && !slices.Contains(p.Effects, "NoSchedule") {
		return fmt.Errorf("taint effects %s: NoSchedule, the default effect of every rule's taint, must be among them", strings.Join(p.Effects, ", "))
	}
	for _, k := range p.KeyPrefixes {
		// A prefix ends in the slash, so example.com/ cannot stand for example.com.evil/.
		if !strings.HasSuffix(k, "/") || !taintKeyRe.MatchString(k+"x") {
			return fmt.Errorf("taint key prefix %q: want a DNS subdomain followed by /, e.g. example.com/", k)
		}
	}
	return nil
}

// effects are the effects allowed.
func (p TaintPolicy) effects() []string {
	if len(p.Effects) == 0 {
		return DefaultTaintEffects()
	}
	return p.Effects
}

// keyPrefixes are the key prefixes allowed.
func (p TaintPolicy) keyPrefixes() []string {
	return append([]string{TaintKeyPrefix}, p.KeyPrefixes...)
}

// keyError is why key is not allowed, or "".
func (p TaintPolicy) keyError(key string) string {
	prefixes := p.keyPrefixes()
	for _, pre := range prefixes {
		if strings.HasPrefix(key, pre) {
			return ""
		}
	}
	return fmt.Sprintf("taint key %q is not under %s: a key of another owner needs the controller's --allow-taint-key-prefixes (and an admission policy that lets the controller write it)",
		key, strings.Join(prefixes, ", "))
}

// effectError is why effect (a valid one) is not allowed, or "".
func (p TaintPolicy) effectError(effect string) string {
	allowed := p.effects()
	if slices.Contains(allowed, effect) {
		return ""
	}
	why := ""
	if effect == "NoExecute" {
		why = " (it evicts every pod of the node at once, PodDisruptionBudgets or not)"
	}
	return fmt.Sprintf("taint effect %s%s is not allowed: the allowed effects are %s; more need the controller's --allow-taint-effects (the chart's controller.taintEffects)",
		effect, why, strings.Join(allowed, ", "))
}
