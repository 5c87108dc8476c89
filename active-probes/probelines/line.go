package probelines

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/faultline-dev/faultline/active-probes/probe"
)

// Layout is the format of a verdict line: the check, its status, the trigger, the
// fields (each with its leading space) and the quoted message. Keep it stable: rules
// (rules/packs/75-probe-verdicts.yaml cites it), LogQL and dashboards match it.
const Layout = "faultline-probe: check=%s status=%s trigger=%s%s message=%s"

// TriggerUnknown is the trigger of a run whose caller named none.
const TriggerUnknown = "unknown"

// maxMessage bounds the message a line carries (in bytes, before quoting): a check
// that fails on every device can say a lot, and the values are in the fields.
const maxMessage = 1024

// Format writes the verdict line of one result of a run started by trigger.
func Format(res probe.Result, trigger string) string {
	if trigger == "" {
		trigger = TriggerUnknown
	}
	var fields strings.Builder
	probe.WriteValues(&fields, "", res.Values)
	for _, d := range res.Devices {
		if d.Status == probe.StatusFail {
			probe.WriteValues(&fields, d.ID+"/", d.Values)
		}
	}
	msg := res.Message
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return fmt.Sprintf(Layout, res.Check, res.Status, trigger, fields.String(), strconv.Quote(msg))
}

// Syslog levels of the lines (the shipped records' severity).
const (
	levelErr     = 3
	levelWarning = 4
	levelInfo    = 6
)

// level is a verdict's severity: err for a failed check, warning for a warn or a
// check that could not reach a verdict, info otherwise.
func level(s probe.Status) int {
	switch s {
	case probe.StatusFail:
		return levelErr
	case probe.StatusWarn, probe.StatusError:
		return levelWarning
	}
	return levelInfo
}
