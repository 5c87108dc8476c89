package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procSpec describes how to run one component process and how to tell it is ready.
type procSpec struct {
	name    Component
	path    string
	args    []string
	dir     string
	logPath string
	// ready is polled until it returns nil, the process exits, or readyTimeout passes.
	ready        func(ctx context.Context) error
	readyTimeout time.Duration
	// stopGrace is how long a graceful Stop waits after SIGTERM before SIGKILL.
	stopGrace time.Duration
}

// process is one running (or exited) component process.
type process struct {
	spec     procSpec
	cmd      *exec.Cmd
	done     chan struct{} // closed once cmd.Wait returned
	waitErr  error
	logFile  *os.File
	watchdog *exec.Cmd
	wdDone   chan struct{}
}

// Processes are forked from one goroutine locked to its OS thread for the life of the
// test binary: Linux delivers Pdeathsig when the thread that forked a child exits, not
// when the process does, so a thread that never exits makes Pdeathsig mean "when the
// test binary dies".
type spawnReq struct {
	cmd *exec.Cmd
	res chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for r := range spawnCh {
				r.res <- r.cmd.Start()
			}
		}()
	})
	res := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, res: res}
	return <-res
}

// watchdogScript kills the component's process group if the test binary disappears
// without running its cleanups (SIGKILL, a crash of the runtime); it exits on its own
// once the component is gone. Pdeathsig covers the same case for the component itself;
// the watchdog also catches anything the component may have forked.
const watchdogScript = `p=$1; t=$2
while kill -0 "$t" 2>/dev/null && kill -0 "$p" 2>/dev/null; do sleep 1; done
kill -0 "$t" 2>/dev/null || kill -KILL -- "-$p" 2>/dev/null
exit 0`

// startProcess starts spec and waits until it is ready. On failure the process is
// stopped and the error carries the tail of its log.
func startProcess(spec procSpec) (*process, error) {
	f, err := os.OpenFile(spec.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "----- testenv: %s starting at %s: %s %s\n", spec.name,
		time.Now().Format(time.RFC3339Nano), spec.path, strings.Join(spec.args, " "))
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Dir = spec.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := spawn(cmd); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", spec.name, err)
	}
	p := &process{spec: spec, cmd: cmd, done: make(chan struct{}), logFile: f}
	go func() {
		p.waitErr = cmd.Wait()
		fmt.Fprintf(f, "----- testenv: %s exited at %s: %v\n", spec.name, time.Now().Format(time.RFC3339Nano), p.waitErr)
		close(p.done)
	}()
	p.startWatchdog()

	if err := p.waitReady(); err != nil {
		p.kill()
		return nil, fmt.Errorf("%s: %w\n----- last lines of %s -----\n%s", spec.name, err, spec.logPath, tailFile(spec.logPath, 40))
	}
	return p, nil
}

func (p *process) startWatchdog() {
	wd := exec.Command("/bin/sh", "-c", watchdogScript, "testenv-watchdog",
		strconv.Itoa(p.cmd.Process.Pid), strconv.Itoa(os.Getpid()))
	wd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := wd.Start(); err != nil {
		// Pdeathsig still protects against orphans; the watchdog is a second line.
		fmt.Fprintf(p.logFile, "----- testenv: watchdog not started: %v\n", err)
		return
	}
	p.watchdog = wd
	p.wdDone = make(chan struct{})
	go func() { _ = wd.Wait(); close(p.wdDone) }()
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) waitReady() error {
	timeout := p.spec.readyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("exited before it was ready: %v", p.waitErr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = p.spec.ready(ctx)
		cancel()
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %v", timeout, last)
		}
		select {
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends the process: SIGTERM to its group and, after grace, SIGKILL. grace 0 kills at once.
func (p *process) stop(grace time.Duration) {
	if !p.exited() {
		pgid := p.cmd.Process.Pid // Setpgid: the group id is the leader's pid
		if grace > 0 {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(grace):
			}
		}
		if !p.exited() {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		<-p.done
	}
	p.stopWatchdog()
	p.logFile.Close()
}

func (p *process) kill() { p.stop(0) }

func (p *process) stopWatchdog() {
	if p.watchdog == nil {
		return
	}
	select {
	case <-p.wdDone:
	default:
		_ = syscall.Kill(-p.watchdog.Process.Pid, syscall.SIGKILL)
		<-p.wdDone
	}
}

// pids lists the processes this one consists of: the component and its watchdog.
func (p *process) pids() []int {
	out := []int{p.cmd.Process.Pid}
	if p.watchdog != nil {
		out = append(out, p.watchdog.Process.Pid)
	}
	return out
}

// errAddrInUse reports whether a failed start was a lost race for a port.
func errAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}

// startWithRetry builds a spec (choosing fresh ports each time) and starts it, retrying
// when another process took one of the ports between choosing and binding it.
func startWithRetry(build func() (procSpec, error)) (*process, procSpec, error) {
	var lastErr error
	for attempt := 0; attempt < 4; attempt++ {
		spec, err := build()
		if err != nil {
			return nil, spec, err
		}
		p, err := startProcess(spec)
		if err == nil {
			return p, spec, nil
		}
		lastErr = err
		if !errAddrInUse(err) {
			break
		}
	}
	return nil, procSpec{}, lastErr
}

// FreePorts returns n distinct loopback ports that were free a moment ago, for
// components run outside the harness (a faultline process, an agent).
func FreePorts(t TB, n int) []int {
	t.Helper()
	ports, err := freePorts(n)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return ports
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tailFile returns the last n lines of a file (of its last MiB at most).
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const max = 1 << 20
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// processAlive reports whether pid is a live (not zombie) process that started at the
// given clock tick (field 22 of /proc/<pid>/stat), so a reused pid does not count.
func processAlive(pid int, startTicks uint64) bool {
	st, ok := procStat(pid)
	if !ok {
		return false
	}
	return st.state != "Z" && st.start == startTicks
}

type procStatInfo struct {
	state string
	start uint64
}

func procStat(pid int) (procStatInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStatInfo{}, false
	}
	// comm (field 2) may hold spaces and parentheses: split after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStatInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStatInfo{}, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64) // field 22 overall
	if err != nil {
		return procStatInfo{}, false
	}
	return procStatInfo{state: f[0], start: start}, true
}

// FreeAddr is a free 127.0.0.1 address (host:port) for a listener a test starts
// later, picked as the harness picks its own components' ports.
func FreeAddr(t TB) string {
	t.Helper()
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0])
}
