package bench

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// Each --target.FLAG sets the report's target of that name (its JSON key,
// FLAG with _), every target has a flag, and a help that says a default
// says Defaults' value: a table row with another row's field would set
// and show the wrong target.
func TestTargetFlagsAreTheTargets(t *testing.T) {
	var defaults map[string]float64
	js, _ := json.Marshal(Defaults().Targets)
	if err := json.Unmarshal(js, &defaults); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tg := range AllTargets() {
		key := strings.ReplaceAll(tg.Flag, "-", "_")
		var x Targets
		*tg.Field(&x) = 12345
		var set map[string]float64
		js, _ := json.Marshal(x)
		json.Unmarshal(js, &set)
		for k, v := range set {
			if (v == 12345) != (k == key) {
				t.Errorf("--target.%s set to 12345: %s is %g", tg.Flag, k, v)
			}
		}
		if seen[key] {
			t.Errorf("--target.%s twice", tg.Flag)
		}
		seen[key] = true
		if h := tg.Help(); strings.Contains(tg.help, "%s") && !strings.Contains(h, "("+strconv.FormatFloat(defaults[key], 'g', -1, 64)) {
			t.Errorf("--target.%s: help %q does not say the default %g", tg.Flag, h, defaults[key])
		}
	}
	for k := range defaults {
		if !seen[k] {
			t.Errorf("target %s has no flag", k)
		}
	}
}
