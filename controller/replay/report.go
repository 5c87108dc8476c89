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
}

// NewReport joins two replays into a report with their diff.
func NewReport(since, until time.Time, fleet Fleet, candidate, baseline Set) Report {
	return Report{Since: since, Until: until, Fleet: fleet, Candidate: candidate, Baseline: baseline,
		Diff: Diff(candidate.Result, baseline.Result)}
}

// WriteJSON writes the report as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes a summary per pack set and the diff's rows: every (node, rule,
// outcome) of either set, candidate-only rows first.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "replay %s .. %s; fleet: %d nodes, %d eligible, %d opted out\n\n",
		r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.Fleet.Nodes, r.Fleet.Eligible, len(r.Fleet.OptedOut))
	fmt.Fprintln(tw, "SET\tPACKS\tLINES\tNO-NODE\tTAINTED\tHELD\tPROBED\tEVENTS\tSTILL-HELD")
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.name, s.set.Packs, res.Lines, res.NoNode,
			len(res.Nodes(OutcomeTaint)), held, len(res.Nodes(OutcomeProbe)), len(res.Nodes(OutcomeEvent)), res.StillHeld)
	}
	fmt.Fprintln(tw)
	if len(r.Diff) == 0 {
		fmt.Fprintln(tw, "neither pack set would have done anything")
		return tw.Flush()
	}
	fmt.Fprintln(tw, "IN\tNODE\tRULE\tOUTCOME\tCANDIDATE FIRST\tBASELINE FIRST\tCOUNT C/B")
	for _, row := range r.Diff {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s/%s\n", row.In, row.Node, row.Rule, row.Outcome,
			first(row.Candidate), first(row.Baseline), count(row.Candidate), count(row.Baseline))
	}
	if !Changed(r.Diff) {
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

func count(a *Action) string {
	if a == nil {
		return "-"
	}
	return strconv.Itoa(a.Count)
}
