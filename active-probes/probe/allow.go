package probe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Target says what a parameter that names a host or a file points at, so that an
// agent holds it to the operator's allow-list (AllowList) before anything runs.
// Registration refuses a host, host:port or file parameter without one.
type Target string

// Targets.
const (
	// TargetPeer: another node to measure against (iperf3, ping).
	TargetPeer Target = "peer"
	// TargetHostengine: a DCGM nv-hostengine (dcgm's host).
	TargetHostengine Target = "hostengine"
	// TargetFile: a file on the node that the probe reads (dgemm's thresholds).
	TargetFile Target = "file"
	// TargetPort: a TCP port a probe listens on or connects to (iperf3's): without a
	// limit, a server could squat the port of a host-network daemon that restarts, and
	// a client could knock on any port of a peer.
	TargetPort Target = "port"
)

// DefaultPorts are the ports iperf3 may use unless the operator allows others: its
// own (5201) and the nine after it.
var DefaultPorts = []PortRange{{First: 5201, Last: 5210}}

// PortRange is an inclusive range of ports.
type PortRange struct{ First, Last int }

// ParsePortRange reads "5201" or "5201-5210".
func ParsePortRange(v string) (PortRange, error) {
	first, last, isRange := strings.Cut(v, "-")
	if !isRange {
		last = first
	}
	f, err1 := strconv.Atoi(first)
	l, err2 := strconv.Atoi(last)
	if err1 != nil || err2 != nil || f < 1 || l > 65535 || f > l {
		return PortRange{}, fmt.Errorf("port range %q: want PORT or FIRST-LAST within 1-65535", v)
	}
	return PortRange{First: f, Last: l}, nil
}

