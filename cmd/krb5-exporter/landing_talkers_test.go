package main

import (
	"context"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestLandingPageTopTalkers opens the landing page in headless chromium
// while a harness KDC takes a storm of logins as user 1 from 127.0.0.5
// (the project's client, bound to that address) and a hostile principal
// that does not exist fails from 127.0.0.6: the "Top talkers" table
// (window 5s) names the storm's address and principal first, with no
// more requests than the KDC's log has of them, and shows the hostile
// name as text (no element of it exists, none of its code ran).
func TestLandingPageTopTalkers(t *testing.T) {
	t.Parallel()
	ctx, problems := browser(t)
	r, base, logs := talkersDaemon(t)

	lctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan struct{})
	storm := loopbackClient(t, r, r.User(1), "127.0.0.5", nil)
	hostile := loopbackClient(t, r, hostileClient, "127.0.0.6", func(p krb5.Principal) *krb5.Credentials { return krb5.NewPasswordCredentials("x", p) })
	go func() { // bounded: 20 s at most, 50 logins a second
		defer close(done)
		for i := 0; i < 1000 && lctx.Err() == nil; i++ {
			storm.Login(lctx)
			if i%5 == 0 {
				hostile.Login(lctx)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stop(); <-done }()

	type cell struct{ Name, Count string }
	type talkersPage struct {
		Title    string
		Injected int
		Rows     map[string][]cell
	}
	read := func() talkersPage {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitReady(chromedp.CSS("#verdict"))); err != nil {
			t.Fatalf("%v\nexporter log:\n%s", err, logs.String())
		}
		p, err := chromedp.Run(ctx, chromedp.Evaluate[talkersPage](`({
			Title: document.title,
			Injected: document.querySelectorAll("img, script").length,
			Rows: Object.fromEntries(Array.from(document.querySelectorAll("#talkers tr.talkers")).map(tr => [
				tr.cells[0].textContent,
				Array.from(tr.querySelectorAll("td.talker")).map(td => ({
					Name: td.querySelector(".name").textContent, Count: td.querySelector(".num").textContent}))]))})`))
		if err != nil {
			t.Fatalf("%v\nexporter log:\n%s", err, logs.String())
		}
		return p
	}
	var page talkersPage
	testutil.Eventually(t, 30*time.Second, "the page to name the storm's address and principal first", func() bool {
		page = read()
		a, c := page.Rows["Requests by address"], page.Rows["Requests by client"]
		f := page.Rows["Failures by client"]
		return len(a) > 0 && a[0].Name == "127.0.0.5" && len(c) > 0 && c[0].Name == r.User(1) && len(f) > 0
	})
	stop()
	<-done
	if page.Title != "krb5-exporter" || page.Injected != 0 {
		t.Errorf("injected code ran or elements exist: title %q, %d img/script elements", page.Title, page.Injected)
	}
	// The hostile principal as logged, escaped and cut to 48 bytes.
	if f := page.Rows["Failures by client"]; f[0].Name != (hostileClient + "@" + r.Realm)[:48]+"..." {
		t.Errorf("failures by client %+v, want the hostile principal cut", f)
	}
	// No more than the KDC's log has: the window is one of its stretches.
	log, err := os.ReadFile(r.KDCLog)
	if err != nil {
		t.Fatal(err)
	}
	rate, err := strconv.ParseFloat(strings.TrimSuffix(page.Rows["Requests by address"][0].Count, "/s"), 64)
	if inLog := strings.Count(string(log), " 127.0.0.5: "); err != nil || rate <= 0 || rate*5 > float64(inLog) {
		t.Errorf("127.0.0.5's requests on the page %s (a 5 s window), the log has %d", page.Rows["Requests by address"][0].Count, inLog)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged: %v", p)
	}
}

// loopbackClient is the project's client for name (its keytab's keys
// when creds is nil) sending from the loopback address from.
func loopbackClient(t *testing.T, r *realm.Realm, name, from string, creds func(krb5.Principal) *krb5.Credentials) *krb5.Client {
	t.Helper()
	p, err := krb5.ParsePrincipal(name, r.Realm)
	if err != nil {
		t.Fatal(err)
	}
	var c *krb5.Credentials
	if creds != nil {
		c = creds(p)
	} else if c, err = krb5.NewKeytabCredentials(r.UserKeytab, p); err != nil {
		t.Fatal(err)
	}
	cl, err := krb5.NewClient(krb5.Options{KDC: r.KDCAddr, Client: p, Credentials: c, LocalAddr: netip.MustParseAddr(from)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
