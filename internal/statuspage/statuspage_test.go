package statuspage

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/capacity"
	"github.com/krb5-exporter/krb5-exporter/collector"
	"github.com/krb5-exporter/krb5-exporter/internal/probestatus"
	"github.com/krb5-exporter/krb5-exporter/kdclog"
)

const hostile = `<script>document.title="pwned"</script><img src=x onerror=alert(1)>"'&`

func fixture() Config {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rec := probestatus.Record{Start: now.Add(-3 * time.Second), Duration: 12 * time.Millisecond, AS: "KDC_ERR_C_PRINCIPAL_UNKNOWN",
		TGS: "no_tgt", Err: hostile, Log: "level=error msg=" + hostile + "\n"}
	return Config{
		Version:     "1.2.3",
		MetricsPath: "/metrics",
		Now:         func() time.Time { return now },
		Probes: func() []probestatus.Target {
			return []probestatus.Target{{Name: hostile, Address: "127.0.0.1:88", Module: "m&" + hostile, Interval: time.Second,
				Recent: []probestatus.Record{rec}}}
		},
		Logs: func() []kdclog.SourceStatus {
			return []kdclog.SourceStatus{{Path: "/var/log/" + hostile, Type: "kdc", Open: true, Offset: 4096, Lines: 7}}
		},
		Host: func() collector.Status {
			return collector.Status{At: now, Enabled: []string{"process"},
				Programs: []collector.ProgramStatus{{Name: "krb5kdc", Running: true, PID: 42, Workers: []int{43, 44}}},
				Failing:  []collector.CollectorError{{Name: "kdcconf", Err: hostile}}}
		},
	}
}

func get(t *testing.T, h http.Handler, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// Every value the page prints comes out escaped: no tag of the hostile
// name, module, error, log path or log line reaches the HTML as a tag.
func TestHostileValuesEscaped(t *testing.T) {
	h := New(fixture())
	for _, path := range []string{"/", "/" + LogsPath + "?target=" + urlQuery(hostile)} {
		res, body := get(t, h, path)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, res.StatusCode, body)
		}
		for _, raw := range []string{"<script", "<img"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s: the page holds %q unescaped", path, raw)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;") {
			t.Errorf("%s: the hostile value is not shown (escaped)", path)
		}
	}
	_, body := get(t, h, "/")
	for _, want := range []string{"login KDC_ERR_C_PRINCIPAL_UNKNOWN", "KDC_ERR_C_PRINCIPAL_UNKNOWN", "43, 44", "4096 B", "kdcconf failing"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func urlQuery(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "#", "%23", " ", "%20", "<", "%3C", ">", "%3E", `"`, "%22", "'", "%27", "=", "%3D", "(", "%28", ")", "%29")
	return r.Replace(s)
}

// The Content-Security-Policy allows exactly the page's <style>: its hash
// is the hash of the style element's text as served.
func TestCSPAllowsTheStyleOnly(t *testing.T) {
	res, body := get(t, New(fixture()), "/")
	policy := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(policy, "default-src 'none'") || strings.Contains(policy, "unsafe-inline") || strings.Contains(policy, "script-src") {
		t.Errorf("policy %q: want default-src 'none', no script source, no unsafe-inline", policy)
	}
	m := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindAllStringSubmatch(body, -1)
	if len(m) != 1 {
		t.Fatalf("want one <style>, got %d", len(m))
	}
	sum := sha256.Sum256([]byte(m[0][1]))
	if want := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(policy, want) {
		t.Errorf("policy %q does not allow the served style (%s)", policy, want)
	}
	for _, ref := range []string{"<script", "<link", "<img", "<iframe", "@import", "url("} {
		if strings.Contains(body, ref) {
			t.Errorf("the page loads something: %q", ref)
		}
	}
}

// As exporter-toolkit's landing page: only the route prefix (and the logs
// page beside it) answer, and links are relative to the prefix.
func TestRoutePrefix(t *testing.T) {
	cfg := fixture()
	cfg.RoutePrefix = "/krb5"
	h := New(cfg)
	if res, _ := get(t, h, "/"); res.StatusCode != http.StatusNotFound {
		t.Errorf("/ under prefix /krb5/: %d, want 404", res.StatusCode)
	}
	if res, _ := get(t, h, "/krb5/nosuch"); res.StatusCode != http.StatusNotFound {
		t.Errorf("/krb5/nosuch: %d, want 404", res.StatusCode)
	}
	res, body := get(t, h, "/krb5/")
	if res.StatusCode != 200 || !strings.Contains(body, `href="metrics"`) || !strings.Contains(body, `href="probe-logs?target=`) {
		t.Errorf("/krb5/: %d, want relative links to metrics and the probe logs:\n%s", res.StatusCode, body)
	}
	if res, _ := get(t, h, "/krb5/"+LogsPath+"?target=nosuch"); res.StatusCode != http.StatusNotFound {
		t.Errorf("logs of an unknown target: %d, want 404", res.StatusCode)
	}
}

