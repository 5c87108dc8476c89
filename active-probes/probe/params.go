package probe

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Params are a probe's parameters as text, the way they arrive in a query string or on a
// command line: {"peer": "10.0.0.7", "seconds": "5"}. A Schema validates them and fills
// in defaults; the typed accessors (Int, Float, ...) read resolved parameters.
type Params map[string]string

// Clone returns a copy of p.
func (p Params) Clone() Params {
	c := make(Params, len(p))
	for k, v := range p {
		c[k] = v
	}
	return c
}

// ParseCheckParams parses command-line parameters written check.name=value (the
// --param flags of faultline probe run and faultline-probe-agent check) into each
// check's Params.
func ParseCheckParams(flags []string) (map[string]Params, error) {
	m := map[string]Params{}
	for _, f := range flags {
		kv, v, ok := strings.Cut(f, "=")
		check, k, ok2 := strings.Cut(kv, ".")
		if !ok || !ok2 || check == "" || k == "" {
			return nil, fmt.Errorf("--param %q: want check.name=value", f)
		}
		if m[check] == nil {
			m[check] = Params{}
		}
		m[check][k] = v
	}
	return m, nil
}

// WriteValues writes " prefix+name=value" for each measurement, sorted by name, in
// full decimal ("1000000", "12.5"), never in exponent form: how the verdict lines
// and the agent's check command write a result's values.
func WriteValues(b *strings.Builder, prefix string, values map[string]float64) {
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		b.WriteString(" " + prefix + k + "=" + strconv.FormatFloat(values[k], 'f', -1, 64))
	}
}

// String returns the raw value of a parameter ("" when unset).
func (p Params) String(name string) string { return p[name] }

// Int returns an integer parameter (0 when unset or not an integer).
func (p Params) Int(name string) int {
	v, _ := strconv.Atoi(strings.TrimSpace(p[name]))
	return v
}

// Float returns a number parameter (0 when unset or not a number).
func (p Params) Float(name string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimSpace(p[name]), 64)
	return v
}

// Bool returns a boolean parameter (false when unset).
func (p Params) Bool(name string) bool {
	v, _ := strconv.ParseBool(strings.TrimSpace(p[name]))
	return v
}

// Duration returns a duration parameter ("90s", "2m"; a bare number is seconds).
func (p Params) Duration(name string) time.Duration {
	d, _ := parseDuration(p[name])
	return d
}

// IntList returns a comma-separated list of integers ("0,3,5"; nil when unset).
func (p Params) IntList(name string) []int {
	l, _ := parseIntList(p[name])
	return l
}

// ParamType is the kind of value a parameter takes.
type ParamType string

// Parameter types.
const (
	TypeString   ParamType = "string"
	TypeInt      ParamType = "int"
	TypeFloat    ParamType = "float"
	TypeBool     ParamType = "bool"
	TypeDuration ParamType = "duration" // Go syntax ("90s") or a number of seconds
	TypeHost     ParamType = "host"     // an IP address or a DNS hostname
	TypeIP       ParamType = "ip"       // an IP address
	TypePort     ParamType = "port"     // 1-65535
	TypeIntList  ParamType = "intlist"  // "0,3,5"
	TypeEnum     ParamType = "enum"     // one of Enum
	TypeFile     ParamType = "file"     // an absolute path to a readable regular file
	TypeHostPort ParamType = "hostport" // host or host:port
	TypeIface    ParamType = "iface"    // a network interface name or an IP address
)

