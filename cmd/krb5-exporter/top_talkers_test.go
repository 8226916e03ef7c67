package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestTopTalkersAgainstDaemon runs `krb5-exporter top --once` against a
// daemon (top_talkers.window 5s) following a harness KDC while the
// project's client logs in as user 1 from 127.0.0.5 again and again and
// as user 2 from 127.0.0.6 now and then: top's talkers line names
// 127.0.0.5 first, at no more requests a second than its logins over a
// window (a login one request, whatever its lines in the log).
func TestTopTalkersAgainstDaemon(t *testing.T) {
	t.Parallel()
	r, base, _ := talkersDaemon(t)
	busy, quiet := loopbackClient(t, r, r.User(1), "127.0.0.5", nil), loopbackClient(t, r, r.User(2), "127.0.0.6", nil)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	var logins []time.Time // the busy client's, read after done
	go func() {            // bounded: 20 s at most
		defer close(done)
		for i := 0; i < 1000 && ctx.Err() == nil; i++ {
			if _, err := busy.Login(ctx); err == nil {
				logins = append(logins, time.Now())
			}
			if i%10 == 0 {
				quiet.Login(ctx)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stop(); <-done }()
	line := regexp.MustCompile(`(?m)^talkers requests by address: (\S+) \(([0-9.]+)/s\)(.*)$`)
	var m []string
	testutil.Eventually(t, 30*time.Second, "top's talkers line to name 127.0.0.5 first, 127.0.0.6 after", func() bool {
		stdout, stderr, code := exporter(t, "top", "--once", "--interval", "100ms", "--daemon.url", base+"/metrics")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		m = line.FindStringSubmatch(stdout)
		return m != nil && m[1] == "127.0.0.5" && strings.Contains(m[3], "127.0.0.6")
	})
	stop()
	<-done
	// Requests, not log lines (a SPAKE login is 3): no more than the
	// logins made in any 5 s.
	most := 0
	for i, at := range logins {
		j := i
		for j < len(logins) && logins[j].Sub(at) < 5*time.Second {
			j++
		}
		most = max(most, j-i)
	}
	rate, _ := strconv.ParseFloat(m[2], 64)
	if rate <= 0 || rate*5 > float64(most)+0.5 {
		t.Errorf("top shows 127.0.0.5 at %v/s over 5 s, the client logged in at most %d times in 5 s", rate, most)
	}
}

// talkersDaemon starts a daemon with realm up's configuration of a small
// harness realm and a top-talkers window of 5 s (a test sees two windows
// in seconds), as the talkers tests of the landing page and top use it.
func talkersDaemon(t *testing.T) (*realm.Realm, string, *testutil.LockedBuffer) {
	t.Helper()
	r := realmtest.Realm(t, realm.Options{Dir: filepath.Join(t.TempDir(), "r"), Users: 2, Services: 1, Fillers: -1, NoKadmind: true})
	dir := t.TempDir()
	cfg := talkersConfig(t, r, dir, nil)
	base, _, logs := daemon(t, "--config.file", cfg, "--kdclog.position-file", filepath.Join(dir, "positions.json"))
	return r, base, logs
}

// talkersConfig writes realm up's configuration of r into dir, edited by
// edit when not nil, with a top-talkers window of 5 s, and returns its
// path.
func talkersConfig(t *testing.T, r *realm.Realm, dir string, edit func(string) string) string {
	t.Helper()
	cfg := filepath.Join(dir, "exporter.yml")
	if err := writeRealmConfig(r, cfg); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cfg)
	text := string(b)
	if edit != nil {
		text = edit(text)
	}
	if err := os.WriteFile(cfg, []byte(text+"\ntop_talkers:\n  window: 5s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}
