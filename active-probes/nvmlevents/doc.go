// Package nvmlevents is the probe agent's second witness of GPU faults: it
// subscribes to the driver's events through NVML event sets (go-nvml) — Xid critical
// errors, single- and double-bit ECC errors, clock and power source changes where
// the GPU supports them — and turns each into one log line that the agent ships with
// source="nvml" through the dmesg-exporter's shipping path, so the same rule packs,
// LogQL and dashboards see it. A node whose kernel log lost an Xid (ring buffer
// overrun, a journald rotation, an exporter restarting) still reports it.
//
// The lines, one per event (PCI address as sysfs prints it, lower case):
//
//	NVML: Xid 79 on GPU 0000:3b:00.0 (GPU-5c1a9d3e-...)
//	NVML: Xid 31 on GPU 0000:3b:00.0 (GPU-...) GPU instance 1
//	NVML: double-bit ECC error on GPU 0000:3b:00.0 (GPU-...)
//	NVML: single-bit ECC error on GPU 0000:3b:00.0 (GPU-...)
//	NVML: clock change on GPU 0000:3b:00.0 (GPU-...)
//	NVML: power source change on GPU 0000:3b:00.0 (GPU-...)
//	NVML: GPU 0000:3b:00.0 (GPU-...) is lost: fallen off the bus or otherwise inaccessible
//
// An event type a GPU does not support (NVML_ERROR_NOT_SUPPORTED) is left out for
// that GPU, counted and logged once; the others are still watched. Xid 999 is NVML's
// "unknown Xid". Events that happened while the agent was not running are not read
// back: NVML delivers only what arrives while a set is registered, and the kernel
// log remains the first witness.
package nvmlevents
