package checks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// Iperf3ServerOptions configure a one-shot iperf3 server.
type Iperf3ServerOptions struct {
	// Path is the iperf3 program ("" means "iperf3" in $PATH).
	Path string
	// Bind is the address to listen on ("" means all addresses).
	Bind string
	// Port to listen on (1-65535).
	Port int
	// IdleTimeout ends the server if no client has come (default 60s).
	IdleTimeout time.Duration
}

// Iperf3Server is an `iperf3 -s -1 -J` process: it serves one test, prints its JSON
// report and exits.
type Iperf3Server struct {
	Port int

	cmd    *exec.Cmd
	kill   func() error
	stdout *limitedBuffer
	stderr *limitedBuffer
	done   chan struct{}
	err    error
	once   sync.Once
}

// StartIperf3Server starts a one-shot server and returns once it accepts connections:
// when the iperf3 process holds a listening TCP socket on the port (read from /proc,
// without connecting, which would use up the one test). It fails if iperf3 exits first
// (port in use) or ctx ends before the server is ready.
func StartIperf3Server(ctx context.Context, o Iperf3ServerOptions) (*Iperf3Server, error) {
	if o.Port < 1 || o.Port > 65535 {
		return nil, fmt.Errorf("iperf3 server: port %d out of range", o.Port)
	}
	if o.Bind != "" {
		if _, err := netip.ParseAddr(o.Bind); err != nil {
			return nil, fmt.Errorf("iperf3 server: bind %q: not an IP address", o.Bind)
		}
	}
	path := o.Path
	if path == "" {
		path = "iperf3"
	}
	idle := o.IdleTimeout
	if idle <= 0 {
		idle = time.Minute
	}
	args := []string{"-s", "-1", "-p", portString(o.Port), "-J",
		"--idle-timeout", strconv.Itoa(int((idle + time.Second - 1) / time.Second))}
	if o.Bind != "" {
		args = append(args, "-B", o.Bind)
	}
	s := &Iperf3Server{Port: o.Port, stdout: &limitedBuffer{max: maxOutput}, stderr: &limitedBuffer{max: maxOutput},
		done: make(chan struct{})}
	s.cmd = exec.Command(path, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	s.kill = setProcessGroup(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("iperf3 server: %w", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok, err := listeningOn(s.cmd.Process.Pid, o.Port); err != nil {
			s.Close()
			return nil, fmt.Errorf("iperf3 server: %w", err)
		} else if ok {
			return s, nil
		}
		select {
		case <-s.done:
			msg := strings.TrimSpace(string(s.stderr.Bytes()))
			if rep, _ := ParseIperf3(s.stdout.Bytes()); rep.Error != "" {
				msg = rep.Error
			}
			return nil, fmt.Errorf("iperf3 server exited before listening on port %d: %s", o.Port, msg)
		case <-ctx.Done():
			s.Close()
			return nil, fmt.Errorf("iperf3 server not listening on port %d: %w", o.Port, ctx.Err())
		case <-tick.C:
		}
	}
}

// Wait waits for the server to serve its test and exit, and returns its report (what it
// received). It returns ctx's error if ctx ends first; the server keeps running.
func (s *Iperf3Server) Wait(ctx context.Context) (Iperf3Report, error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		return Iperf3Report{}, ctx.Err()
	}
	rep, err := ParseIperf3(s.stdout.Bytes())
	if err != nil {
		return rep, fmt.Errorf("iperf3 server: %v (%v) %s", err, s.err, strings.TrimSpace(string(s.stderr.Bytes())))
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("iperf3 server: %s", rep.Error)
	}
	return rep, nil
}

// Done is closed when the server process has exited.
func (s *Iperf3Server) Done() <-chan struct{} { return s.done }

// Close stops the server (if it still runs) and waits for it to exit.
func (s *Iperf3Server) Close() error {
	s.once.Do(func() {
		select {
		case <-s.done:
			return
		default:
		}
		_ = s.kill()
		<-s.done
	})
	return nil
}

// listeningOn reports whether process pid holds a TCP socket listening on port
// (IPv4 or IPv6), reading /proc/net/tcp{,6} and /proc/<pid>/fd.
func listeningOn(pid, port int) (bool, error) {
	inodes := map[string]bool{}
	found := false
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		ino, err := listenInodes(f, port)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return false, err
		}
		found = true
		for _, i := range ino {
			inodes[i] = true
		}
	}
	if !found {
		return false, errors.New("cannot tell when the server listens: no /proc/net/tcp")
	}
	if len(inodes) == 0 {
		return false, nil
	}
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false, nil // exiting, or not yet exec'd
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err != nil {
			continue
		}
		if strings.HasPrefix(link, "socket:[") && inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			return true, nil
		}
	}
	return false, nil
}

