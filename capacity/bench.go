package capacity

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
)

// Series of the measured ceiling.
const (
	MetricBenchCapacity  = "krb5_kdc_bench_capacity_requests_per_second"
	MetricBenchTimestamp = "krb5_kdc_bench_report_timestamp_seconds"
	MetricBenchInfo      = "krb5_kdc_bench_report_info"
	MetricBenchValid     = "krb5_kdc_bench_report_valid"
	MetricBenchASPer     = "krb5_kdc_bench_as_requests_per_login"
)

const (
	helpBenchCapacity  = "The ceiling the latest bench run in the results directory measured, in KDC requests per second: as (logins per second times the AS requests of a login) and tgs (tickets per second)."
	helpBenchTimestamp = "Unix time the latest bench run in the results directory finished."
	helpBenchInfo      = "1, with the latest bench run's settings that decide its numbers: krb5 version, workers, database, last_success, the generator's pre-authentication, its verdict."
	helpBenchValid     = "1 if the latest bench run's report.json in the results directory passed validation (as bench compare validates it), 0 if it did not: its ceilings are then not exported."
	helpBenchASPer     = "AS requests per login in the latest bench run: counted by its kdcservice timing, else 3 for SPAKE and 2 for encrypted timestamp."
)

// DescribeBench sends the descriptors of the measured ceiling's series.
func DescribeBench(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc(MetricBenchCapacity, helpBenchCapacity, []string{"request"}, nil)
	ch <- prometheus.NewDesc(MetricBenchTimestamp, helpBenchTimestamp, nil, nil)
	ch <- prometheus.NewDesc(MetricBenchInfo, helpBenchInfo, benchInfoLabels, nil)
	ch <- prometheus.NewDesc(MetricBenchValid, helpBenchValid, nil, nil)
	ch <- prometheus.NewDesc(MetricBenchASPer, helpBenchASPer, nil, nil)
}

var benchInfoLabels = []string{"krb5_version", "workers", "database", "disable_last_success", "preauth", "verdict"}

// maxLabel bounds a label value taken from a report.
const maxLabel = 64

// Bench reads the latest run of a bench results directory (bench's
// results/<timestamp>/report.json): again when the newest run changes.
type Bench struct {
	dir    string
	logger log.Logger

	mu      sync.Mutex
	path    string // the run read last
	modTime time.Time
	fams    []*dto.MetricFamily
	lastErr string
}

// NewBench reads dir's runs; logger hears of a report that does not
// validate, once per report.
func NewBench(dir string, logger log.Logger) *Bench {
	return &Bench{dir: dir, logger: logger}
}

// latest is the newest run's report.json: the run directories are named
// by their start time, so the greatest name holding a report.
func (b *Bench) latest() (string, os.FileInfo, error) {
	ents, err := os.ReadDir(b.dir)
	if err != nil {
		return "", nil, err
	}
	for i := len(ents) - 1; i >= 0; i-- {
		if !ents[i].IsDir() {
			continue
		}
		p := filepath.Join(b.dir, ents[i].Name(), "report.json")
		if fi, err := os.Stat(p); err == nil {
			return p, fi, nil
		}
	}
	return "", nil, fs.ErrNotExist
}

// families are the latest run's series (none without a run).
func (b *Bench) families() []*dto.MetricFamily {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, fi, err := b.latest()
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			b.fail(err)
		}
		b.path, b.fams = "", nil
		return nil
	}
	if p == b.path && fi.ModTime().Equal(b.modTime) {
		return b.fams
	}
	b.path, b.modTime = p, fi.ModTime()
	rep, err := report.ReadSummary(p)
	if err != nil {
		b.fail(err)
		b.fams = []*dto.MetricFamily{gaugeFamily(MetricBenchValid, helpBenchValid, gaugeMetric(0))}
		return b.fams
	}
	b.lastErr = ""
	b.fams = benchFamilies(rep)
	return b.fams
}

