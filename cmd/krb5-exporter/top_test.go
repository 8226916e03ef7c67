package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// The interactive view in a real terminal (tmux): the rows of the KDC's
// processes appear, the `s` key changes the order, `q` quits.
func TestTopInteractive(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if testutil.InCI() {
			t.Fatal("tmux missing in CI")
		}
		t.Skip(err)
	}
	r := testutil.Realm(t, realm.Options{Workers: 2, NoKadmind: true})
	session := "krb5top" + strings.ReplaceAll(t.Name(), "/", "")
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v %s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "130", "-y", "30",
		binary+" top --log "+r.KDCLog+" --collector.process.krb5kdc-pidfile "+r.KDCPidFile)
	t.Cleanup(func() { exec.Command("tmux", "kill-session", "-t", session).Run() })
	screen := func() string { return tmux("capture-pane", "-t", session, "-p") }
	testutil.Eventually(t, 20*time.Second, "the worker rows", func() bool {
		s := screen()
		return strings.Contains(s, "supervisor") && strings.Contains(s, "\n0 ") && strings.Contains(s, "\n1 ") && strings.Contains(s, "sort: name")
	})
	tmux("send-keys", "-t", session, "s")
	testutil.Eventually(t, 20*time.Second, "the order to change", func() bool { return strings.Contains(screen(), "sort: requests") })
	tmux("send-keys", "-t", session, "q")
	testutil.Eventually(t, 20*time.Second, "top to quit", func() bool {
		return exec.Command("tmux", "has-session", "-t", session).Run() != nil
	})
}
