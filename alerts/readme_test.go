package alerts

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateREADME = flag.Bool("update", false, "rewrite the README's alert list from the rule files")

// The README's alert list lies between these lines.
const (
	alertListBegin = "<!-- alert list: generated from alerts/*.rules.yml by `go test ./alerts -run TestREADMEAlertList -update` -->"
	alertListEnd   = "<!-- end of the alert list -->"
)

// alertList is the README's alert list: every alert of the rule files, in
// their order, with its severity and summary; the runbook has the rest.
func alertList(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("| alert | severity | summary |\n|---|---|---|\n")
	for _, r := range allRules(t) {
		if r.Alert == "" {
			continue
		}
		fmt.Fprintf(&b, "| [`%s`](alerts/runbook.md#%s) | %s | %s |\n", r.Alert, strings.ToLower(r.Alert),
			r.Labels["severity"], strings.ReplaceAll(r.Annotations["summary"], "|", `\|`))
	}
	return b.String()
}

// TestREADMEAlertList keeps the README's alert list equal to the rule
// files: an alert added, removed, renamed or re-summarised fails here
// until the list is generated again (-update).
func TestREADMEAlertList(t *testing.T) {
	text, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(text), alertListBegin+"\n")
	if !ok {
		t.Fatalf("README.md: no line %q", alertListBegin)
	}
	got, after, ok := strings.Cut(rest, alertListEnd+"\n")
	if !ok {
		t.Fatalf("README.md: no line %q after the alert list", alertListEnd)
	}
	want := alertList(t)
	if got == want {
		return
	}
	if *updateREADME {
		if err := os.WriteFile("../README.md", []byte(before+alertListBegin+"\n"+want+alertListEnd+"\n"+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gotRows, wantRows := strings.Split(got, "\n"), strings.Split(want, "\n")
	for _, r := range wantRows {
		if !strings.Contains(got, r+"\n") {
			t.Errorf("README.md's alert list lacks: %s", r)
		}
	}
	for _, r := range gotRows {
		if r != "" && !strings.Contains(want, r+"\n") {
			t.Errorf("README.md's alert list has a row no rule file gives: %s", r)
		}
	}
	t.Errorf("README.md's alert list differs from the rule files: go test ./alerts -run TestREADMEAlertList -update")
}
