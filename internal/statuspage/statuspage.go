// Package statuspage is the exporter's landing page: whether the KDC is
// OK, from the probes' last results, the log sources' positions and the
// KDC processes found, with links to /metrics, /probe and the docs.
//
// It is rendered on request from read-only views the daemon passes in
// (nothing runs while no one looks), by html/template, which escapes
// every value: probe names, log paths and a KDC's error texts are
// attacker-influenced. The page has no script and no external asset; its
// one inline style is allowed by hash in a strict Content-Security-Policy.
package statuspage

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/capacity"
	"github.com/krb5-exporter/krb5-exporter/collector"
	"github.com/krb5-exporter/krb5-exporter/internal/probestatus"
	"github.com/krb5-exporter/krb5-exporter/kdclog"
	"github.com/krb5-exporter/krb5-exporter/kdclog/talkers"
)

// Config wires the page to the daemon. Nil views are shown as not
// configured.
type Config struct {
	Version string
	// RoutePrefix is where the page is served ("/" by default); its links
	// are relative to it, as exporter-toolkit's landing page's are, so it
	// works behind a reverse proxy under a path.
	RoutePrefix string
	MetricsPath string
	Probes      func() []probestatus.Target
	Logs        func() []kdclog.SourceStatus
	Host        func() collector.Status
	// Talkers is the top talkers' last complete window (nil: off).
	Talkers func() *talkers.Snapshot
	// Capacity is the last capacity estimate (nil: off).
	Capacity func() capacity.Status
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// LogsPath is the page of one target's last probes' debug logs, and
// RunbookPath the alerts' runbook, relative to the route prefix.
const (
	LogsPath    = "probe-logs"
	RunbookPath = "runbook"
)

var (
	//go:embed status.css
	css string
	//go:embed status.html
	pageHTML string

	page = template.Must(template.New("status").Funcs(template.FuncMap{
		"ago": ago, "ms": ms, "bytes": byteSize, "join": joinInts, "clock": clock, "anchor": strings.ToLower, "pct": func(f float64) float64 { return 100 * f },
	}).Parse(pageHTML))

	// csp allows the page's one <style> by its hash and nothing else:
	// an injected script, style, image or form goes nowhere.
	csp = "default-src 'none'; style-src 'sha256-" + hash(css) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(h[:])
}

// Handler serves the page at the route prefix and the probe logs beside
// it; any other path is not found (as exporter-toolkit's page does).
type Handler struct {
	cfg    Config
	prefix string
}

// New returns the page's handler.
func New(cfg Config) *Handler {
	p := cfg.RoutePrefix
	if p == "" {
		p = "/"
	} else if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg, prefix: p}
}

// Prefix is the path the page answers on.
func (h *Handler) Prefix() string { return h.prefix }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var v view
	switch r.URL.Path {
	case h.prefix:
		v = h.overview()
	case h.prefix + RunbookPath:
		v = view{Runbook: runbookHTML()}
	case h.prefix + LogsPath:
		name := r.URL.Query().Get("target")
		v = h.logs(name)
		if v.Target == nil {
			w.Header().Set("Content-Security-Policy", csp)
			http.Error(w, "no such probe target", http.StatusNotFound)
			return
		}
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", csp)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	v.CSS = template.CSS(css)
	v.Version = h.cfg.Version
	v.Metrics = strings.TrimPrefix(h.cfg.MetricsPath, "/")
	v.LogsPath = LogsPath
	v.RunbookPath = RunbookPath
	_ = page.Execute(w, &v) // a write error is a client gone
}

