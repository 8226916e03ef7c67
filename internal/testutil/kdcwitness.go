package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// The KDC log lines of a harness realm's users getting a TGT (ASIssue)
// and a ticket for one of its services (TGSIssue).
const (
	ASIssue  = `AS_REQ .* 127\.0\.0\.1: ISSUE: .* user\d+@PERF\.TEST for krbtgt/`
	TGSIssue = `TGS_REQ .* 127\.0\.0\.1: ISSUE: .* user\d+@PERF\.TEST for HTTP/web`
)

// DrainKDC returns once the KDC has logged every request sent to it so
// far: a load cut off at its end leaves requests queued at the KDC, which
// it answers (and logs) afterwards. One KDC process takes its UDP
// datagrams in order and logs each before it replies, so once a login of
// an unknown principal sent now has failed, its log line (and every
// earlier one) is in the log.
func DrainKDC(t testing.TB, r *realm.Realm) {
	t.Helper()
	name := fmt.Sprintf("drain%d", drains.Add(1))
	cmd := exec.Command("kinit", name)
	cmd.Env = append(os.Environ(), r.Env()...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not found") {
		t.Fatalf("kinit %s: %v: %s", name, err, out)
	}
	re := regexp.MustCompile(`CLIENT_NOT_FOUND: ` + name + `@`)
	for deadline := time.Now().Add(10 * time.Second); ; {
		b, err := os.ReadFile(r.KDCLog)
		if err != nil {
			t.Fatal(err)
		}
		if re.Match(b) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the KDC never logged the login of %s", name)
		}
		time.Sleep(5 * time.Millisecond) // should the log be written after the reply
	}
}

var drains atomic.Int64

// LogCount counts the lines of a daemon log matching re, from offset.
func LogCount(t testing.TB, path string, from int64, re string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return len(regexp.MustCompile(re).FindAll(b[from:], -1))
}

// LogSize is the size of a log: where what is logged next begins.
func LogSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