// ParamSpec describes one parameter of a probe.
type ParamSpec struct {
	Name string    `json:"name"`
	Type ParamType `json:"type"`
	// Default is used when the parameter is not given ("" means no default).
	Default  string `json:"default,omitempty"`
	Required bool   `json:"required,omitempty"`
	// Min and Max bound int, float, duration (in seconds) and port values, and each
	// element of an intlist; both zero means unbounded.
	Min float64 `json:"min,omitempty"`
	Max float64 `json:"max,omitempty"`
	// Enum lists the allowed values of an enum.
	Enum []string `json:"enum,omitempty"`
	// MaxItems bounds the length of an intlist (0: 64).
	MaxItems int    `json:"max_items,omitempty"`
	Help     string `json:"help"`
	// Check, when set, validates a value further once its type is right (a DNS
	// name, a resource quantity).
	Check func(string) error `json:"-"`
	// Target says what a host, host:port or file parameter names; the agent holds
	// such values to its allow-list (AllowList).
	Target Target `json:"target,omitempty"`
	// FromCapacity names a resource of the Node (nvidia.com/gpu) whose capacity, as the
	// API server reports it, stands in for a value the run does not give; the
	// controller fills it in before asking the agent (the agent does not read Nodes).
	FromCapacity string `json:"from_capacity,omitempty"`
}

// Schema is a probe's list of parameters.
type Schema []ParamSpec

// Lookup returns the spec of a parameter.
func (s Schema) Lookup(name string) (ParamSpec, bool) {
	for _, ps := range s {
		if ps.Name == name {
			return ps, true
		}
	}
	return ParamSpec{}, false
}

// ParamError says which parameter is wrong and why.
type ParamError struct {
	Param  string
	Value  string
	Reason string
}

func (e *ParamError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("parameter %q: %s", e.Param, e.Reason)
	}
	return fmt.Sprintf("parameter %q=%q: %s", e.Param, e.Value, e.Reason)
}