// A healthy KDC says so; views not wired say they are off.
func TestVerdictOK(t *testing.T) {
	cfg := fixture()
	cfg.Probes = func() []probestatus.Target {
		return []probestatus.Target{{Name: "kdc1", Recent: []probestatus.Record{{Success: true, AS: "success"}}}}
	}
	cfg.Host = func() collector.Status {
		return collector.Status{Programs: []collector.ProgramStatus{{Name: "krb5kdc", Running: true, PID: 1}}}
	}
	_, body := get(t, New(cfg), "/")
	if !strings.Contains(body, "The KDC is OK") {
		t.Errorf("healthy views: no OK verdict:\n%s", body)
	}
	_, body = get(t, New(Config{}), "/")
	for _, want := range []string{"Probes are not enabled", "log collector is not enabled", "host collectors are not enabled"} {
		if !strings.Contains(body, want) {
			t.Errorf("no views: the page lacks %q", want)
		}
	}
}

// TestKadmindProbesListed: kpasswd and kadmin targets are listed with
// their prober beside the module and kadmind's result in its own column;
// a failing one is a problem named by kadmind's result, not a login's.
func TestKadmindProbesListed(t *testing.T) {
	cfg := fixture()
	now := cfg.Now()
	cfg.Probes = func() []probestatus.Target {
		return []probestatus.Target{
			{Name: "kpw", Address: "127.0.0.1:464", Module: "kp", Prober: "kpasswd", Interval: time.Second,
				Recent: []probestatus.Record{{Start: now.Add(-time.Second), AS: "success", Kadmind: "timeout", Err: "kpasswd: timeout"}}},
			{Name: "adm", Address: "127.0.0.1:749", Module: "ka", Prober: "kadmin", Interval: time.Second,
				Recent: []probestatus.Record{{Start: now.Add(-time.Second), Success: true, Kadmind: "success"}}},
		}
	}
	_, body := get(t, New(cfg), "/")
	for _, want := range []string{"probe kpw: kadmind timeout", `ka <span class="muted">(kadmin)</span>`,
		`kp <span class="muted">(kpasswd)</span>`, "<th>kadmind</th>", "<td>timeout</td>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "probe adm:") {
		t.Error("the succeeding kadmin probe is listed as failing")
	}
}

// A trust's probe shows both cross-realm exchanges, and a broken trust is
// a problem named by its hop.
func TestCrossRealmRow(t *testing.T) {
	cfg := fixture()
	cfg.Probes = func() []probestatus.Target {
		return []probestatus.Target{{Name: "a-to-b", Recent: []probestatus.Record{{AS: "success", Referral: "success", Remote: "trust_key_mismatch"}}}}
	}
	_, body := get(t, New(cfg), "/")
	for _, want := range []string{"cross-realm: referral success, remote_tgs trust_key_mismatch",
		"probe a-to-b: service ticket of the trusted realm trust_key_mismatch"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
}

// TestHeadroomShown: the last capacity estimate's rows, with the load
// over the estimate as a percentage and the bench's ceiling beside it;
// a type without an estimate says why; no estimate yet says so.
func TestHeadroomShown(t *testing.T) {
	cfg := fixture()
	now := cfg.Now()
	cfg.Capacity = func() capacity.Status {
		return capacity.Status{At: now.Add(-5 * time.Second), Source: "proc", Workers: 1, Window: 5 * time.Minute,
			BenchAt: now.Add(-48 * time.Hour),
			Rows: []capacity.StatusRow{
				{Request: "as", Requests: 30000, Rate: 100, Capacity: 400, Bench: 1700},
				{Request: "tgs", Requests: 60, Rate: 0.2, Why: "too few requests"},
				{Request: "mix", Requests: 30060, Rate: 100.2, Capacity: 401},
			}}
	}
	_, body := get(t, New(cfg), "/")
	for _, want := range []string{`id="headroom"`, "100.0/s", "400/s", "25.0 %", "1700/s", "too few requests", "source proc"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	cfg.Capacity = func() capacity.Status { return capacity.Status{} }
	if _, body = get(t, New(cfg), "/"); !strings.Contains(body, "No estimate yet") {
		t.Error("no estimate: the page does not say so")
	}
	if _, body = get(t, New(Config{}), "/"); !strings.Contains(body, "capacity estimate is not enabled") {
		t.Error("off: the page does not say so")
	}
}
