package checks

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The ping check (its metadata: probe/ping.go) runs `ping -n -c N -i 0.2 -W 1 <peer>`
// and reads ping's summary.
func init() {
	probe.Implement(probe.PingCheck, func(c probe.Config) probe.Probe { return &Ping{Path: c.Command("ping")} })
}

// Ping is the ping probe.
type Ping struct {
	// Path is the ping program (iputils).
	Path string
}

// Run implements Probe.
func (g *Ping) Run(ctx context.Context, p probe.Params) (probe.Result, error) {
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
		return probe.Result{}, err
	}
	st, err := ParsePing(out.Stdout)
	if err != nil {
		// Exit 2: ping could not send at all (unknown host, unreachable network).
		msg := out.stderrTail()
		if msg == "" {
			msg = err.Error()
		}
		return probe.Result{}, fmt.Errorf("ping %s (exit %d): %s", peer, out.ExitCode, msg)
	}
	d := probe.DeviceResult{ID: peer}
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
		f.add(probe.StatusFail, "%.0f%% packet loss (%d of %d), above %.0f%%", st.LossPct, st.Transmitted-st.Received, st.Transmitted, p.Float("max_loss_pct"))
	case st.LossPct > p.Float("warn_loss_pct"):
		f.add(probe.StatusWarn, "%.0f%% packet loss (%d of %d)", st.LossPct, st.Transmitted-st.Received, st.Transmitted)
	}
	if max := p.Float("max_rtt_ms"); max > 0 && st.Received > 0 && st.RTTAvg > max {
		f.add(probe.StatusFail, "average round trip %.3f ms above %.3f ms", st.RTTAvg, max)
	}
	if st.Errors > 0 {
		f.add(probe.StatusWarn, "%d ICMP errors", st.Errors)
	}
	d.Status, d.Message = f.status(), f.message()
	summary := fmt.Sprintf("%d/%d replies from %s, %.0f%% loss", st.Received, st.Transmitted, peer, st.LossPct)
	if st.Received > 0 {
		summary += fmt.Sprintf(", rtt min/avg/max %.3f/%.3f/%.3f ms", st.RTTMin, st.RTTAvg, st.RTTMax)
	}
	return probe.Result{Status: d.Status, Message: joinMsg(d.Message, summary), Devices: []probe.DeviceResult{d}}, nil
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
