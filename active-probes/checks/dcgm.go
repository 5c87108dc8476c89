package checks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// The dcgm check (its metadata: probe/dcgm.go) reads the JSON of `dcgmi diag`.
//
// Two JSON shapes exist and both are read:
//   - DCGM 3.x: {"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name",
//     "results": [{"gpu_ids": "0,1" | 0, "status": "Pass", "warnings": [...]}]}]}], "version"}}
//   - DCGM 4.x: {"DCGM Diagnostic": {"test_categories": [... {"name", "results":
//     [{"entity_group": "GPU", "entity_id": 0, "status": "Fail", "warnings": [{"warning",
//     "error_id", "error_category", "error_severity"}]}], "test_summary": {"status"}}]},
//     "entity_groups": [...], "metadata": {"version", "Driver Version Detected"}}
//
// dcgmi exits non-zero when a test fails, so the verdict comes from the JSON, not the
// exit code. A failure whose every warning has DCGM's "config" severity (persistence
// mode off, ...) is a warn: the node's setup, not its hardware.
func init() {
	probe.Implement(probe.DCGMCheck, func(c probe.Config) probe.Probe { return &DCGM{Path: c.Command("dcgmi")} })
}

// dcgmConfigSeverity is DCGM_ERROR_CONFIG: "this error can be configured".
const dcgmConfigSeverity = 5

// DCGM is the dcgm probe.
type DCGM struct {
	// Path is the dcgmi program.
	Path string
}

// Run implements Probe.
func (g *DCGM) Run(ctx context.Context, p probe.Params) (probe.Result, error) {
	args := []string{"diag", "-r", strconv.Itoa(p.Int("level")), "-j"}
	if l := p.IntList("gpus"); len(l) > 0 {
		args = append(args, "-i", joinInts(l))
	}
	if h := p.String("host"); h != "" {
		args = append(args, "--host", h)
	}
	out, err := runCommand(ctx, g.Path, args)
	if err != nil {
		return probe.Result{}, err
	}
	doc, err := ParseDCGMDiag(out.Stdout)
	if err != nil {
		detail := out.stderrTail()
		if detail == "" {
			detail = strings.TrimSpace(string(out.Stdout))
			if len(detail) > 400 {
				detail = detail[:400]
			}
		}
		return probe.Result{}, fmt.Errorf("dcgmi diag (exit %d): %v: %s", out.ExitCode, err, detail)
	}
	ignore := map[int]bool{}
	for _, id := range p.IntList("ignore_errors") {
		ignore[id] = true
	}
	res := doc.judge(ignore)
	if res.Status == "" {
		return probe.Result{}, fmt.Errorf("dcgmi diag (exit %d) reported no test result", out.ExitCode)
	}
	return res, nil
}

// DCGMDiag is a parsed `dcgmi diag -j` document, either shape.
type DCGMDiag struct {
	Version      string
	Driver       string
	RuntimeError string
	Tests        []DCGMTest
}

// DCGMTest is one test (Denylist, memory, pcie, ...) and its results.
type DCGMTest struct {
	Category string
	Name     string
	Summary  string // DCGM 4: test_summary.status
	Results  []DCGMResult
}

// DCGMResult is one test's result for one or more entities.
type DCGMResult struct {
	Entities []string // "0", "1" for GPUs; "cpu0" for other entity groups; empty: global
	Status   probe.Status
	Raw      string // the status as DCGM wrote it
	Warnings []DCGMWarning
	Info     []string
}

// DCGMWarning is a warning or error attached to a result.
type DCGMWarning struct {
	Message  string
	ErrorID  int // 0 when DCGM gave none
	Severity int // DCGM 4 error_severity, 0 when absent
	Category int
}

type dcgmDocJSON struct {
	V3       *dcgmDiagJSON `json:"DCGM GPU Diagnostic"`
	V4       *dcgmDiagJSON `json:"DCGM Diagnostic"`
	Metadata struct {
		Version string `json:"version"`
		Driver  string `json:"Driver Version Detected"`
	} `json:"metadata"`
}

type dcgmDiagJSON struct {
	Categories []*struct {
		Category string          `json:"category"`
		Tests    []*dcgmTestJSON `json:"tests"`
	} `json:"test_categories"`
	Version      string `json:"version"`
	RuntimeError string `json:"runtime_error"`
}

