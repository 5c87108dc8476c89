package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The iperf3 probe measures TCP throughput from this node to a peer that runs an iperf3
// server (StartIperf3Server starts one on request): `iperf3 -c <peer> -p <port> -J -t
// <seconds>`, judged on end.sum_received.bits_per_second, what the far end actually
// received. Invasive: it fills the link for the duration.
func init() {
	Register(Spec{
		Name:     "iperf3",
		Help:     "TCP throughput to a peer's iperf3 server (client side), against a minimum",
		Invasive: true,
		TimeoutFor: func(p Params) time.Duration {
			return time.Duration(p.Int("seconds"))*time.Second + 30*time.Second
		},
		Peer:       true,
		PeerServer: Iperf3ServerCheck,
		Params:     iperf3Params,
		New:        func(c Config) Probe { return &Iperf3{Path: c.Command("iperf3")} },
	})
}

var iperf3Params = Schema{
	{Name: "peer", Type: TypeHost, Target: TargetPeer, Required: true, Help: "IP address or hostname of the node running the iperf3 server (an agent node or an allowed peer)"},
	{Name: "port", Type: TypePort, Target: TargetPort, Default: "5201", Help: "server port (an allowed port)"},
	{Name: "seconds", Type: TypeInt, Default: "5", Min: 1, Max: 60, Help: "test duration"},
	{Name: "bind", Type: TypeIP, Help: "local address to send from (selects the NIC)"},
	{Name: "streams", Type: TypeInt, Default: "1", Min: 1, Max: 32, Help: "parallel TCP streams"},
	{Name: "reverse", Type: TypeBool, Default: "false", Help: "measure peer-to-this-node instead"},
	{Name: "min_gbps", Type: TypeFloat, Default: "10", Min: 0, Max: 100000, Help: "fail below this many Gbit/s received"},
}

// Iperf3 is the iperf3 probe (client side).
type Iperf3 struct {
	// Path is the iperf3 program.
	Path string
}

// Name implements Probe.
func (*Iperf3) Name() string { return "iperf3" }

// Run implements Probe.
func (c *Iperf3) Run(ctx context.Context, p Params) (Result, error) {
	p, err := iperf3Params.Resolve(p)
	if err != nil {
		return Result{}, err
	}
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
		return Result{}, err
	}
	rep, err := ParseIperf3(out.Stdout)
	if err != nil {
		return Result{}, fmt.Errorf("iperf3 (exit %d): %v %s", out.ExitCode, err, out.stderrTail())
	}
	d := DeviceResult{ID: peer}
	if rep.Error != "" {
		// iperf3 -J reports a refused or broken connection in "error" (and may exit 0).
		d.Status, d.Message = StatusError, "iperf3: "+rep.Error
		return Result{Status: StatusError, Message: d.Message, Devices: []DeviceResult{d}}, nil
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
	d.Status = StatusPass
	if rep.ReceivedGbps < min {
		d.Status = StatusFail
		d.Message = fmt.Sprintf("%.2f Gbit/s received, below %.2f", rep.ReceivedGbps, min)
	}
	res := Result{Status: d.Status, Devices: []DeviceResult{d}}
	res.Message = fmt.Sprintf("%.2f Gbit/s to %s:%s (%d retransmits)", rep.ReceivedGbps, peer, p.String("port"), rep.Retransmits)
	if d.Status != StatusPass {
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
