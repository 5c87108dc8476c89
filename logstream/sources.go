package logstream

import (
	"slices"
	"strconv"
	"strings"
)

// Values of LabelSource: what produced the line. A reader takes a line's source from
// this label of its stream, never from the name of the query that read it. Each has
// its row in the table of sources below.
const (
	SourceKernel = "kernel" // /dev/kmsg records
	SourcePod    = "pod"    // training-pod container logs (CRI files)
	SourceNVML   = "nvml"   // GPU events the probe agent reads through NVML (active-probes/nvmlevents)
	SourceProbe  = "probe"  // the probe agent's verdict of every check it runs (active-probes/probelines)
)

// Lane names the dmesg-exporter lane that ships a source's lines (its buffer, batches
// and position commits; the source label of the exporter's metrics).
type Lane string

// LaneNone: another program ships the source's lines (through an exporter.Lane of
// its own), the dmesg-exporter does not read it.
const LaneNone Lane = ""

// Source is one row of the table of log sources: everything the writers and the
// readers of a source agree on besides the line itself.
type Source struct {
	// Name is the value of LabelSource, a rule's `source:` and the controller's
	// query name.
	Name string
	// Selector is the default LogQL stream selector of the source's lines (the
	// controller's --NAME-selector flag).
	Selector string
	// Resumable sources are read from a position the exporter keeps across
	// restarts; the others start where their reader starts.
	Resumable bool
	// Lane is the exporter's lane the lines ship on, LaneNone when another program
	// ships them.
	Lane Lane
	// Description says what the lines are, in flag help ("LogQL stream selector of
	// " + Description).
	Description string
}

// sources is the table of log sources, in the order flags and queries list them.
// A new source is a row here and a reader that produces its lines.
var sources = []Source{
	{Name: SourceKernel, Selector: selector(SourceKernel), Resumable: true, Lane: SourceKernel,
		Description: "kernel logs"},
	{Name: SourcePod, Selector: selector(SourcePod), Resumable: true, Lane: SourcePod,
		Description: "training-pod logs"},
	{Name: SourceNVML, Selector: selector(SourceNVML), Lane: LaneNone,
		Description: "the GPU events the probe agents read through NVML"},
	{Name: SourceProbe, Selector: selector(SourceProbe), Lane: LaneNone,
		Description: "the probe agents' verdict lines, one per check they run"},
}

// selector is the stream selector of one source as its writers label it:
// {source="kernel"}.
func selector(name string) string {
	return "{" + LabelSource + "=" + strconv.Quote(name) + "}"
}

// Sources returns the table of log sources.
func Sources() []Source { return slices.Clone(sources) }

// LookupSource returns the row of the source named name.
func LookupSource(name string) (Source, bool) {
	i := slices.IndexFunc(sources, func(s Source) bool { return s.Name == name })
	if i < 0 {
		return Source{}, false
	}
	return sources[i], true
}

// IsSource reports whether s is a known value of LabelSource.
func IsSource(s string) bool {
	_, ok := LookupSource(s)
	return ok
}

// SourceNames returns the names of the sources, in the table's order.
func SourceNames() []string {
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.Name
	}
	return names
}

// SourceList writes the source names for people: "kernel, pod, nvml or probe".
func SourceList() string {
	names := SourceNames()
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
