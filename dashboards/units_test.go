package dashboards

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// rendered is what these tests read of a dashboard's JSON.
type rendered struct {
	Links []struct {
		Type string   `json:"type"`
		Tags []string `json:"tags"`
		URL  string   `json:"url"`
	} `json:"links"`
	Annotations struct {
		List []struct {
			Name string `json:"name"`
			Expr string `json:"expr"`
		} `json:"list"`
	} `json:"annotations"`
	Panels []struct {
		Type        string `json:"type"`
		Title       string `json:"title"`
		FieldConfig struct {
			Defaults struct {
				Unit     string `json:"unit"`
				Mappings []any  `json:"mappings"`
			} `json:"defaults"`
			Overrides []struct {
				Matcher struct {
					ID      string `json:"id"`
					Options string `json:"options"`
				} `json:"matcher"`
				Properties []struct {
					ID    string `json:"id"`
					Value any    `json:"value"`
				} `json:"properties"`
			} `json:"overrides"`
		} `json:"fieldConfig"`
		Transformations []struct {
			ID      string `json:"id"`
			Options struct {
				Exclude map[string]bool   `json:"excludeByName"`
				Rename  map[string]string `json:"renameByName"`
			} `json:"options"`
		} `json:"transformations"`
		Links []struct {
			Title string `json:"title"`
			URL   string `json:"url"`
		} `json:"links"`
		Targets []struct {
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

func render(t *testing.T, name string) rendered {
	t.Helper()
	b, err := Render(All()[name])
	if err != nil {
		t.Fatal(err)
	}
	var d rendered
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// unitless are the units that say nothing about what is counted.
var unitless = map[string]bool{"": true, "none": true, "short": true}

// TestUnits: every panel and every table column says what its numbers
// are: a unit, or words for the values (a 0/1 gauge shown as up/down). A
// table's value column ("Value", "Value #A" of each query) is renamed and
// given a unit, or left out.
func TestUnits(t *testing.T) {
	for name := range All() {
		for _, p := range render(t, name).Panels {
			if p.Type == "row" {
				continue
			}
			where := name + ": " + p.Title
			unit := p.FieldConfig.Defaults.Unit
			if p.Type != "table" && unitless[unit] && len(p.FieldConfig.Defaults.Mappings) == 0 {
				t.Errorf("%s: unit %q and no words for its values", where, unit)
			}
			if p.Type != "table" {
				continue
			}
			columnUnit := map[string]string{}
			for _, o := range p.FieldConfig.Overrides {
				for _, pr := range o.Properties {
					if pr.ID == "unit" {
						columnUnit[o.Matcher.Options], _ = pr.Value.(string)
					}
					if pr.ID == "mappings" {
						columnUnit[o.Matcher.Options] = "words"
					}
				}
			}
			for _, q := range p.Targets {
				col := "Value"
				if len(p.Targets) > 1 {
					col = "Value #" + q.RefID
				}
				renamed, excluded := "", false
				for _, tr := range p.Transformations {
					if tr.ID == "organize" {
						renamed, excluded = tr.Options.Rename[col], tr.Options.Exclude[col]
					}
				}
				switch {
				case excluded:
				case renamed == "" || strings.HasPrefix(renamed, "Value"):
					t.Errorf("%s: column %q shown unnamed", where, col)
				case columnUnit[renamed] == "" && unitless[unit]:
					t.Errorf("%s: column %q (%s) has no unit", where, renamed, col)
				case columnUnit[renamed] != "" && columnUnit[renamed] != "words" && unitless[columnUnit[renamed]]:
					t.Errorf("%s: column %q has unit %q", where, renamed, columnUnit[renamed])
				}
			}
		}
	}
}

// TestLinksAndAnnotations: each dashboard links the others (by their
// tag) and the runbook, shows the selected exporters' firing alerts as
// annotations, and its panels' runbook links land on a section of
// alerts/runbook.md (the heading of an alert).
func TestLinksAndAnnotations(t *testing.T) {
	book, err := os.ReadFile("../alerts/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ +(\S+)\s*$`).FindAllStringSubmatch(string(book), -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	minLinks := map[string]int{"krb5-kdc-overview.json": 25, "krb5-probes.json": 8, "krb5-bench.json": 0}
	for name := range All() {
		d := render(t, name)
		dashboards, runbookLink := false, false
		for _, l := range d.Links {
			dashboards = dashboards || (l.Type == "dashboards" && len(l.Tags) == 1 && l.Tags[0] == tag)
			runbookLink = runbookLink || (l.Type == "link" && l.URL == "${runbook}")
		}
		if !dashboards || !runbookLink {
			t.Errorf("%s: links to the other dashboards %v, to the runbook %v", name, dashboards, runbookLink)
		}
		alerts := false
		for _, a := range d.Annotations.List {
			alerts = alerts || (strings.HasPrefix(a.Expr, `ALERTS{alertstate="firing"`) && strings.Contains(a.Expr, `job=~"$job"`) && strings.Contains(a.Expr, `instance=~"$instance"`))
		}
		if !alerts {
			t.Errorf("%s: no annotation of the selected exporters' firing alerts", name)
		}
		n := 0
		for _, p := range d.Panels {
			for _, l := range p.Links {
				anchor, ok := strings.CutPrefix(l.URL, "${runbook}#")
				if !ok {
					t.Errorf("%s: %s: link %q is not to the runbook", name, p.Title, l.URL)
					continue
				}
				if !anchors[anchor] {
					t.Errorf("%s: %s: runbook link #%s: no such section in alerts/runbook.md", name, p.Title, anchor)
				}
				n++
			}
		}
		if n < minLinks[name] {
			t.Errorf("%s: %d runbook links, want at least %d", name, n, minLinks[name])
		}
	}
}
