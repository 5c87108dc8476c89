// Package dashboards_test checks the Grafana dashboards in helm/faultline/dashboards.
//
// TestDashboardFiles checks their structure (no components needed). TestDashboardQueries
// executes every query of every panel, and every variable query, against a real Loki
// filled by the real dmesg-exporter (corpus kernel lines, training-pod lines, and the
// controller's and probe agents' own logs as pod logs) and a real Prometheus scraping the
// real controller, two exporters and two probe agents after probe runs; every query must
// be accepted and return data, and the panels that count something must count what was
// written.
package dashboards_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/test/testenv"
)

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	ID            any      `json:"id"`
	UID           string   `json:"uid"`
	Title         string   `json:"title"`
	Tags          []string `json:"tags"`
	Editable      bool     `json:"editable"`
	SchemaVersion int      `json:"schemaVersion"`
	Panels        []panel  `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`

	file string
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int            `json:"id"`
	Title      string         `json:"title"`
	Type       string         `json:"type"`
	Datasource *datasourceRef `json:"datasource"`
	GridPos    struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"` // a collapsed row's panels
}

type target struct {
	RefID      string         `json:"refId"`
	Datasource *datasourceRef `json:"datasource"`
	Expr       string         `json:"expr"`
	QueryType  string         `json:"queryType"` // Loki: range or instant
	Instant    bool           `json:"instant"`   // Prometheus
	Range      *bool          `json:"range"`     // Prometheus
	Format     string         `json:"format"`
}

// instant says whether Grafana runs the target as an instant query.
func (t target) instant(kind string) bool {
	if kind == "loki" {
		return t.QueryType == "instant"
	}
	return t.Instant && (t.Range == nil || !*t.Range)
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource *datasourceRef  `json:"datasource"`
	IncludeAll bool            `json:"includeAll"`
	Multi      bool            `json:"multi"`
	AllValue   string          `json:"allValue"`
}

// allPanels flattens rows.
func (d dashboard) allPanels() []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// datasourceVars maps each datasource variable's name to its plugin type.
func (d dashboard) datasourceVars() map[string]string {
	m := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type == "datasource" {
			var q string
			_ = json.Unmarshal(v.Query, &q)
			m[v.Name] = q
		}
	}
	return m
}

func dashboardsDir(t *testing.T) string {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "helm", "faultline", "dashboards")
}

// loadDashboards parses every JSON file the chart ships as a dashboard.
func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardsDir(t), "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no dashboards in helm/faultline/dashboards")
	}
	var out []dashboard
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		d.file = filepath.Base(f)
		out = append(out, d)
	}
	return out
}

// grafanaVars are the built-in variables a query may use.
var grafanaVars = map[string]bool{"__interval": true, "__interval_ms": true, "__rate_interval": true, "__range": true,
	"__range_s": true, "__range_ms": true, "__auto": true}

var varRef = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[a-z]+)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)\]\]`)

func referencedVars(expr string) []string {
	var out []string
	for _, m := range varRef.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1]+m[2]+m[3])
	}
	return out
}

// TestDashboardFiles checks what Grafana and the chart need from each file: valid JSON,
// a unique uid, schemaVersion 39, editable, tagged faultline, and every panel and query
// on a datasource variable of the right type, using only variables that exist.
func TestDashboardFiles(t *testing.T) {
	ds := loadDashboards(t)
	uids := map[string]string{}
	for _, d := range ds {
		where := d.file
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: uid %q, title %q", where, d.UID, d.Title)
		}
		if prev, dup := uids[d.UID]; dup {
			t.Errorf("%s: uid %q also in %s", where, d.UID, prev)
		}
		uids[d.UID] = where
		if d.ID != nil {
			t.Errorf("%s: id %v: provisioned dashboards have id null", where, d.ID)
		}
		if d.SchemaVersion != 39 {
			t.Errorf("%s: schemaVersion %d, want 39", where, d.SchemaVersion)
		}
		if !d.Editable {
			t.Errorf("%s: not editable", where)
		}
		if !slices.Contains(d.Tags, "faultline") {
			t.Errorf("%s: tags %v lack faultline", where, d.Tags)
		}
		dsVars := d.datasourceVars()
		known := map[string]bool{}
		for k := range grafanaVars {
			known[k] = true
		}
		for _, v := range d.Templating.List {
			known[v.Name] = true
			if v.Type == "query" {
				if v.Datasource == nil || dsVars[strings.Trim(v.Datasource.UID, "${}")] != v.Datasource.Type {
					t.Errorf("%s: variable %s: datasource %+v is not a datasource variable of its type", where, v.Name, v.Datasource)
				}
				if v.IncludeAll && v.AllValue == "" {
					t.Errorf("%s: variable %s: includeAll without allValue (Grafana would send every value)", where, v.Name)
				}
			}
		}
		if len(dsVars) == 0 {
			t.Errorf("%s: no datasource variable", where)
		}
		ids := map[int]bool{}
		for _, p := range d.allPanels() {
			pw := fmt.Sprintf("%s / %s", where, p.Title)
			if p.Type == "row" {
				continue
			}
			if p.Title == "" {
				t.Errorf("%s: panel %d has no title", where, p.ID)
			}
			if ids[p.ID] || p.ID == 0 {
				t.Errorf("%s: panel id %d missing or not unique", pw, p.ID)
			}
			ids[p.ID] = true
			if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: gridPos %+v", pw, g)
			}
			if p.Datasource == nil || dsVars[strings.Trim(p.Datasource.UID, "${}")] != p.Datasource.Type ||
				!strings.HasPrefix(p.Datasource.UID, "${") {
				t.Errorf("%s: datasource %+v is not one of the dashboard's datasource variables %v", pw, p.Datasource, dsVars)
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no queries", pw)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: refId %q missing or not unique", pw, tg.RefID)
				}
				refs[tg.RefID] = true
				if tg.Datasource == nil || *tg.Datasource != *p.Datasource {
					t.Errorf("%s / %s: datasource %+v, the panel's is %+v", pw, tg.RefID, tg.Datasource, p.Datasource)
				}
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s / %s: empty query", pw, tg.RefID)
				}
				if p.Datasource.Type == "loki" && tg.QueryType != "range" && tg.QueryType != "instant" {
					t.Errorf("%s / %s: Loki queryType %q", pw, tg.RefID, tg.QueryType)
				}
				for _, v := range referencedVars(tg.Expr) {
					if !known[v] {
						t.Errorf("%s / %s: unknown variable $%s", pw, tg.RefID, v)
					}
				}
			}
		}
	}
	var got []string
	for u := range uids {
		got = append(got, u)
	}
	sort.Strings(got)
	for _, want := range []string{"faultline-faults", "faultline-probes"} {
		if _, ok := uids[want]; !ok {
			t.Errorf("no dashboard with uid %s (have %v)", want, got)
		}
	}
}
