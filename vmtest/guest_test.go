package vmtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// guest drives the VM through scripts/vm.sh, in a state directory of the
// test's own (KRB5X_VM_DIR) so that a VM booted by hand from the same
// checkout is never touched.
type guest struct {
	t     *testing.T
	repo  string
	state string
	image string // the image's directory in the cache (scripts/vm.sh build)
}

func (g *guest) vm(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(g.repo, "scripts", "vm.sh"), args...)
	cmd.Env = append(os.Environ(), "KRB5X_VM_DIR="+g.state)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// The shared ssh connection vm.sh leaves behind has its output on
	// /dev/null; never wait long for pipes anyway.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.String(), err
}

// sh runs a bash script in the guest as root and returns its output
// (stdout and stderr).
func (g *guest) sh(script string) (string, error) {
	return g.vm("exec", "bash", "-c", script)
}

// must is sh that fails the test when the script fails.
func (g *guest) must(script string) string {
	g.t.Helper()
	out, err := g.sh(script)
	if err != nil {
		g.t.Fatalf("in the guest: %s: %v\n%s", script, err, out)
	}
	return out
}

// put writes data to a file in the guest (truncated in place, so its
// owner and mode stay, as an editor keeps them).
func (g *guest) put(path string, data []byte) {
	g.t.Helper()
	f := filepath.Join(g.t.TempDir(), "put")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		g.t.Fatal(err)
	}
	if out, err := g.vm("put", f, path); err != nil {
		g.t.Fatalf("copying to the guest's %s: %v\n%s", path, err, out)
	}
}

func (g *guest) get(path string) []byte {
	g.t.Helper()
	f := filepath.Join(g.t.TempDir(), "get")
	if out, err := g.vm("get", path, f); err != nil {
		g.t.Fatalf("copying the guest's %s: %v\n%s", path, err, out)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		g.t.Fatal(err)
	}
	return b
}

// scrape is the exporter's /metrics as the guest sees it; nil while it
// does not answer.
func (g *guest) scrape() map[string]*dto.MetricFamily {
	out, err := g.vm("exec", "curl", "-sf", "--max-time", "20", "http://localhost:10088/metrics")
	if err != nil {
		return nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(out))
	if err != nil {
		g.t.Logf("unparsable /metrics: %v", err)
		return nil
	}
	return mfs
}

// value returns the value of the series of name with exactly the given
// label pairs among its labels (a histogram's sample count), summed over
// the series that match.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
	var sum float64
	found := false
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, labels...) {
			continue
		}
		found = true
		switch {
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		default:
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return sum, found
}

func hasLabels(m *dto.Metric, labels ...string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		ok := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// series lists every series of name as "label=value,..." → value.
func series(mfs map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mfs[name].GetMetric() {
		var ls []string
		for _, lp := range m.GetLabel() {
			ls = append(ls, lp.GetName()+"="+lp.GetValue())
		}
		v, _ := value(map[string]*dto.MetricFamily{name: {Metric: []*dto.Metric{m}}}, name)
		out[strings.Join(ls, ",")] = v
	}
	return out
}

// counts are requests by "request/status" (as/ISSUE, tgs/ISSUE, ...).
type counts map[string]int

func (c counts) minus(base counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - base[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range base {
		if _, ok := c[k]; !ok {
			out[k] = -v
		}
	}
	return out
}

func (c counts) String() string {
	var ks []string
	for k, v := range c {
		if v != 0 {
			ks = append(ks, fmt.Sprintf("%s=%d", k, v))
		}
	}
	sort.Strings(ks)
	return "{" + strings.Join(ks, " ") + "}"
}

func (c counts) equal(o counts) bool { return c.minus(o).String() == "{}" }

// A KDC request line as MIT krb5kdc logs it (kdc/kdc_log.c):
// "AS_REQ (4 etypes {...}) 10.0.2.15: ISSUE: authtime ..., alice@R for krbtgt/R@R"
var (
	reRequest = regexp.MustCompile(`^(AS|TGS)_REQ \(.*\}\) \S+: ([A-Z_0-9]+)`)
	reClient  = regexp.MustCompile(`(\S+) for \S`)
)

// journalCounts counts the KDC's request lines in `journalctl -u
// krb5-kdc` (every boot the journal holds), the guest's own record of what
// the KDC answered. Requests of the principal skip (the probe's) are left
// out when skip is not empty.
func (g *guest) journalCounts(skip string) counts {
	g.t.Helper()
	return requestCounts(g.must("journalctl -u krb5-kdc -o cat --no-pager"), skip)
}

// fileCounts is the same from the KDC's own log file (FILE: in
// [logging]), whose lines start with the date, the host and
// "krb5kdc[PID](info): ".
func (g *guest) fileCounts(path, skip string) counts {
	g.t.Helper()
	return requestCounts(reFilePrefix.ReplaceAllString(g.must("cat "+path), ""), skip)
}

var reFilePrefix = regexp.MustCompile(`(?m)^.*? krb5kdc\[\d+\]\(\w+\): `)

func requestCounts(out, skip string) counts {
	c := counts{}
	for _, line := range strings.Split(out, "\n") {
		m := reRequest.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if cl := reClient.FindStringSubmatch(line); skip != "" && cl != nil && cl[1] == skip {
			continue
		}
		c[strings.ToLower(m[1])+"/"+m[2]]++
	}
	return c
}

// metricCounts is krb5_kdc_requests_total by request and status.
func metricCounts(mfs map[string]*dto.MetricFamily) counts {
	c := counts{}
	for _, m := range mfs["krb5_kdc_requests_total"].GetMetric() {
		var req, st string
		for _, lp := range m.GetLabel() {
			switch lp.GetName() {
			case "request":
				req = lp.GetValue()
			case "status":
				st = lp.GetValue()
			}
		}
		if v := int(m.GetCounter().GetValue()); v != 0 {
			c[req+"/"+st] += v
		}
	}
	return c
}

// procStart is the start time of a guest process in Unix seconds, from
// /proc/PID/stat (field 22, clock ticks since boot) and /proc/stat's btime,
// as the kernel gives them.
func (g *guest) procStart(pid int) float64 {
	g.t.Helper()
	out := g.must(fmt.Sprintf("cat /proc/%d/stat; grep ^btime /proc/stat; getconf CLK_TCK", pid))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		g.t.Fatalf("unexpected /proc output: %q", out)
	}
	stat := lines[0][strings.LastIndexByte(lines[0], ')')+2:]
	f := strings.Fields(stat)
	ticks, _ := strconv.ParseFloat(f[22-3], 64)
	btime, _ := strconv.ParseFloat(strings.Fields(lines[1])[1], 64)
	hz, _ := strconv.ParseFloat(strings.TrimSpace(lines[2]), 64)
	return btime + ticks/hz
}

func (g *guest) mainPID(unit string) int {
	g.t.Helper()
	out := g.must("systemctl show -p MainPID --value " + unit)
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid == 0 {
		g.t.Fatalf("%s has no main pid (%q): is it running?\n%s", unit, out, g.status(unit))
	}
	return pid
}

func (g *guest) status(unit string) string {
	out, _ := g.sh("systemctl status --no-pager -n 20 " + unit)
	return out
}

// eventually polls cond every 2 s until it returns "" (held) or limit
// passes; then it fails the test with cond's last explanation.
func eventually(t *testing.T, limit time.Duration, what string, cond func() string) bool {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		why := cond()
		if why == "" {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: still not so after %v: %s", what, limit, why)
			return false
		}
		time.Sleep(2 * time.Second)
	}
}
