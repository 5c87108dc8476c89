package probe

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every parameter of every probe that names a host or a file is held to the
// allow-list: table cases per probe, each with the value, whether it passes, and what
// a refusal says.
func TestAllowListPerProbe(t *testing.T) {
	dir := t.TempDir()
	allowedDir := filepath.Join(dir, "probes")
	outside := filepath.Join(dir, "elsewhere")
	for _, d := range []string{allowedDir, filepath.Join(allowedDir, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string) string {
		if err := os.WriteFile(path, []byte("[]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	inside := write(filepath.Join(allowedDir, "a100.yaml"))
	deeper := write(filepath.Join(allowedDir, "sub", "h100.yaml"))
	secret := write(filepath.Join(outside, "token"))
	link := filepath.Join(allowedDir, "link.yaml")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}

	nodeLists := 0
	allow := AllowList{
		PeerPrefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/28")},
		PeerHosts:    []string{"iperf.example.com"},
		PeerNodes: func(context.Context) ([]string, error) {
			nodeLists++
			return []string{"10.0.0.2", "gpu-2", "fd00::2"}, nil
		},
		Hostengines: append(append([]string{}, DefaultHostengines...), "10.0.0.9:5555"),
		FileDirs:    []string{allowedDir},
		Ports:       []PortRange{{5201, 5210}, {7000, 7000}},
	}
	type tc struct {
		value string
		ok    bool
		why   string // in the refusal
	}
	peers := []tc{
		{"10.0.0.2", true, ""}, {"gpu-2", true, ""}, {"GPU-2.", true, ""}, {"fd00::2", true, ""},
		{"192.0.2.9", true, ""}, {"iperf.example.com", true, ""},
		{"10.0.0.3", false, "not an address of a node that runs the probe agent"},
		{"192.0.2.16", false, "nor in the allowed peers"},
		{"169.254.169.254", false, "not an address of a node"},
		{"127.0.0.1", false, "not an address of a node"},
		{"evil.example.com", false, "not an address of a node"},
	}
	ports := []tc{
		{"5201", true, ""}, {"5210", true, ""}, {"7000", true, ""},
		{"5211", false, "not an allowed port (allowed: 5201-5210, 7000"},
		{"22", false, "not an allowed port"}, {"10250", false, "not an allowed port"},
	}
	cases := map[string]map[string][]tc{
		"iperf3":        {"peer": peers, "port": ports},
		"iperf3-server": {"port": ports},
		"ping":          {"peer": peers},
		"dcgm": {"host": {
			{"localhost", true, ""}, {"127.0.0.1:5555", true, ""}, {"[::1]:5555", true, ""}, {"::1", true, ""},
			{"10.0.0.9:5555", true, ""},
			{"10.0.0.9:5556", false, "not an allowed hostengine"},
			{"10.0.0.9", false, "not an allowed hostengine"},
			{"nv-hostengine.gpu-operator", false, "not an allowed hostengine (allowed: localhost, 127.0.0.1, ::1, 10.0.0.9:5555"},
		}},
		"dgemm": {"thresholds": {
			{inside, true, ""}, {deeper, true, ""},
			{secret, false, "not under an allowed directory"},
			{link, false, "not under an allowed directory"}, // resolves to outside
			{allowedDir + "/sub/../../elsewhere/token", false, "clean absolute path"},
			{allowedDir + "/missing.yaml", false, "cannot resolve"},
			{filepath.Join(allowedDir, "sub"), false, "not a regular file"},
		}},
	}
	covered := map[string]bool{}
	for _, spec := range Default().List() {
		for _, ps := range spec.Params {
			if ps.Target == "" {
				continue
			}
			covered[spec.Name+"."+ps.Name] = true
			table := cases[spec.Name][ps.Name]
			if len(table) == 0 {
				t.Errorf("%s: parameter %s (target %s) has no allow-list cases", spec.Name, ps.Name, ps.Target)
			}
			for _, c := range table {
				err := allow.Check(context.Background(), spec.Params, Params{ps.Name: c.value})
				var pe *ParamError
				switch {
				case c.ok && err != nil:
					t.Errorf("%s %s=%q refused: %v", spec.Name, ps.Name, c.value, err)
				case !c.ok && (!errors.As(err, &pe) || pe.Param != ps.Name || !strings.Contains(err.Error(), c.why)):
					t.Errorf("%s %s=%q: got %v, want a refusal saying %q", spec.Name, ps.Name, c.value, err, c.why)
				}
			}
		}
	}
	for probe, params := range cases {
		for name := range params {
			if !covered[probe+"."+name] {
				t.Errorf("cases for %s.%s, which no probe holds to the allow-list", probe, name)
			}
		}
	}
	if nodeLists == 0 {
		t.Error("the agent nodes were never asked")
	}
}

// The zero allow-list allows no peer, hostengine or file; a node list that fails is
// ErrCannotCheck, not the caller's mistake.
func TestAllowListClosedByDefault(t *testing.T) {
	ctx := context.Background()
	for name, p := range map[string]Params{"iperf3": {"peer": "10.0.0.2"}, "iperf3-server": {"port": "5201"},
		"dcgm": {"host": "localhost"}, "dgemm": {"thresholds": "/etc/hostname"}} {
		var pe *ParamError
		if err := (AllowList{}).Check(ctx, mustSpec(t, name).Params, p); !errors.As(err, &pe) {
			t.Errorf("%s %v allowed by the zero allow-list: %v", name, p, err)
		}
	}
	failing := AllowList{PeerNodes: func(context.Context) ([]string, error) { return nil, errors.New("apiserver down") }}
	err := failing.Check(ctx, mustSpec(t, "ping").Params, Params{"peer": "10.0.0.2"})
	if !errors.Is(err, ErrCannotCheck) || !strings.Contains(err.Error(), "apiserver down") {
		t.Errorf("failing node list: %v", err)
	}
}

// Registration refuses a host or file parameter that names no target, so a new
// probe cannot skip the allow-list.
func TestRegisterNeedsTarget(t *testing.T) {
	for _, typ := range []ParamType{TypeHost, TypeHostPort, TypeFile, TypePort} {
		err := NewRegistry().Register(Spec{Name: "new", New: func(Config) Probe { return nil },
			Params: Schema{{Name: "where", Type: typ, Help: "somewhere"}}})
		if err == nil || !strings.Contains(err.Error(), "no Target") {
			t.Errorf("%s parameter without a target: %v", typ, err)
		}
	}
}

// Every number, duration and list a probe takes is bounded: a caller cannot ask for a
// week-long run, a terabyte copy or a million iterations.
func TestEveryNumberBounded(t *testing.T) {
	for _, s := range Default().List() {
		for _, p := range s.Params {
			switch p.Type {
			case TypeInt, TypeFloat, TypeDuration, TypeIntList:
				if !p.bounded() {
					t.Errorf("%s: parameter %s (%s) has no Min/Max", s.Name, p.Name, p.Type)
				}
			}
		}
	}
}
