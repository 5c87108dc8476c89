// Package probelines turns the probe agent's verdicts into log lines: every result of
// every check the agent runs (on a schedule, by hand, to confirm a rule, before a
// recovery) becomes one line that the agent ships with source="probe" through the
// dmesg-exporter's shipping path, to the same collector as its node's other lines.
// The collector takes the node from the agent's pod-bound token, so a verdict line is
// the node's word like its kernel lines, and rule packs read it like any other line
// (rules/packs/75-probe-verdicts.yaml).
//
// One line per result, in the stable shape Format writes (regex-friendly: key=value
// fields separated by one space, the message last and quoted):
//
//	faultline-probe: check=nvml status=fail trigger=schedule gpu_count=7 gpus_expected=8 message="found 7 GPUs, expected 8"
//	faultline-probe: check=nvml status=fail trigger=schedule gpu_count=8 gpus_expected=8 3/ecc_uncorrected_volatile=2 ... message="3: fail (2 uncorrectable ECC errors since the driver loaded)"
//
// The fields are the result's node values, sorted by name, then the values of each
// device whose verdict is fail, as ID/name=value (sorted by name, devices in the
// result's order). Lines are rate-bounded per check (a flapping check cannot flood
// Loki) and never delay the run's answer: a line the bound or a full queue refuses is
// dropped and counted.
package probelines
