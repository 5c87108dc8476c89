package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Set is one replayed pack set, named for the report.
type Set struct {
	Packs  string  `json:"packs"` // where the packs came from
	Result *Result `json:"result"`
}

// Report is a replay of a candidate and a baseline pack set over the same stretch.
type Report struct {
	Since     time.Time `json:"since"`
	Until     time.Time `json:"until"`
	Fleet     Fleet     `json:"fleet"`
	Candidate Set       `json:"candidate"`
	Baseline  Set       `json:"baseline"`
	Diff      []Row     `json:"diff"`
	// Fleets are the fleet faults of either set, joined by group and pack.
	Fleets []FleetRow `json:"fleets"`
}

// NewReport joins two replays into a report with their diff.
func NewReport(since, until time.Time, fleet Fleet, candidate, baseline Set) Report {
	return Report{Since: since, Until: until, Fleet: fleet, Candidate: candidate, Baseline: baseline,
		Diff: Diff(candidate.Result, baseline.Result), Fleets: FleetDiff(candidate.Result, baseline.Result)}
}

// Changed reports whether the two sets would have done anything differently: a
// row or a fleet fault of one side only, or a fleet fault with other members.
func (r Report) Changed() bool { return Changed(r.Diff) || FleetsChanged(r.Fleets) }

// WriteJSON writes the report as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes a summary per pack set, the fleet faults of either set, and the
// diff's rows: every (node, rule, outcome, step) of either set, candidate-only rows
// first.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	shard := ""
	if r.Fleet.Shard != "" {
		shard = "; shard " + r.Fleet.Shard + " (other nodes' lines skipped)"
	}
	fmt.Fprintf(tw, "replay %s .. %s; fleet: %d nodes, %d eligible, %d opted out, %d with topology labels%s\n\n",
		r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.Fleet.Nodes, r.Fleet.Eligible, len(r.Fleet.OptedOut), r.Fleet.Grouped, shard)
	fmt.Fprintln(tw, "SET\tPACKS\tLINES\tNO-NODE\tTAINTED\tESCALATED\tHELD\tPROBED\tEVENTS\tSTILL-HELD\tFLEET-FAULTS")
	for _, s := range []struct {
		name string
		set  Set
	}{{"candidate", r.Candidate}, {"baseline", r.Baseline}} {
		res := s.set.Result
		held := 0
		for _, a := range res.Actions {
			if strings.HasPrefix(string(a.Outcome), "hold:") {
				held++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.name, s.set.Packs, res.Lines, res.NoNode,
			len(res.Nodes(OutcomeTaint)), len(res.Nodes(OutcomeEscalate)), held, len(res.Nodes(OutcomeProbe)), len(res.Nodes(OutcomeEvent)),
			res.StillHeld, len(res.Fleets))
	}
	fmt.Fprintln(tw)
	if len(r.Fleets) > 0 {
		fmt.Fprintln(tw, "IN\tFLEET GROUP\tPACK\tCANDIDATE SINCE\tBASELINE SINCE\tNODES C/B\tMEMBERS")
		for _, row := range r.Fleets {
			f := row.Candidate
			if f == nil {
				f = row.Baseline
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s/%s\t%s\n", row.In, row.Group, row.Family, since(row.Candidate), since(row.Baseline),
				members(row.Candidate), members(row.Baseline), strings.Join(f.Members, ","))
		}
		fmt.Fprintln(tw)
	}
	if len(r.Diff) == 0 {
		fmt.Fprintln(tw, "neither pack set would have done anything")
		return tw.Flush()
	}
	fmt.Fprintln(tw, "IN\tNODE\tRULE\tOUTCOME\tSTEP\tCANDIDATE FIRST\tBASELINE FIRST\tCOUNT C/B")
	for _, row := range r.Diff {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s/%s\n", row.In, row.Node, row.Rule, row.Outcome, row.Step,
			first(row.Candidate), first(row.Baseline), count(row.Candidate), count(row.Baseline))
	}
	if !r.Changed() {
		fmt.Fprintln(tw, "\nno difference: both pack sets would have done the same")
	}
	return tw.Flush()
}

func first(a *Action) string {
	if a == nil {
		return "-"
	}
	return a.First.UTC().Format(time.RFC3339)
}

func since(f *FleetFault) string {
	if f == nil {
		return "-"
	}
	return f.Since.UTC().Format(time.RFC3339)
}

func members(f *FleetFault) string {
	if f == nil {
		return "-"
	}
	return strconv.Itoa(len(f.Members))
}

func count(a *Action) string {
	if a == nil {
		return "-"
	}
	return strconv.Itoa(a.Count)
}
