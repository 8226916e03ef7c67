package attack

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// documentedLines is N of the phrase around "N AS lines" in
// docs/metrics.md's attack signals section.
func documentedLines(t *testing.T, re string) int {
	t.Helper()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(re).FindSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/metrics.md: no %q", re)
	}
	n, err := strconv.Atoi(strings.ReplaceAll(string(m[1]), ",", ""))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRecoveryLines: a wrong key is recovered by an ISSUE of the same
// client and address within the next N AS lines that docs/metrics.md
// gives, not one line later; a ticket has pre-authentication when a step
// of its client is in the N AS lines before it. Other clients' lines
// fill the gap; the clock stands still.
func TestRecoveryLines(t *testing.T) {
	recover := documentedLines(t, `follows within `+"`recovery_wait`"+` \(default 5s\) or the next ([0-9,]+) AS\s+lines`)
	before := documentedLines(t, `in the ([0-9,]+) AS\s+lines before it`)
	fill := func(f *feeder, n int) {
		for i := range n {
			f.as(OutcomeUnknownClient, "x", strconv.Itoa(i%3))
		}
	}
	for _, tc := range []struct {
		at    int // the ISSUE is this AS line after the failure
		wrong uint64
	}{{1, 0}, {recover, 0}, {recover + 1, 1}} {
		f := newFeeder(config.AttackSignals{})
		f.as(OutcomeWrongKey, "alice@PERF.TEST", "10.0.0.1")
		fill(f, tc.at-1)
		f.as(OutcomeIssue, "alice@PERF.TEST", "10.0.0.1")
		f.wait(config.DefaultAttackRecoveryWait)
		if got := f.snap().Events[EventWrongPassword]; got != tc.wrong {
			t.Errorf("ISSUE %d AS lines after the failure: %d wrong passwords, want %d", tc.at, got, tc.wrong)
		}
	}
	for _, tc := range []struct {
		at        int // the ISSUE is this AS line after the step
		noPreauth uint64
	}{{1, 0}, {before, 0}, {before + 1, 1}} {
		f := newFeeder(config.AttackSignals{FollowLogins: true})
		f.as(OutcomeNeededPreauth, "alice@PERF.TEST", "10.0.0.1")
		fill(f, tc.at-1)
		f.as(OutcomeIssue, "alice@PERF.TEST", "10.0.0.1")
		if got := f.snap().Events[EventNoPreauthTicket]; got != tc.noPreauth {
			t.Errorf("ISSUE %d AS lines after NEEDED_PREAUTH: %d tickets without pre-authentication, want %d", tc.at, got, tc.noPreauth)
		}
	}
}