// Resolve validates p against the schema and returns a new Params with the defaults of
// unset parameters filled in. Unknown parameters, missing required ones and invalid
// values are errors; all problems are reported together (errors.Join of *ParamError).
func (s Schema) Resolve(p Params) (Params, error) {
	out := Params{}
	var errs []error
	names := make([]string, 0, len(p))
	for name := range p {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := s.Lookup(name); !ok {
			errs = append(errs, &ParamError{Param: name, Reason: "unknown parameter (known: " + strings.Join(s.names(), ", ") + ")"})
		}
	}
	for _, ps := range s {
		v, given := p[ps.Name]
		v = strings.TrimSpace(v)
		if !given || v == "" {
			if ps.Required {
				errs = append(errs, &ParamError{Param: ps.Name, Reason: "required: " + ps.Help})
				continue
			}
			if ps.Default == "" {
				continue
			}
			v = ps.Default
		}
		if err := ps.validate(v); err != nil {
			errs = append(errs, &ParamError{Param: ps.Name, Value: v, Reason: err.Error()})
			continue
		}
		out[ps.Name] = v
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func (s Schema) names() []string {
	n := make([]string, 0, len(s))
	for _, ps := range s {
		n = append(n, ps.Name)
	}
	return n
}

func (ps ParamSpec) bounded() bool { return ps.Min != 0 || ps.Max != 0 }

func (ps ParamSpec) checkRange(v float64, unit string) error {
	if !ps.bounded() {
		return nil
	}
	if v < ps.Min || v > ps.Max {
		return fmt.Errorf("must be between %s and %s%s", fmtNum(ps.Min), fmtNum(ps.Max), unit)
	}
	return nil
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func (ps ParamSpec) validate(v string) error {
	if err := ps.validateType(v); err != nil {
		return err
	}
	if ps.Check != nil {
		return ps.Check(v)
	}
	return nil
}

func (ps ParamSpec) validateType(v string) error {
	switch ps.Type {
	case TypeString, "":
		if len(v) > 256 {
			return errors.New("longer than 256 characters")
		}
		for _, r := range v {
			if r < 0x20 || r == 0x7f {
				return errors.New("contains control characters")
			}
		}
		return nil
	case TypeInt:
		n, err := strconv.Atoi(v)
		if err != nil {
			return errors.New("not an integer")
		}
		return ps.checkRange(float64(n), "")
	case TypeFloat:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("not a number")
		}
		return ps.checkRange(f, "")
	case TypeBool:
		if _, err := strconv.ParseBool(v); err != nil {
			return errors.New("not a boolean (true or false)")
		}
		return nil
	case TypeDuration:
		d, err := parseDuration(v)
		if err != nil {
			return err
		}
		return ps.checkRange(d.Seconds(), " seconds")
	case TypePort:
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return errors.New("not a port number (1-65535)")
		}
		return ps.checkRange(float64(n), "")
	case TypeHost:
		return ValidateHost(v)
	case TypeIP:
		if _, err := netip.ParseAddr(v); err != nil {
			return errors.New("not an IP address")
		}
		return nil
	case TypeHostPort:
		return validateHostPort(v)
	case TypeIface:
		return validateIface(v)
	case TypeIntList:
		l, err := parseIntList(v)
		if err != nil {
			return err
		}
		limit := ps.MaxItems
		if limit == 0 {
			limit = 64
		}
		if len(l) > limit {
			return fmt.Errorf("more than %d items", limit)
		}
		for _, n := range l {
			if err := ps.checkRange(float64(n), ""); err != nil {
				return fmt.Errorf("item %d: %w", n, err)
			}
		}
		return nil
	case TypeEnum:
		for _, e := range ps.Enum {
			if v == e {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(ps.Enum, ", "))
	case TypeFile:
		if !strings.HasPrefix(v, "/") {
			return errors.New("must be an absolute path")
		}
		st, err := os.Stat(v)
		if err != nil {
			return fmt.Errorf("cannot read: %v", errors.Unwrap(err))
		}
		if !st.Mode().IsRegular() {
			return errors.New("not a regular file")
		}
		return nil
	}
	return fmt.Errorf("unknown parameter type %q", ps.Type)
}

// ValidateHost accepts an IP address (v4 or v6) or a DNS hostname (RFC 1123: labels of
// letters, digits and hyphens, not starting or ending with a hyphen, at most 253
// characters). A value starting with "-" is refused: it would read as an option.
func ValidateHost(v string) error {
	if v == "" {
		return errors.New("empty host")
	}
	if _, err := netip.ParseAddr(v); err == nil {
		return nil
	}
	if strings.HasPrefix(v, "-") {
		return errors.New("must be an IP address or a hostname (it starts with '-')")
	}
	h := strings.TrimSuffix(v, ".")
	if len(h) > 253 || h == "" {
		return errors.New("must be an IP address or a hostname")
	}
	for _, label := range strings.Split(h, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("must be an IP address or a hostname")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return errors.New("must be an IP address or a hostname")
			}
		}
	}
	return nil
}

// validateIface accepts a network interface name (as Linux allows: up to 15 characters,
// no "/", no whitespace; here also no leading "-") or an IP address.
func validateIface(s string) error {
	if _, err := netip.ParseAddr(s); err == nil {
		return nil
	}
	if len(s) == 0 || len(s) > 15 || s[0] == '-' {
		return errors.New("must be an interface name or an IP address")
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-@:", c)) {
			return errors.New("must be an interface name or an IP address")
		}
	}
	return nil
}

func validateHostPort(v string) error {
	if err := ValidateHost(v); err == nil {
		return nil
	}
	if ap, err := netip.ParseAddrPort(v); err == nil && ap.Port() != 0 {
		return nil
	}
	i := strings.LastIndexByte(v, ':')
	if i <= 0 {
		return errors.New("must be host or host:port")
	}
	n, err := strconv.Atoi(v[i+1:])
	if err != nil || n < 1 || n > 65535 {
		return errors.New("must be host or host:port (port 1-65535)")
	}
	if err := ValidateHost(v[:i]); err != nil {
		return err
	}
	return nil
}

func parseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, errors.New("empty duration")
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, errors.New("not a duration")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New(`not a duration ("90s", "2m" or seconds)`)
	}
	return d, nil
}

func parseIntList(v string) ([]int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	seen := map[int]bool{}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("not a comma-separated list of integers (%q)", f)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}
