package prober

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

func probeServer(t *testing.T, cfg *config.Config) *httptest.Server {
	srv, _ := limitedProbeServer(t, cfg, 0)
	return srv
}

// limitedProbeServer serves /probe with at most maxInFlight probes at once
// and returns the manager's registry too.
func limitedProbeServer(t *testing.T, cfg *config.Config, maxInFlight int) (*httptest.Server, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	m := NewManager(testutil.Logger(t), reg)
	t.Cleanup(m.Stop)
	srv := httptest.NewServer(m.Handler(func() *config.Config { return cfg }, maxInFlight))
	t.Cleanup(srv.Close)
	return srv, reg
}

func get(t *testing.T, u string, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func probeURL(srv *httptest.Server, params ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	return srv.URL + "/probe?" + q.Encode()
}

func TestProbeHandler(t *testing.T) {
	r := upRealm(t, realm.Options{})
	cfg := probeConfig(r)
	missing := cfg.Modules["default"]
	missing.Keytab = filepath.Join(t.TempDir(), "missing.keytab")
	cfg.Modules["nokeytab"] = missing
	srv, reg := limitedProbeServer(t, cfg, 0)

	for _, module := range []string{"", "default", "tcp"} {
		u := probeURL(srv, "target", r.KDCAddr, "module", module)
		want := `
# HELP probe_krb5_etype Encryption type number per exchange and part (reply, ticket, session).
# TYPE probe_krb5_etype gauge
probe_krb5_etype{exchange="as",part="reply"} 20
probe_krb5_etype{exchange="as",part="session"} 20
probe_krb5_etype{exchange="as",part="ticket"} 20
probe_krb5_etype{exchange="tgs",part="reply"} 20
probe_krb5_etype{exchange="tgs",part="session"} 20
probe_krb5_etype{exchange="tgs",part="ticket"} 20
# HELP probe_krb5_exchange_success Whether the exchange succeeded.
# TYPE probe_krb5_exchange_success gauge
probe_krb5_exchange_success{exchange="as"} 1
probe_krb5_exchange_success{exchange="tgs"} 1
# HELP probe_krb5_result Always 1; result is the exchange's outcome: success or the error class.
# TYPE probe_krb5_result gauge
probe_krb5_result{exchange="as",result="success"} 1
probe_krb5_result{exchange="tgs",result="success"} 1
# HELP probe_krb5_udp_retransmits UDP requests sent again during the probe.
# TYPE probe_krb5_udp_retransmits gauge
probe_krb5_udp_retransmits 0
# HELP probe_success Whether the probe succeeded: the login and, when the module names a service, the service ticket (for a service of another realm: the cross-realm TGT and the service ticket from that realm's KDC).
# TYPE probe_success gauge
probe_success 1
`
		if err := promtest.ScrapeAndCompare(u, strings.NewReader(want), "probe_success", "probe_krb5_exchange_success",
			"probe_krb5_result", "probe_krb5_etype", "probe_krb5_udp_retransmits"); err != nil {
			t.Errorf("module %q: %v", module, err)
		}
		_, body := get(t, u, nil)
		for _, m := range []string{"probe_duration_seconds ", `probe_krb5_exchange_duration_seconds{exchange="as"}`,
			`probe_krb5_as_phase_duration_seconds{phase="preauth_required"}`, `probe_krb5_as_phase_duration_seconds{phase="spake_challenge"}`,
			`probe_krb5_as_phase_duration_seconds{phase="as_rep"}`, `probe_krb5_preauth_method{method="spake"} 1`,
			"probe_krb5_clock_offset_seconds "} {
			if !strings.Contains(body, m) {
				t.Errorf("module %q: no %s in\n%s", module, m, body)
			}
		}
	}

	// A module lists the KDCs /probe may use it against: none (closed by
	// default), or others than the target: 403, and nothing is sent.
	fake, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	closed := cfg.Modules["default"]
	closed.AllowedKDCs = nil
	cfg.Modules["closed"] = closed
	for _, tc := range []struct{ target, module string }{
		{r.KDCAddr, "closed"},
		{fake.LocalAddr().String(), "default"},
		{fake.LocalAddr().String(), "closed"},
	} {
		code, body := get(t, probeURL(srv, "target", tc.target, "module", tc.module, "debug", "true"), nil)
		if code != http.StatusForbidden || !strings.Contains(body, "allowed_kdcs") || strings.Contains(body, "probe_success") {
			t.Errorf("module %s against %s: %d %q, want 403", tc.module, tc.target, code, body)
		}
	}
	// Loopback delivers at send time: anything sent would be queued now.
	fake.SetReadDeadline(time.Now())
	if n, _, err := fake.ReadFrom(make([]byte, 4096)); err == nil {
		t.Errorf("a refused probe sent %d bytes to the target", n)
	}
	if n := refusedCount(t, reg, RefusedNotAllowed); n != 3 {
		t.Errorf("target_not_allowed counted %v times, want 3", n)
	}

	// debug=true returns the probe's log with the metrics, and no secret.
	code, body := get(t, probeURL(srv, "target", r.KDCAddr, "module", "default", "debug", "true"), nil)
	if code != 200 || !strings.Contains(body, "Logs for the probe:") || !strings.Contains(body, "login succeeded") ||
		!strings.Contains(body, "msg=\"round trip\" phase=preauth_required") || !strings.Contains(body, "probe_success 1") {
		t.Errorf("debug output (%d):\n%s", code, body)
	}
	if strings.Contains(body, r.ProbeKeytab) {
		t.Error("debug output shows the keytab path")
	}

	// A module whose keytab is missing: the probe runs and says why, without
	// naming the keytab (issue 10 item 8).
	code, body = get(t, probeURL(srv, "target", r.KDCAddr, "module", "nokeytab"), nil)
	if code != 200 || !strings.Contains(body, "probe_success 0") || !strings.Contains(body, `probe_krb5_result{exchange="as",result="keytab"} 1`) {
		t.Errorf("missing keytab (%d):\n%s", code, body)
	}
	_, body = get(t, probeURL(srv, "target", r.KDCAddr, "module", "nokeytab", "debug", "true"), nil)
	if !strings.Contains(body, "cannot open keytab: no such file or directory") || strings.Contains(body, "missing.keytab") {
		t.Errorf("missing keytab, debug output must say why without the path:\n%s", body)
	}

	// A service the KDC does not know.
	unknownSvc := cfg.Modules["default"]
	unknownSvc.Service = "HTTP/nosuch." + r.Domain
	cfg.Modules["nosvc"] = unknownSvc
	_, body = get(t, probeURL(srv, "target", r.KDCAddr, "module", "nosvc"), nil)
	if !strings.Contains(body, "probe_success 0") || !strings.Contains(body, `probe_krb5_result{exchange="tgs",result="KDC_ERR_S_PRINCIPAL_UNKNOWN"} 1`) ||
		!strings.Contains(body, `probe_krb5_exchange_success{exchange="as"} 1`) {
		t.Errorf("unknown service:\n%s", body)
	}
}

func TestProbeHandlerBadRequests(t *testing.T) {
	cfg := &config.Config{Modules: map[string]config.ProbeModule{"default": {Realm: "PERF.TEST", Client: "p", Keytab: "/nonexistent"}}}
	srv := probeServer(t, cfg)
	for _, tc := range []struct {
		url, header, want string
	}{
		{probeURL(srv, "module", "default"), "", "target parameter is missing"},
		{probeURL(srv, "target", "127.0.0.1:88", "module", "nosuch"), "", `unknown module "nosuch"`},
		{probeURL(srv, "target", "a b:88"), "", "invalid target"},
		{probeURL(srv, "target", "127.0.0.1:88"), "soon", "invalid X-Prometheus-Scrape-Timeout-Seconds"},
		{probeURL(srv, "target", "127.0.0.1:88"), "NaN", "invalid X-Prometheus-Scrape-Timeout-Seconds"},
		{probeURL(srv, "target", "127.0.0.1:88"), "Inf", "invalid X-Prometheus-Scrape-Timeout-Seconds"},
		{probeURL(srv, "target", "127.0.0.1:88"), "-Inf", "invalid X-Prometheus-Scrape-Timeout-Seconds"},
		{probeURL(srv, "target", "127.0.0.1:88"), "1e308", "invalid X-Prometheus-Scrape-Timeout-Seconds"},
		{probeURL(srv, "target", "127.0.0.1:88"), "1e-300", "invalid X-Prometheus-Scrape-Timeout-Seconds"},
		{probeURL(srv, "target", "127.0.0.1:88"), "0", "invalid X-Prometheus-Scrape-Timeout-Seconds"},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("X-Prometheus-Scrape-Timeout-Seconds", tc.header)
		}
		code, body := get(t, tc.url, h)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want 400 with %q", tc.url, code, body, tc.want)
		}
	}
}