func (r PortRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(r.First)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// DefaultProbeFileDir is where files named by probe parameters must lie unless the
// operator allows other directories.
const DefaultProbeFileDir = "/etc/faultline/probes"

// DefaultHostengines are the nv-hostengines dcgm may use unless the operator allows
// others: the node's own, on any port.
var DefaultHostengines = []string{"localhost", "127.0.0.1", "::1"}

// AllowList holds what parameters naming hosts and files may name. A caller allowed
// to run probes could otherwise aim them elsewhere: ping or iperf3 at any address
// from the node's network, dcgmi at another node's hostengine, dgemm's thresholds at
// any file the agent can read.
type AllowList struct {
	// PeerPrefixes are the addresses peers may have (an IP peer inside one is allowed).
	PeerPrefixes []netip.Prefix
	// PeerHosts are host names peers may have, exactly.
	PeerHosts []string
	// PeerNodes, when set, returns the addresses and host names of the nodes that run
	// the agent: a peer among them is allowed (the default peers).
	PeerNodes func(ctx context.Context) ([]string, error)
	// Hostengines are the hostengines dcgm may use: "host" (any port) or "host:port".
	Hostengines []string
	// FileDirs are the directories whose files (at any depth, after symlinks are
	// resolved) file parameters may name.
	FileDirs []string
	// Ports are the ports iperf3 may listen on or connect to.
	Ports []PortRange
}

// ErrCannotCheck: the allow-list could not be consulted (the agent nodes could not be
// listed); the request is not at fault and may be retried.
var ErrCannotCheck = errors.New("cannot check the allow-list")

// Check holds the resolved parameters p of schema s to the allow-list. All problems
// are reported together (errors.Join of *ParamError).
func (a AllowList) Check(ctx context.Context, s Schema, p Params) error {
	var errs []error
	for _, ps := range s {
		v, ok := p[ps.Name]
		if !ok || ps.Target == "" {
			continue
		}
		var err error
		switch ps.Target {
		case TargetPeer:
			err = a.checkPeer(ctx, v)
		case TargetHostengine:
			err = a.checkHostengine(v)
		case TargetFile:
			err = a.checkFile(v)
		case TargetPort:
			err = a.checkPort(v)
		default:
			err = fmt.Errorf("unknown target %q", ps.Target)
		}
		switch {
		case errors.Is(err, ErrCannotCheck):
			errs = append(errs, fmt.Errorf("parameter %q: %w", ps.Name, err))
		case err != nil:
			errs = append(errs, &ParamError{Param: ps.Name, Value: v, Reason: err.Error()})
		}
	}
	return errors.Join(errs...)
}

func (a AllowList) checkPeer(ctx context.Context, v string) error {
	if addr, err := netip.ParseAddr(v); err == nil {
		for _, pf := range a.PeerPrefixes {
			if pf.Contains(addr.Unmap()) {
				return nil
			}
		}
	} else if containsFold(a.PeerHosts, v) {
		return nil
	}
	if a.PeerNodes != nil {
		nodes, err := a.PeerNodes(ctx)
		if err != nil {
			return fmt.Errorf("%w: listing the agent nodes: %w", ErrCannotCheck, err)
		}
		if sameHost(nodes, v) {
			return nil
		}
		return errors.New("not an address of a node that runs the probe agent, nor in the allowed peers (--allow-peer)")
	}
	return errors.New("not in the allowed peers (--allow-peer)")
}

// sameHost reports whether v is among hosts, comparing addresses as addresses and
// names without case.
func sameHost(hosts []string, v string) bool {
	addr, err := netip.ParseAddr(v)
	for _, h := range hosts {
		if err == nil {
			if ha, herr := netip.ParseAddr(h); herr == nil && ha.Unmap() == addr.Unmap() {
				return true
			}
			continue
		}
		if strings.EqualFold(strings.TrimSuffix(h, "."), strings.TrimSuffix(v, ".")) {
			return true
		}
	}
	return false
}

func (a AllowList) checkHostengine(v string) error {
	host, port := splitHostPort(v)
	for _, allowed := range a.Hostengines {
		ah, ap := splitHostPort(allowed)
		if sameHost([]string{ah}, host) && (ap == "" || ap == port) {
			return nil
		}
	}
	return fmt.Errorf("not an allowed hostengine (allowed: %s; --allow-hostengine)", strings.Join(a.Hostengines, ", "))
}

// splitHostPort splits "host", "host:port", "[v6]:port" and a bare IPv6 address.
func splitHostPort(v string) (host, port string) {
	if ap, err := netip.ParseAddrPort(v); err == nil {
		return ap.Addr().String(), strconv.Itoa(int(ap.Port()))
	}
	if _, err := netip.ParseAddr(v); err == nil {
		return v, ""
	}
	if i := strings.LastIndexByte(v, ':'); i > 0 {
		return v[:i], v[i+1:]
	}
	return v, ""
}

func (a AllowList) checkFile(v string) error {
	if !filepath.IsAbs(v) || filepath.Clean(v) != v {
		return errors.New("must be a clean absolute path")
	}
	// The file as the probe will open it: symlinks resolved, so a link under an
	// allowed directory cannot point out of it.
	real, err := filepath.EvalSymlinks(v)
	if err != nil {
		return fmt.Errorf("cannot resolve: %v", errors.Unwrap(err))
	}
	for _, dir := range a.FileDirs {
		d, err := filepath.EvalSymlinks(dir)
		if err != nil {
			continue // an allowed directory that does not exist holds nothing
		}
		if rel, err := filepath.Rel(d, real); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && rel != "." {
			if st, err := os.Stat(real); err != nil || !st.Mode().IsRegular() {
				return errors.New("not a regular file")
			}
			return nil
		}
	}
	return fmt.Errorf("not under an allowed directory (allowed: %s; --allow-file-dir)", strings.Join(a.FileDirs, ", "))
}

func (a AllowList) checkPort(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return errors.New("not a port")
	}
	allowed := make([]string, len(a.Ports))
	for i, r := range a.Ports {
		if n >= r.First && n <= r.Last {
			return nil
		}
		allowed[i] = r.String()
	}
	return fmt.Errorf("not an allowed port (allowed: %s; --allow-port)", strings.Join(allowed, ", "))
}

func containsFold(l []string, s string) bool {
	for _, x := range l {
		if strings.EqualFold(strings.TrimSuffix(x, "."), strings.TrimSuffix(s, ".")) {
			return true
		}
	}
	return false
}
