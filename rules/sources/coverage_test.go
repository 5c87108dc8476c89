package sources_test

import (
	"strings"
	"testing"

	"github.com/faultline-dev/faultline/rules/sources"
	"github.com/faultline-dev/faultline/test/packengine"
)

// coverage classifies the inventory against the default packs.
func coverage(t *testing.T) *sources.Report {
	t.Helper()
	eng, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	invs, err := sources.Load("inventory")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sources.Coverage(eng, invs)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestInventoryAccounted fails when a message of the inventory is neither covered
// by the default packs nor ignored with a reason, or when the rule an inventory file
// records for a message no longer matches it: the packs and the inventory move
// together (go run ./rules/sources/extract -refresh rules/sources/inventory).
func TestInventoryAccounted(t *testing.T) {
	rep := coverage(t)
	for _, s := range rep.Sources {
		for _, m := range s.UnaccountedMessages {
			t.Errorf("%s %s:%d %v: %s(%q) is neither covered by a rule nor ignored with a reason", s.Project, s.File, m.Line, m.Versions, m.Call, m.Format)
		}
		for _, st := range s.Stale {
			t.Errorf("%s %s: %s (refresh the inventory)", s.Project, s.File, st)
		}
	}
	if rep.Total.Covered == 0 {
		t.Error("the inventory covers nothing")
	}
	t.Logf("total: %d messages, %d covered, %d ignored, %d unaccounted",
		rep.Total.Messages, rep.Total.Covered, rep.Total.Ignored, rep.Total.Unaccounted)
}

// TestInventoryRecordsEveryRule checks each covered message names the rule that
// covers it, so a reader of the inventory sees which rule is for which message.
func TestInventoryRecordsEveryRule(t *testing.T) {
	eng, err := packengine.Engine()
	if err != nil {
		t.Fatal(err)
	}
	invs, err := sources.Load("inventory")
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		for _, m := range inv.Messages {
			ids, err := sources.Classify(eng, inv, m)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) > 0 && m.Rule == "" {
				t.Errorf("%s:%d: covered by %v but the inventory records no rule", inv.File, m.Line, ids)
			}
			if len(ids) == 0 && m.Rule != "" {
				t.Errorf("%s:%d: records %s, which no longer matches", inv.File, m.Line, m.Rule)
			}
		}
	}
}

// Targets of the inventory: the versions fleets run, and how many messages the
// packs cover across them.
const (
	minCovered       = 1500
	minNVIDIABranchs = 6
	minLinuxVersions = 6
)

// TestCoverageByVersion checks the inventory spans the versions fleets run (NVIDIA
// driver branches, Linux releases, the last releases of NCCL and UCX) and that
// the per-version counts add up: every version's messages are covered or ignored.
func TestCoverageByVersion(t *testing.T) {
	rep := coverage(t)
	branches := map[string]bool{}
	versions := map[string]int{}
	for _, v := range rep.Versions {
		t.Logf("%-32s %-16s files %3d messages %4d covered %4d ignored %4d unaccounted %d",
			v.Project, v.Version, v.Files, v.Messages, v.Covered, v.Ignored, v.Unaccounted)
		versions[v.Project]++
		if v.Project == "NVIDIA/open-gpu-kernel-modules" {
			branches[strings.SplitN(v.Version, ".", 2)[0]] = true
		}
		if v.Covered+v.Ignored+v.Unaccounted != v.Messages {
			t.Errorf("%s %s: %d covered + %d ignored + %d unaccounted != %d messages", v.Project, v.Version, v.Covered, v.Ignored, v.Unaccounted, v.Messages)
		}
		if v.Unaccounted > 0 {
			t.Errorf("%s %s: %d messages unaccounted", v.Project, v.Version, v.Unaccounted)
		}
	}
	if len(branches) < minNVIDIABranchs {
		t.Errorf("the NVIDIA driver is inventoried at %d branches, want at least %d", len(branches), minNVIDIABranchs)
	}
	if versions["linux"] < minLinuxVersions {
		t.Errorf("Linux is inventoried at %d versions, want at least %d", versions["linux"], minLinuxVersions)
	}
	for _, p := range []string{"NVIDIA/nccl", "openucx/ucx"} {
		if versions[p] < 3 {
			t.Errorf("%s is inventoried at %d releases, want the last three", p, versions[p])
		}
	}
	if rep.Total.Covered < minCovered {
		t.Errorf("%d messages covered, want at least %d", rep.Total.Covered, minCovered)
	}
	t.Logf("total: %d messages (each wording once), %d covered, %d ignored, %d unaccounted",
		rep.Total.Messages, rep.Total.Covered, rep.Total.Ignored, rep.Total.Unaccounted)
}