// The scrape timeout bounds the probe even when the module allows more.
func TestProbeHandlerScrapeTimeout(t *testing.T) {
	kt := filepath.Join(t.TempDir(), "k.keytab")
	testutil.WriteKeytab(t, kt, "probe@PERF.TEST", "correct-horse-battery-staple")
	cfg := &config.Config{Modules: map[string]config.ProbeModule{
		"default": {Realm: "PERF.TEST", Client: "probe", Keytab: kt, Timeout: time.Hour, Service: "HTTP/x", AllowedKDCs: []string{"127.0.0.1"}}}}
	srv := probeServer(t, cfg)
	h := http.Header{}
	h.Set("X-Prometheus-Scrape-Timeout-Seconds", "1.5")
	start := time.Now()
	code, body := get(t, probeURL(srv, "target", testutil.BlackHole(t)), h)
	if code != 200 || !strings.Contains(body, "probe_success 0") || !strings.Contains(body, `probe_krb5_result{exchange="as",result="timeout"} 1`) {
		t.Errorf("%d:\n%s", code, body)
	}
	// Generous bound: the probe ended near the scrape's deadline, not after the module's hour.
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("probe took %v with a 1.5s scrape timeout", d)
	}
	if !strings.Contains(body, `probe_krb5_result{exchange="tgs",result="no_tgt"} 1`) {
		t.Errorf("TGS without a TGT:\n%s", body)
	}
}

