package probe

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// The ping probe sends ICMP echo requests to a peer (`ping -n -c N -i 0.2 -W 1 <peer>`)
// and judges packet loss and round-trip time from ping's summary. Light enough to be
// harmless, but it needs a peer, so it is not enabled by default.
func init() {
	Register(Spec{
		Name: "ping",
		Help: "ICMP packet loss and round-trip time to a peer",
		TimeoutFor: func(p Params) time.Duration {
			return time.Duration(float64(p.Int("count"))*p.Float("interval")*float64(time.Second)) +
				p.Duration("wait") + 15*time.Second
		},
		Peer:   true,
		Params: pingParams,
		New:    func(c Config) Probe { return &Ping{Path: c.Command("ping")} },
	})
}

var pingParams = Schema{
	{Name: "peer", Type: TypeHost, Target: TargetPeer, Required: true, Help: "IP address or hostname to ping (an agent node or an allowed peer)"},
	{Name: "count", Type: TypeInt, Default: "10", Min: 1, Max: 1000, Help: "echo requests to send"},
	{Name: "interval", Type: TypeFloat, Default: "0.2", Min: 0.2, Max: 10, Help: "seconds between requests (0.2 is ping's minimum for non-root)"},
	{Name: "wait", Type: TypeDuration, Default: "1s", Min: 1, Max: 10, Help: "how long to wait for each reply (whole seconds)"},
	{Name: "source", Type: TypeIface, Help: "interface name or address to send from (ping -I)"},
	{Name: "warn_loss_pct", Type: TypeFloat, Default: "0", Min: 0, Max: 100, Help: "warn when loss exceeds this percentage"},
	{Name: "max_loss_pct", Type: TypeFloat, Default: "10", Min: 0, Max: 100, Help: "fail when loss exceeds this percentage"},
	{Name: "max_rtt_ms", Type: TypeFloat, Default: "0", Min: 0, Max: 60000, Help: "fail when the average round trip exceeds this (0: no limit)"},
}

// Ping is the ping probe.
type Ping struct {
	// Path is the ping program (iputils).
	Path string
}

// Name implements Probe.
func (*Ping) Name() string { return "ping" }

// Run implements Probe.
func (g *Ping) Run(ctx context.Context, p Params) (Result, error) {
	p, err := pingParams.Resolve(p)
	if err != nil {
		return Result{}, err
	}
	src := p.String("source")
	peer := p.String("peer")
	wait := int(p.Duration("wait").Seconds())
	if wait < 1 {
		wait = 1
	}
	args := []string{"-n", "-c", p.String("count"), "-i", strconv.FormatFloat(p.Float("interval"), 'f', -1, 64),
		"-W", strconv.Itoa(wait)}
	if src != "" {
		args = append(args, "-I", src)
	}
	args = append(args, peer)
	out, err := runCommand(ctx, g.Path, args)
	if err != nil {
		return Result{}, err
	}
	st, err := ParsePing(out.Stdout)
	if err != nil {
		// Exit 2: ping could not send at all (unknown host, unreachable network).
		msg := out.stderrTail()
		if msg == "" {
			msg = err.Error()
		}
		return Result{}, fmt.Errorf("ping %s (exit %d): %s", peer, out.ExitCode, msg)
	}
	d := DeviceResult{ID: peer}
	d.SetValue("transmitted", float64(st.Transmitted))
	d.SetValue("received", float64(st.Received))
	d.SetValue("loss_pct", st.LossPct)
	if st.Received > 0 {
		d.SetValue("rtt_min_ms", st.RTTMin)
		d.SetValue("rtt_avg_ms", st.RTTAvg)
		d.SetValue("rtt_max_ms", st.RTTMax)
		d.SetValue("rtt_mdev_ms", st.RTTMdev)
	}
	var f findings
	switch {
	case st.LossPct > p.Float("max_loss_pct"):
		f.add(StatusFail, "%.0f%% packet loss (%d of %d), above %.0f%%", st.LossPct, st.Transmitted-st.Received, st.Transmitted, p.Float("max_loss_pct"))
	case st.LossPct > p.Float("warn_loss_pct"):
		f.add(StatusWarn, "%.0f%% packet loss (%d of %d)", st.LossPct, st.Transmitted-st.Received, st.Transmitted)
	}
	if max := p.Float("max_rtt_ms"); max > 0 && st.Received > 0 && st.RTTAvg > max {
		f.add(StatusFail, "average round trip %.3f ms above %.3f ms", st.RTTAvg, max)
	}
	if st.Errors > 0 {
		f.add(StatusWarn, "%d ICMP errors", st.Errors)
	}
	d.Status, d.Message = f.status(), f.message()
	summary := fmt.Sprintf("%d/%d replies from %s, %.0f%% loss", st.Received, st.Transmitted, peer, st.LossPct)
	if st.Received > 0 {
		summary += fmt.Sprintf(", rtt min/avg/max %.3f/%.3f/%.3f ms", st.RTTMin, st.RTTAvg, st.RTTMax)
	}
	return Result{Status: d.Status, Message: joinMsg(d.Message, summary), Devices: []DeviceResult{d}}, nil
}

// PingStats is ping's summary.
type PingStats struct {
	Transmitted, Received, Errors int
	LossPct                       float64
	RTTMin, RTTAvg, RTTMax        float64 // ms; zero when nothing came back
	RTTMdev                       float64
}

var (
	pingCountsRe = regexp.MustCompile(`(\d+) packets transmitted, (\d+) (?:packets )?received((?:, \+\d+ \w+)*), ([\d.]+)% packet loss`)
	pingErrorsRe = regexp.MustCompile(`\+(\d+) errors`)
	pingRTTRe    = regexp.MustCompile(`(?:rtt|round-trip) min/avg/max(?:/(?:mdev|stddev))? = ([\d.]+)/([\d.]+)/([\d.]+)(?:/([\d.]+))? ms`)
)

// ParsePing reads the summary of iputils ping (or BusyBox ping):
//
//	10 packets transmitted, 10 received, 0% packet loss, time 1820ms
//	rtt min/avg/max/mdev = 0.021/0.035/0.048/0.008 ms
func ParsePing(out []byte) (PingStats, error) {
	var st PingStats
	m := pingCountsRe.FindSubmatch(out)
	if m == nil {
		return st, errors.New("no packet statistics in ping output")
	}
	st.Transmitted, _ = strconv.Atoi(string(m[1]))
	st.Received, _ = strconv.Atoi(string(m[2]))
	if e := pingErrorsRe.FindSubmatch(m[3]); e != nil {
		st.Errors, _ = strconv.Atoi(string(e[1]))
	}
	st.LossPct, _ = strconv.ParseFloat(string(m[4]), 64)
	if r := pingRTTRe.FindSubmatch(out); r != nil {
		st.RTTMin, _ = strconv.ParseFloat(string(r[1]), 64)
		st.RTTAvg, _ = strconv.ParseFloat(string(r[2]), 64)
		st.RTTMax, _ = strconv.ParseFloat(string(r[3]), 64)
		if len(r[4]) > 0 {
			st.RTTMdev, _ = strconv.ParseFloat(string(r[4]), 64)
		}
	}
	return st, nil
}
