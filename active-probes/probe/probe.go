// Package probe is faultline's framework for active probes: small checks that run on a
// GPU node to confirm (or rule out) a fault that the logs suggest.
//
// It follows the shape of prometheus/node_exporter's collectors: one small interface
// (Probe), a registry, one plug-in per file. Each node check's file here registers its
// Spec (name, where it runs, default-enabled, timeout, invasive flag, parameter
// schema) from an init function: its metadata, all the controller needs to check
// requests and route them to the agents. The implementations, which link go-nvml and
// run the programs, are in package checks, whose files give each check its constructor
// (Implement); only the probe agent links them. A Runner runs a probe by name:
// it validates the parameters against the schema, applies the timeout, turns errors and
// panics into a Result with status "error", and records Prometheus metrics per probe:
//
//	faultline_probe_duration_seconds{check}             how long the last run took
//	faultline_probe_success{check}                      1 if the last run reached a verdict
//	faultline_probe_result{node,check,device}           1 pass, 0.5 warn, 0 fail
//	faultline_probe_value{node,check,device,metric}     measured values (h2d_gbps, tflops, ...)
//	faultline_probe_runs_total{check,status}            runs by outcome
//	faultline_probe_last_run_timestamp_seconds{check}   when the last run ended
//
// device="" is the verdict (or a value) for the whole check on the node; other values
// of device name a GPU (its index) or, for network probes, the peer.
//
// Checks that run programs (pciebw, dgemm, dcgmi, iperf3, ping) run them with
// exec.CommandContext and an argument vector, never through a shell; Config.Commands
// sets the path of each program.
package probe

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Probe is one active check.
type Probe interface {
	// Run performs the check. Params have been resolved by the probe's schema (defaults
	// filled in, values validated) when Run is called through a Runner. Run returns an
	// error when the check could not be carried out at all (program missing, output
	// unreadable, context cancelled); a check that ran and found a fault returns a
	// Result with status fail and a nil error.
	Run(ctx context.Context, p Params) (Result, error)
}

// Status is the verdict of a check or of one device in it.
type Status string

// The statuses, from the least to the most severe (see Worst).
const (
	// StatusSkipped: the check does not apply here (no NVML library, unknown GPU model).
	StatusSkipped Status = "skipped"
	// StatusPass: the check ran and found nothing wrong.
	StatusPass Status = "pass"
	// StatusWarn: something is degraded or suspicious but not a reason to drain the node.
	StatusWarn Status = "warn"
	// StatusError: the check could not reach a verdict (program missing, timeout, ...).
	StatusError Status = "error"
	// StatusFail: the check found a fault.
	StatusFail Status = "fail"
)

var statusRank = map[Status]int{StatusSkipped: 0, StatusPass: 1, StatusWarn: 2, StatusError: 3, StatusFail: 4}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool { _, ok := statusRank[s]; return ok }

// Worst returns the most severe of the statuses, in the order
// skipped < pass < warn < error < fail; it returns "" when given none.
// A pass next to a skipped check is a pass: a skip never hides a verdict.
func Worst(statuses ...Status) Status {
	var w Status
	for _, s := range statuses {
		if s == "" {
			continue
		}
		if w == "" || statusRank[s] > statusRank[w] {
			w = s
		}
	}
	return w
}

// ResultValue is the value faultline_probe_result takes for a status: 1 pass, 0.5 warn,
// 0 fail. Error and skipped have none (ok is false): no verdict, no sample.
func ResultValue(s Status) (v float64, ok bool) {
	switch s {
	case StatusPass:
		return 1, true
	case StatusWarn:
		return 0.5, true
	case StatusFail:
		return 0, true
	}
	return 0, false
}

// DeviceResult is the verdict for one device: a GPU, or the peer of a network probe.
type DeviceResult struct {
	// ID names the device in metrics and messages: the GPU index ("0".."7") for GPU
	// probes, the peer address for network probes.
	ID string `json:"id"`
	// UUID, PCI and Name identify a GPU when known (PCI as 0000:3b:00.0).
	UUID string `json:"uuid,omitempty"`
	PCI  string `json:"pci,omitempty"`
	Name string `json:"name,omitempty"`

	Status Status `json:"status"`
	// Values are the measurements, by metric name ("h2d_gbps", "dgemm_tflops", ...).
	Values  map[string]float64 `json:"values,omitempty"`
	Message string             `json:"message,omitempty"`
	// Failed names the tests that failed on this device, for a check that runs
	// several (dcgm: DCGM's test names, as it writes them).
	Failed []string `json:"failed,omitempty"`
}

// SetValue records a measurement, creating the map if needed.
func (d *DeviceResult) SetValue(metric string, v float64) {
	if d.Values == nil {
		d.Values = map[string]float64{}
	}
	d.Values[metric] = v
}

// Result is what one run of a check found.
type Result struct {
	Node  string `json:"node"`
	Check string `json:"check"`
	// Status is the verdict for the node: the worst of the devices' statuses unless the
	// probe decided otherwise (a missing GPU fails the check even if all others pass).
	Status  Status         `json:"status"`
	Message string         `json:"message,omitempty"`
	Devices []DeviceResult `json:"devices,omitempty"`
	// Values are node-level measurements (gpu_count, ...).
	Values map[string]float64 `json:"values,omitempty"`
	// Params are the parameters the check ran with, defaults included.
	Params   Params        `json:"params,omitempty"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
}

// SetValue records a node-level measurement, creating the map if needed.
func (r *Result) SetValue(metric string, v float64) {
	if r.Values == nil {
		r.Values = map[string]float64{}
	}
	r.Values[metric] = v
}

// Device returns the device result with the given ID, or nil.
func (r *Result) Device(id string) *DeviceResult {
	for i := range r.Devices {
		if r.Devices[i].ID == id {
			return &r.Devices[i]
		}
	}
	return nil
}

// DeviceStatus returns the worst status among the devices ("" if there are none).
func (r *Result) DeviceStatus() Status {
	ss := make([]Status, 0, len(r.Devices))
	for _, d := range r.Devices {
		ss = append(ss, d.Status)
	}
	return Worst(ss...)
}

// Summary lists the devices that did not pass, worst first, as "3: fail (msg); 5: warn (msg)".
func (r *Result) Summary() string {
	var bad []DeviceResult
	for _, d := range r.Devices {
		if d.Status != StatusPass && d.Status != StatusSkipped {
			bad = append(bad, d)
		}
	}
	sort.SliceStable(bad, func(i, j int) bool { return statusRank[bad[i].Status] > statusRank[bad[j].Status] })
	parts := make([]string, 0, len(bad))
	for _, d := range bad {
		s := fmt.Sprintf("%s: %s", d.ID, d.Status)
		if d.Message != "" {
			s += " (" + d.Message + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
