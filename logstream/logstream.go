// Package logstream is the contract between the programs that write log lines to
// Loki (the dmesg-exporter, directly or through an OpenTelemetry Collector) and the
// programs that read them back (the controller's Loki source, the rules, the CLI):
// the stream label names, the values of the source label, the structured metadata
// keys and the OTLP attribute names. Both sides import these names from here, so a
// rename is one edit that every side sees.
package logstream

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Loki stream (index) labels the exporter writes when it pushes to Loki directly.
// With Loki's OTLP ingestion the same values arrive as structured metadata (or
// promoted labels) under the OTLP attribute names below.
const (
	// LabelNode holds the name of the node the line was read on.
	LabelNode = "node"
	// LabelSource holds the kind of log: one of the Source values.
	LabelSource    = "source"
	LabelNamespace = "namespace"
	LabelPod       = "pod"
	LabelContainer = "container"
)

// Loki structured metadata of an entry.
const (
	MetaSeq      = "seq"      // kernel: the kmsg sequence number, decimal
	MetaBootID   = "boot_id"  // kernel
	MetaLevel    = "level"    // kernel, nvml: the syslog level's name, as dmesg prints it (emerg .. debug)
	MetaFacility = "facility" // kernel: the syslog facility number, decimal
	MetaStream   = "stream"   // pod: stdout or stderr
)

// OTLP resource attributes.
const (
	AttrK8sNodeName      = "k8s.node.name"
	AttrHostName         = "host.name"
	AttrNode             = LabelNode // same as k8s.node.name, for Loki configs that promote "node"
	AttrSource           = LabelSource
	AttrK8sNamespaceName = "k8s.namespace.name"
	AttrK8sPodName       = "k8s.pod.name"
	AttrK8sContainerName = "k8s.container.name"
)

// OTLP log record attributes.
const (
	AttrLogSource    = "log.source" // one of the Source values
	AttrKmsgSeq      = "kmsg.seq"   // int
	AttrBootID       = "boot.id"
	AttrKmsgFacility = "kmsg.facility" // int
	AttrKmsgLevel    = "kmsg.level"    // int, the syslog level 0-7 the severity is derived from
	AttrLogIOStream  = "log.iostream"  // stdout or stderr
)

// Line is one log line as the controller reads it back from Loki. The same value
// travels from the Loki source through matching and correlation into a fault's
// evidence; only its time and text are recorded as evidence (the JSON form).
type Line struct {
	Time time.Time `json:"time"`
	Text string    `json:"text"`

	// Node is the value of the node label (or metadata); "" when absent.
	Node string `json:"-"`
	// Source is the value of LabelSource; "" when the stream does not say.
	Source string `json:"-"`
	// Stream is the canonical form of the stream's index labels, {a="1", b="2"}.
	Stream string `json:"-"`
	// Labels are the index labels and the entry's structured metadata (an index
	// label wins over metadata of the same name). Read-only.
	Labels map[string]string `json:"-"`
	// Query names the query that read the line (for metrics only).
	Query string `json:"-"`
}

// CanonicalLabels is the {a="1", b="2"} form of a stream's labels (names sorted,
// values quoted): the Line.Stream of the lines read with them.
func CanonicalLabels(l map[string]string) string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l[n]))
	}
	b.WriteByte('}')
	return b.String()
}
