package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/faultline-dev/faultline/controller/decide"
	"github.com/faultline-dev/faultline/controller/lokisource"
	"github.com/faultline-dev/faultline/logstream"
	"github.com/faultline-dev/faultline/rules"
)

// lokiFlags are the Loki client's flags, shared by the controller and replay so that
// replay reads Loki exactly as the controller does.
type lokiFlags struct {
	// sel holds the value of each source's --NAME-selector flag.
	sel map[string]*string
}

func (l *lokiFlags) register(f *pflag.FlagSet, c *lokisource.Config) {
	f.StringVar(&c.URL, "loki-url", "", "Loki base URL, e.g. http://loki-gateway.loki:80")
	f.StringVar(&c.Tenant, "loki-tenant", "", "X-Scope-OrgID")
	f.StringVar(&c.BearerTokenFile, "loki-bearer-token-file", "", "file holding a bearer token (read at each request)")
	f.StringVar(&c.Username, "loki-username", "", "basic auth user (password from $LOKI_PASSWORD)")
	f.StringVar(&c.TLS.CAFile, "loki-ca-file", "", "CA certificates for Loki's TLS")
	f.StringVar(&c.TLS.CertFile, "loki-cert-file", "", "client certificate for Loki")
	f.StringVar(&c.TLS.KeyFile, "loki-key-file", "", "client key for Loki")
	f.BoolVar(&c.TLS.InsecureSkipVerify, "loki-insecure-skip-verify", false, "do not verify Loki's certificate")
	f.DurationVar(&c.MaxQueryLength, "loki-max-query-length", 721*time.Hour, "Loki's max_query_length: catch-ups ask for windows no longer than this")
	f.DurationVar(&c.QueryTimeout, "loki-query-timeout", lokisource.DefaultQueryTimeout, "longest a query_range may take, answer included; a catch-up page past it is asked again for a shorter window and a smaller page. Keep it below Loki's server.http_server_write_timeout (30s by default)")
	f.IntVar(&c.PageLimit, "loki-page-limit", lokisource.DefaultPageLimit, "lines per query_range page (Loki's max_entries_limit_per_query; a larger page Loki refuses is asked again at Loki's limit). Loki's cost is mostly per page: fewer, larger pages keep up with more lines")
	f.Int64Var(&c.MaxResponseBytes, "loki-max-response-bytes", 16<<20, "largest query_range answer or tail message read; a larger page is asked again in smaller pages")
	f.StringVar(&c.NodeLabel, "node-label", logstream.LabelNode, "label (or structured metadata) holding the node name")
	l.sel = map[string]*string{}
	for _, s := range logstream.Sources() {
		l.sel[s.Name] = f.String(s.Name+"-selector", s.Selector, "LogQL stream selector of "+s.Description)
	}
}

// apply completes c after the flags were parsed: the password from $LOKI_PASSWORD.
func (l *lokiFlags) apply(c *lokisource.Config) {
	if pw := os.Getenv("LOKI_PASSWORD"); pw != "" {
		c.Password = pw
	}
}

func (l *lokiFlags) selectors() lokisource.Selectors {
	sel := lokisource.Selectors{}
	for name, v := range l.sel {
		sel[name] = *v
	}
	return sel
}

// decideFlags are the mode ceiling, budget and storm-hold flags, shared by the
// controller and replay so that replay decides as the controller does.
type decideFlags struct {
	ruleBudget map[string]int
	maxMode    string
}

func (d *decideFlags) register(f *pflag.FlagSet, c *decide.Config) {
	f.StringVar(&d.maxMode, "max-mode", string(rules.ModeEnforce), "ceiling of every rule's mode (observe < annotate < enforce): a rule in a higher mode acts in this one")
	f.Float64Var(&c.MaxPercent, "budget-percent", 10, "most nodes faultline may taint, as a percentage of eligible nodes (matching --probe-node-selector, not opted out)")
	f.IntVar(&c.MaxNodes, "budget-max", 0, "most nodes faultline may taint (0: no absolute cap)")
	f.StringToIntVar(&d.ruleBudget, "rule-budget", nil, "per-rule budgets, pack/rule=N (repeatable or comma-separated)")
	f.Float64Var(&c.StormShare, "storm-share", 0.2, "a rule firing on more than this share of eligible nodes (--probe-node-selector) within --storm-window is a fleet event: held")
	f.DurationVar(&c.StormWindow, "storm-window", 10*time.Minute, "window of the storm hold")
	f.BoolVar(&c.DisableStorm, "no-storm-hold", false, "disable the storm hold")
}

// apply completes c after the flags were parsed, naming the flag of a bad value.
func (d *decideFlags) apply(c *decide.Config) error {
	m, err := rules.ParseMode(d.maxMode)
	if err != nil {
		return fmt.Errorf("--max-mode: %w", err)
	}
	c.MaxMode, c.RuleBudgets = m, d.ruleBudget
	return nil
}
