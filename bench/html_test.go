package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil/browser"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// report.html opens in a real headless browser without the network:
// every chart is there, drawn (non-empty SVG with paths), and the page
// logs no error.
func TestReportHTMLInBrowser(t *testing.T) {
	bin := testutil.RequireProgram(t, "chromium", "chromium-browser", "google-chrome")
	r := upRealm(t, realm.Options{NoKadmind: true})
	s := small("latency", "concurrency", "degradation")
	rep := runSuite(t, RealmSystem(r), s)
	dir := t.TempDir()
	if err := report.WriteAll(rep, dir, ""); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	want := []string{"concurrency-rate", "concurrency-latency", "latency-distribution", "cpu-over-time", "rss-over-time", "degradation-rounds"}

	bctx, stop, err := browser.Start(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel, problems := browser.Tab(bctx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitReady("body")); err != nil {
		t.Fatal(err)
	}
	type box struct {
		ID            string
		Width, Height float64
		Paths         int
	}
	charts, err := chromedp.Run(ctx, chromedp.Evaluate[[]box](`Array.from(document.querySelectorAll("[data-chart]")).map(d => {
		const svg = d.querySelector("svg");
		const b = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
		return {ID: d.dataset.chart, Width: b.width, Height: b.height,
			Paths: svg ? svg.querySelectorAll("path").length : 0};
	})`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]box{}
	for _, c := range charts {
		got[c.ID] = c
	}
	for _, id := range want {
		c, ok := got[id]
		if !ok {
			t.Errorf("chart %s missing", id)
			continue
		}
		if c.Width < 100 || c.Height < 50 || c.Paths < 3 {
			t.Errorf("chart %s is empty: %+v", id, c)
		}
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged: %v", p)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"src=", "href=", "url(", "@import", "<script", "<link"} {
		if strings.Contains(string(b), ref) {
			t.Errorf("report.html is not self-contained: it has %q", ref)
		}
	}
}