type dcgmTestJSON struct {
	Name    string `json:"name"`
	Results []*struct {
		GPUIDs      json.RawMessage   `json:"gpu_ids"`
		GPUID       json.RawMessage   `json:"gpu_id"`
		EntityGroup string            `json:"entity_group"`
		EntityID    *int              `json:"entity_id"`
		Status      string            `json:"status"`
		Warnings    []json.RawMessage `json:"warnings"`
		Info        json.RawMessage   `json:"info"`
	} `json:"results"`
	Summary *struct {
		Status string `json:"status"`
	} `json:"test_summary"`
}

// ParseDCGMDiag reads dcgmi's JSON output. Text before the first "{" (a warning dcgmi
// printed) is skipped, and null entries in the arrays (DCGM 3 writes some) are ignored.
func ParseDCGMDiag(out []byte) (DCGMDiag, error) {
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return DCGMDiag{}, errors.New("no JSON in the output")
	}
	var doc dcgmDocJSON
	if err := json.NewDecoder(bytes.NewReader(out[i:])).Decode(&doc); err != nil {
		return DCGMDiag{}, fmt.Errorf("bad JSON: %v", err)
	}
	diag := doc.V4
	if diag == nil {
		diag = doc.V3
	}
	if diag == nil {
		return DCGMDiag{}, errors.New(`no "DCGM Diagnostic" or "DCGM GPU Diagnostic" object`)
	}
	d := DCGMDiag{Version: doc.Metadata.Version, Driver: doc.Metadata.Driver, RuntimeError: diag.RuntimeError}
	if d.Version == "" {
		d.Version = diag.Version
	}
	for _, c := range diag.Categories {
		if c == nil {
			continue
		}
		for _, t := range c.Tests {
			if t == nil {
				continue
			}
			test := DCGMTest{Category: c.Category, Name: t.Name}
			if t.Summary != nil {
				test.Summary = t.Summary.Status
			}
			for _, r := range t.Results {
				if r == nil {
					continue
				}
				res := DCGMResult{Raw: r.Status, Status: dcgmStatus(r.Status), Info: stringsOf(r.Info)}
				switch {
				case r.EntityID != nil:
					id := strconv.Itoa(*r.EntityID)
					if g := strings.ToUpper(r.EntityGroup); g != "" && g != "GPU" {
						id = strings.ToLower(r.EntityGroup) + id
					}
					res.Entities = []string{id}
				case len(r.GPUIDs) > 0:
					res.Entities = idsOf(r.GPUIDs)
				case len(r.GPUID) > 0:
					res.Entities = idsOf(r.GPUID)
				}
				for _, w := range r.Warnings {
					res.Warnings = append(res.Warnings, warningOf(w))
				}
				test.Results = append(test.Results, res)
			}
			d.Tests = append(d.Tests, test)
		}
	}
	return d, nil
}

// dcgmStatus maps DCGM's spellings (PASS, Pass, Fail, Warn, SKIPPED, Skip, Not Run).
func dcgmStatus(s string) probe.Status {
	switch strings.ToLower(strings.Join(strings.Fields(s), " ")) {
	case "pass", "passed":
		return probe.StatusPass
	case "fail", "failed":
		return probe.StatusFail
	case "warn", "warning":
		return probe.StatusWarn
	}
	return probe.StatusSkipped // skip, skipped, not run, and anything new
}

// idsOf reads gpu_ids: 3, "3" or "0,1,2".
func idsOf(raw json.RawMessage) []string {
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return []string{strconv.Itoa(n)}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	var ids []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			ids = append(ids, f)
		}
	}
	return ids
}

// stringsOf reads info: "text" or ["text", ...].
func stringsOf(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var l []string
	if json.Unmarshal(raw, &l) == nil {
		return l
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return []string{s}
	}
	return nil
}

// warningOf reads a warning: "text", or {"warning", "error_id", "error_severity", ...}.
func warningOf(raw json.RawMessage) DCGMWarning {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return DCGMWarning{Message: s}
	}
	var w struct {
		Warning  string `json:"warning"`
		ErrorID  int    `json:"error_id"`
		Severity int    `json:"error_severity"`
		Category int    `json:"error_category"`
	}
	_ = json.Unmarshal(raw, &w)
	return DCGMWarning{Message: w.Warning, ErrorID: w.ErrorID, Severity: w.Severity, Category: w.Category}
}