// fail logs err once until another error or a success.
func (b *Bench) fail(err error) {
	if err.Error() == b.lastErr {
		return
	}
	b.lastErr = err.Error()
	level.Warn(b.logger).Log("msg", "cannot use the latest bench run: its measured ceilings are not exported", "dir", b.dir, "err", err)
}

func benchFamilies(rep *report.Report) []*dto.MetricFamily {
	capF := &dto.MetricFamily{Name: proto.String(MetricBenchCapacity), Help: proto.String(helpBenchCapacity), Type: dto.MetricType_GAUGE.Enum()}
	perLogin := asPerLogin(rep)
	if rep.AS != nil && rep.AS.Rate > 0 && perLogin > 0 {
		capF.Metric = append(capF.Metric, gaugeMetric(rep.AS.Rate*perLogin, "request", "as"))
	}
	if rep.TGS != nil && rep.TGS.Rate > 0 {
		capF.Metric = append(capF.Metric, gaugeMetric(rep.TGS.Rate, "request", "tgs"))
	}
	set := rep.System.Settings
	info := []string{rep.Machine.KRB5Version, set["workers"], set["database"], set["disable_last_success"], rep.System.Preauth, rep.Verdict}
	var pairs []string
	for i, n := range benchInfoLabels {
		pairs = append(pairs, n, clip(info[i]))
	}
	out := []*dto.MetricFamily{
		gaugeFamily(MetricBenchValid, helpBenchValid, gaugeMetric(1)),
		gaugeFamily(MetricBenchTimestamp, helpBenchTimestamp, gaugeMetric(float64(rep.Finished.UnixNano())/1e9)),
		gaugeFamily(MetricBenchInfo, helpBenchInfo, gaugeMetric(1, pairs...)),
	}
	if perLogin > 0 {
		out = append(out, gaugeFamily(MetricBenchASPer, helpBenchASPer, gaugeMetric(perLogin)))
	}
	if len(capF.Metric) > 0 {
		out = append(out, capF)
	}
	return out
}

// asPerLogin is how many AS requests a login of the run's as load made
// (ASPerLogin).
func asPerLogin(rep *report.Report) float64 {
	if rep.AS == nil {
		return 0
	}
	return ASPerLogin(rep.AS, rep.System.Preauth)
}

// ASPerLogin is how many AS requests a login of load l made: the KDC's
// own count where the run timed it, else what its pre-authentication
// (report.SystemInfo.Preauth) takes (SPAKE: the first request, the
// challenge's, the answer's); 0 when neither says.
func ASPerLogin(l *report.Load, preauth string) float64 {
	if k := l.KDCService; k != nil && k.Requests > 0 && l.Requests > 0 {
		return float64(k.Requests) / float64(l.Requests)
	}
	switch {
	case strings.HasPrefix(preauth, "spake"):
		return 3
	case strings.HasPrefix(preauth, "encrypted_timestamp"):
		return 2
	}
	return 0
}

func clip(s string) string {
	if len(s) > maxLabel {
		return strings.ToValidUTF8(s[:maxLabel], "")
	}
	return s
}

func gaugeFamily(name, help string, ms ...*dto.Metric) *dto.MetricFamily {
	f := family(name, help)
	f.Metric = ms
	return f
}

// benchValues picks the ceilings by request and the finish time out of
// the families (for Status).
func benchValues(fams []*dto.MetricFamily) (map[string]float64, time.Time) {
	m := map[string]float64{}
	var at time.Time
	for _, f := range fams {
		switch f.GetName() {
		case MetricBenchCapacity:
			for _, x := range f.GetMetric() {
				m[label(x, "request")] = x.GetGauge().GetValue()
			}
		case MetricBenchTimestamp:
			for _, x := range f.GetMetric() {
				sec := x.GetGauge().GetValue()
				at = time.Unix(0, int64(sec*1e9))
			}
		}
	}
	return m, at
}
