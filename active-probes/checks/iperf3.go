package checks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The iperf3 check (its metadata: probe/iperf3.go) is judged on
// end.sum_received.bits_per_second, what the far end actually received.
func init() {
	probe.Implement(probe.Iperf3Check, func(c probe.Config) probe.Probe { return &Iperf3{Path: c.Command("iperf3")} })
}

// Iperf3 is the iperf3 probe (client side).
type Iperf3 struct {
	// Path is the iperf3 program.
	Path string
}

// Run implements Probe.
func (c *Iperf3) Run(ctx context.Context, p probe.Params) (probe.Result, error) {
	peer := p.String("peer")
	args := []string{"-c", peer, "-p", p.String("port"), "-J", "-t", p.String("seconds"),
		"-P", p.String("streams"), "--connect-timeout", "5000"}
	if b := p.String("bind"); b != "" {
		args = append(args, "-B", b)
	}
	if p.Bool("reverse") {
		args = append(args, "-R")
	}
	out, err := runCommand(ctx, c.Path, args)
	if err != nil {
		return probe.Result{}, err
	}
	rep, err := ParseIperf3(out.Stdout)
	if err != nil {
		return probe.Result{}, fmt.Errorf("iperf3 (exit %d): %v %s", out.ExitCode, err, out.stderrTail())
	}
	d := probe.DeviceResult{ID: peer}
	if rep.Error != "" {
		// iperf3 -J reports a refused or broken connection in "error" (and may exit 0).
		d.Status, d.Message = probe.StatusError, "iperf3: "+rep.Error
		return probe.Result{Status: probe.StatusError, Message: d.Message, Devices: []probe.DeviceResult{d}}, nil
	}
	min := p.Float("min_gbps")
	d.SetValue("received_gbps", rep.ReceivedGbps)
	d.SetValue("sent_gbps", rep.SentGbps)
	d.SetValue("retransmits", float64(rep.Retransmits))
	d.SetValue("min_gbps", min)
	if rep.CPUHostPct > 0 {
		d.SetValue("cpu_host_pct", rep.CPUHostPct)
		d.SetValue("cpu_remote_pct", rep.CPURemotePct)
	}
	d.Status = probe.StatusPass
	if rep.ReceivedGbps < min {
		d.Status = probe.StatusFail
		d.Message = fmt.Sprintf("%.2f Gbit/s received, below %.2f", rep.ReceivedGbps, min)
	}
	res := probe.Result{Status: d.Status, Devices: []probe.DeviceResult{d}}
	res.Message = fmt.Sprintf("%.2f Gbit/s to %s:%s (%d retransmits)", rep.ReceivedGbps, peer, p.String("port"), rep.Retransmits)
	if d.Status != probe.StatusPass {
		res.Message = d.Message + "; " + res.Message
	}
	return res, nil
}

// Iperf3Report is the part of `iperf3 -J` output the probe uses.
type Iperf3Report struct {
	Error        string  // set when the test did not run ("unable to connect to server: Connection refused")
	ReceivedGbps float64 // end.sum_received.bits_per_second / 1e9
	SentGbps     float64 // end.sum_sent.bits_per_second / 1e9
	Retransmits  int64
	Seconds      float64 // end.sum_received.seconds
	CPUHostPct   float64
	CPURemotePct float64
}

// ParseIperf3 reads the JSON document iperf3 -J prints (client or server side).
func ParseIperf3(out []byte) (Iperf3Report, error) {
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return Iperf3Report{}, errors.New("no JSON in iperf3 output")
	}
	var doc struct {
		End struct {
			SumSent struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Retransmits   int64   `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Seconds       float64 `json:"seconds"`
			} `json:"sum_received"`
			CPU struct {
				HostTotal   float64 `json:"host_total"`
				RemoteTotal float64 `json:"remote_total"`
			} `json:"cpu_utilization_percent"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(bytes.NewReader(out[i:])).Decode(&doc); err != nil {
		return Iperf3Report{}, fmt.Errorf("bad iperf3 JSON: %v", err)
	}
	r := Iperf3Report{
		Error:        doc.Error,
		ReceivedGbps: doc.End.SumReceived.BitsPerSecond / 1e9,
		SentGbps:     doc.End.SumSent.BitsPerSecond / 1e9,
		Retransmits:  doc.End.SumSent.Retransmits,
		Seconds:      doc.End.SumReceived.Seconds,
		CPUHostPct:   doc.End.CPU.HostTotal,
		CPURemotePct: doc.End.CPU.RemoteTotal,
	}
	if r.Error == "" && r.Seconds == 0 && r.ReceivedGbps == 0 {
		return r, errors.New("iperf3 output has no end.sum_received")
	}
	return r, nil
}

// portString formats a port for argv.
func portString(p int) string { return strconv.Itoa(p) }