// refusedCount reads krb5_probe_http_refused_total{reason} from reg.
func refusedCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "krb5_probe_http_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no krb5_probe_http_refused_total{reason=%q}", reason)
	return 0
}

// At most --web.max-probe-requests probes run at once: one more is answered
// 503 at once and counted; a slot freed is usable again.
func TestProbeHandlerLimit(t *testing.T) {
	kt := filepath.Join(t.TempDir(), "k.keytab")
	testutil.WriteKeytab(t, kt, "probe@PERF.TEST", "correct-horse-battery-staple")
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cfg := &config.Config{Modules: map[string]config.ProbeModule{
		"default": {Realm: "PERF.TEST", Client: "probe", Keytab: kt, Timeout: time.Minute, AllowedKDCs: []string{"127.0.0.1"}}}}
	const limit = 2
	srv, reg := limitedProbeServer(t, cfg, limit)
	u := probeURL(srv, "target", silent.LocalAddr().String())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, limit)
	for i := 0; i < limit; i++ {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	// Both probes are running once the silent KDC has their AS-REQs.
	silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := 0; i < limit; i++ {
		if _, _, err := silent.ReadFrom(make([]byte, 4096)); err != nil {
			t.Fatalf("probe %d never reached the KDC: %v", i, err)
		}
	}
	code, body := get(t, u, nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "--web.max-probe-requests") {
		t.Errorf("probe %d of %d: %d %q, want 503", limit+1, limit, code, body)
	}
	if n := refusedCount(t, reg, RefusedBusy); n != 1 {
		t.Errorf("too_many_requests counted %v times, want 1", n)
	}
	cancel()
	for i := 0; i < limit; i++ {
		<-done
	}
	// The slots free up once the handlers see the cancellation: a refused
	// target is then refused for what it is, not for the limit.
	testutil.Eventually(t, 20*time.Second, "a free /probe slot", func() bool {
		code, _ := get(t, probeURL(srv, "target", "192.0.2.1:88"), nil)
		return code == http.StatusForbidden
	})
}