// effective is a result's status once ignored error ids and configuration problems are
// taken into account, and a note saying why it changed.
func (r DCGMResult) effective(ignore map[int]bool) (probe.Status, string) {
	if r.Status != probe.StatusFail && r.Status != probe.StatusWarn || len(r.Warnings) == 0 {
		return r.Status, ""
	}
	allIgnored, allConfig := true, true
	for _, w := range r.Warnings {
		if w.ErrorID == 0 || !ignore[w.ErrorID] {
			allIgnored = false
		}
		if w.Severity != dcgmConfigSeverity {
			allConfig = false
		}
	}
	switch {
	case allIgnored:
		return probe.StatusPass, "ignored"
	case allConfig && r.Status == probe.StatusFail:
		return probe.StatusWarn, "configuration"
	}
	return r.Status, ""
}

func (r DCGMResult) firstWarning() string {
	for _, w := range r.Warnings {
		if w.Message != "" {
			if w.ErrorID != 0 {
				return fmt.Sprintf("%s [DCGM error %d]", w.Message, w.ErrorID)
			}
			return w.Message
		}
	}
	return ""
}

// judge turns the document into a Result: one device per entity, the worst of its
// tests, with the failing tests named.
func (d DCGMDiag) judge(ignore map[int]bool) probe.Result {
	var res probe.Result
	type acc struct {
		f      findings
		counts map[probe.Status]int
		failed []string
	}
	devs := map[string]*acc{}
	get := func(id string) *acc {
		a, ok := devs[id]
		if !ok {
			a = &acc{counts: map[probe.Status]int{}}
			devs[id] = a
		}
		return a
	}
	var node findings
	for _, t := range d.Tests {
		sawEntity := false
		for _, r := range t.Results {
			st, why := r.effective(ignore)
			text := ""
			if st != probe.StatusPass && st != probe.StatusSkipped || why != "" {
				text = fmt.Sprintf("%s: %s", t.Name, r.Raw)
				if why != "" {
					text += " (" + why + ")"
				}
				if w := r.firstWarning(); w != "" {
					text += ": " + w
				}
			}
			if len(r.Entities) == 0 {
				node.add(st, "%s", text)
				continue
			}
			sawEntity = true
			for _, id := range r.Entities {
				a := get(id)
				a.counts[st]++
				a.f = append(a.f, finding{status: st, text: text})
				if st == probe.StatusFail && !slices.Contains(a.failed, t.Name) {
					a.failed = append(a.failed, t.Name)
				}
			}
		}
		if s := dcgmStatus(t.Summary); t.Summary != "" && !sawEntity && (s == probe.StatusFail || s == probe.StatusWarn) {
			node.add(s, "%s: %s", t.Name, t.Summary)
		}
	}
	ids := make([]string, 0, len(devs))
	for id := range devs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, errA := strconv.Atoi(ids[i])
		b, errB := strconv.Atoi(ids[j])
		if errA == nil && errB == nil {
			return a < b
		}
		return ids[i] < ids[j]
	})
	for _, id := range ids {
		a := devs[id]
		dr := probe.DeviceResult{ID: id, Status: probe.Worst(a.f.status(), probe.StatusSkipped), Message: a.f.message(), Failed: a.failed}
		if a.counts[probe.StatusPass] == 0 && a.counts[probe.StatusWarn] == 0 && a.counts[probe.StatusFail] == 0 {
			dr.Status = probe.StatusSkipped
		}
		dr.SetValue("tests_pass", float64(a.counts[probe.StatusPass]))
		dr.SetValue("tests_warn", float64(a.counts[probe.StatusWarn]))
		dr.SetValue("tests_fail", float64(a.counts[probe.StatusFail]))
		dr.SetValue("tests_skipped", float64(a.counts[probe.StatusSkipped]))
		res.Devices = append(res.Devices, dr)
	}
	version := "DCGM " + d.Version
	if d.Driver != "" {
		version += ", driver " + d.Driver
	}
	if d.RuntimeError != "" {
		node.add(probe.StatusError, "runtime error: %s", d.RuntimeError)
	}
	nodeStatus := probe.Status("")
	if len(node) > 0 {
		nodeStatus = node.status()
	}
	res.Status = probe.Worst(nodeStatus, res.DeviceStatus())
	res.Message = joinMsg(joinMsg(node.message(), res.Summary()), version)
	return res
}