// view is what the template renders.
type view struct {
	CSS     template.CSS
	Version string
	Metrics string
	Now     time.Time
	Refresh int // seconds; 0: no refresh

	OK       bool
	Findings []Finding
	State    string // the header's colour: ok, warning, critical

	ProbesOff bool
	Probes    []probeRow
	LogsOff   bool
	Logs      []kdclog.SourceStatus
	HostOff   bool
	Host      collector.Status

	CapacityOff bool
	Capacity    capacity.Status

	TalkersOff  bool
	Talkers     []talkerRow
	TalkersEnd  time.Time // the window's end; zero before the first ended
	TalkersWin  time.Duration
	TalkersRate float64 // the window's requests per second
	// TalkersStale: the last window ended more than a window ago (no
	// request logged since): its rates are not today's.
	TalkersStale bool

	Target      *probestatus.Target // the logs page
	LogsPath    string
	RunbookPath string
	Runbook     template.HTML // the runbook page
}

// talkerRow is one kind of top talkers: its top three, as rates.
type talkerRow struct {
	Title string
	Top   []talkerRate
}

// talkerRate is a name's requests per second in the window and its share
// of all the window's requests.
type talkerRate struct {
	Name  string
	Rate  float64
	Share float64 // 0..1; zero for retransmits and failures (no total)
}

// talkersShown is how many names of each kind the page shows.
const talkersShown = 3

type probeRow struct {
	probestatus.Target
	Last *probestatus.Record
}

// behindWarn is the lag from which a log source counts as a problem.
const behindWarn = 1 << 20

// hostMaxAge: a collection older than this is run again for the page.
const hostMaxAge = 10 * time.Second

func (h *Handler) overview() view {
	v := view{Now: h.cfg.Now(), Refresh: 10}
	var probes []probestatus.Target
	if h.cfg.Probes == nil {
		v.ProbesOff = true
	} else {
		probes = h.cfg.Probes()
		for _, t := range probes {
			row := probeRow{Target: t}
			if len(t.Recent) > 0 {
				row.Last = &t.Recent[0]
			}
			v.Probes = append(v.Probes, row)
		}
	}
	if h.cfg.Logs == nil {
		v.LogsOff = true
	} else {
		v.Logs = h.cfg.Logs()
	}
	var host *collector.Status
	if h.cfg.Host == nil {
		v.HostOff = true
	} else {
		v.Host = h.cfg.Host()
		host = &v.Host
	}
	if h.cfg.Capacity == nil {
		v.CapacityOff = true
	} else {
		v.Capacity = h.cfg.Capacity()
	}
	var snap *talkers.Snapshot
	if h.cfg.Talkers != nil {
		snap = h.cfg.Talkers()
	}
	if snap == nil {
		v.TalkersOff = true
	} else if !snap.Start.IsZero() {
		v.TalkersEnd, v.TalkersWin = snap.Start.Add(snap.Window), snap.Window
		v.TalkersStale = !current(v.Now, snap)
		secs := snap.Window.Seconds()
		total := float64(snap.Requests[0] + snap.Requests[1])
		v.TalkersRate = total / secs
		for _, k := range talkers.Kinds {
			row := talkerRow{Title: k.Title}
			for _, tk := range snap.Merged(talkersShown, k.Lists...) {
				r := talkerRate{Name: tk.Name, Rate: float64(tk.Count) / secs}
				if strings.HasPrefix(k.Title, "Requests") && total > 0 { // shares of all requests
					r.Share = float64(tk.Count) / total
				}
				row.Top = append(row.Top, r)
			}
			v.Talkers = append(v.Talkers, row)
		}
	} else {
		v.TalkersWin = snap.Window
	}
	v.Findings = findings(v.Now, probes, v.Logs, host, snap)
	v.OK = len(v.Findings) == 0
	switch {
	case v.OK:
		v.State = "ok"
	case v.Findings[0].Severity == Critical:
		v.State = "critical"
	default:
		v.State = "warning"
	}
	return v
}

func (h *Handler) logs(name string) view {
	v := view{Now: h.cfg.Now(), State: "ok"}
	if h.cfg.Probes == nil {
		return v
	}
	for _, t := range h.cfg.Probes() {
		if t.Name == name {
			v.Target = &t
			break
		}
	}
	return v
}