// listenInodes returns the inodes of the sockets in LISTEN state (0A) on port in a
// /proc/net/tcp-format file.
func listenInodes(path string, port int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(fs) < 10 || fs[3] != "0A" || !strings.HasSuffix(fs[1], want) {
			continue
		}
		out = append(out, fs[9])
	}
	return out, sc.Err()
}

// The iperf3-server check (its metadata: probe/iperf3_server.go) starts a one-shot
// server with StartIperf3Server.
func init() {
	probe.Implement(probe.Iperf3ServerCheck, func(c probe.Config) probe.Probe {
		limit := c.MaxIperf3Servers
		if limit <= 0 {
			limit = probe.DefaultMaxIperf3Servers
		}
		return &iperf3ServerProbe{path: c.Command("iperf3"), limit: limit, servers: map[int]*iperf3Served{}}
	})
}

// iperf3ServerProbe keeps the servers it started, one per port, until they end, and
// at most limit at once.
type iperf3ServerProbe struct {
	path    string
	limit   int
	mu      sync.Mutex
	servers map[int]*iperf3Served
}

// iperf3Served is a server of the probe (srv nil while it starts) and when its idle
// timeout ends it at the latest.
type iperf3Served struct {
	srv    *Iperf3Server
	endsBy time.Time
}

func (s *iperf3ServerProbe) Run(ctx context.Context, p probe.Params) (probe.Result, error) {
	port := p.Int("port")
	s.mu.Lock()
	if sv, busy := s.servers[port]; busy {
		s.mu.Unlock()
		if sv.srv == nil {
			return probe.Result{}, fmt.Errorf("an iperf3 server is starting on port %d", port)
		}
		// A server still waiting for the client of an earlier run (whose client side
		// was refused or failed) serves this run's client: asking again within its
		// idle timeout must not fail for the port it holds.
		return probe.Result{Status: probe.StatusPass, Message: fmt.Sprintf("iperf3 server already listening on port %d for one test", port),
			Values: map[string]float64{"port": float64(port)}}, nil
	}
	if len(s.servers) >= s.limit {
		var soonest time.Time
		for _, sv := range s.servers {
			if soonest.IsZero() || sv.endsBy.Before(soonest) {
				soonest = sv.endsBy
			}
		}
		s.mu.Unlock()
		return probe.Result{}, &probe.LimitError{Limit: "iperf3_servers", RetryAfter: max(time.Until(soonest), time.Second),
			Reason: fmt.Sprintf("%d iperf3 servers already wait for a client on this node", s.limit)}
	}
	// Starting takes up to 10s more than the idle timeout.
	s.servers[port] = &iperf3Served{endsBy: time.Now().Add(p.Duration("idle_timeout") + 10*time.Second)}
	s.mu.Unlock()
	// The server outlives this run: it ends after one test or its idle timeout.
	srv, err := StartIperf3Server(context.WithoutCancel(ctx), Iperf3ServerOptions{
		Path: s.path, Bind: p.String("bind"), Port: port, IdleTimeout: p.Duration("idle_timeout")})
	if err != nil {
		s.mu.Lock()
		delete(s.servers, port)
		s.mu.Unlock()
		return probe.Result{}, err
	}
	s.mu.Lock()
	s.servers[port].srv = srv
	s.mu.Unlock()
	go func() {
		<-srv.Done()
		s.mu.Lock()
		delete(s.servers, port)
		s.mu.Unlock()
	}()
	return probe.Result{Status: probe.StatusPass, Message: fmt.Sprintf("iperf3 server listening on port %d", port),
		Values: map[string]float64{"port": float64(port)}}, nil
}

// Close stops the servers still waiting for a client.
func (s *iperf3ServerProbe) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sv := range s.servers {
		if sv.srv != nil {
			_ = sv.srv.Close()
		}
	}
	return nil
}
