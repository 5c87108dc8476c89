package sources_test

import (
	"testing"

	"github.com/faultline-dev/faultline/rules/packs"
	"github.com/faultline-dev/faultline/rules/sources"
)

// TestInventoryAccounted fails when a message of the inventory is neither covered
// by the default packs nor ignored with a reason, or when the rule an inventory file
// records for a message no longer matches it: the packs and the inventory move
// together (go run ./rules/sources/extract -refresh rules/sources/inventory).
func TestInventoryAccounted(t *testing.T) {
	eng, err := packs.Engine()
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
	eng, err := packs.Engine()
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
