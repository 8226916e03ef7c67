package top

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"slices"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
)

// Daemon reads the probe series, the top talkers and the kdcservice
// collector's series (where it runs) of a running krb5-exporter daemon
// from its /metrics: the daemon probes every module's targets at their
// interval already, so top shows its results instead of sending logins of
// its own to the KDC it is watching (they would show in the very rates on
// screen).
type Daemon struct {
	url    string
	shown  string // url without a password, for the screen and errors
	client *http.Client

	mu  sync.Mutex
	err error
}

// NewDaemon reads url (http://HOST:PORT/metrics) with the timeout given.
func NewDaemon(url string, timeout time.Duration) *Daemon {
	shown := "the daemon's URL"
	if u, err := neturl.Parse(url); err == nil {
		shown = u.Redacted()
	}
	return &Daemon{url: url, shown: shown, client: &http.Client{Timeout: timeout}}
}

// URL is the address read, its password (if any) masked.
func (d *Daemon) URL() string { return d.shown }

// Err is the error of the last read, nil when it worked.
func (d *Daemon) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// daemonFamilies are what top takes from the daemon (its probes, its top
// talkers' last complete window): the rest it reads itself, from the logs'
// end and /proc. The kdcservice collector's series too: its eBPF programs
// are attached by the daemon, once; top attaching its own would trace
// every request twice.
var daemonFamilies = []string{mProbeSuccess, mProbeDuration, mProbeTotal, mTopRequests, mTopFailures, mTopRetransmits, mTopWindow,
	mServiceSeconds, mServiceSplit, mQueueSeconds, mWorkerService, mWorkerServed, mTracingUp, mTracingErrors, mCapacity}

// Gather is a prometheus.Gatherer: the daemon's daemonFamilies. A daemon
// that cannot be read gives none (Err says why), so the rest of the view
// goes on.
func (d *Daemon) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := d.read()
	d.mu.Lock()
	d.err = err
	d.mu.Unlock()
	if err != nil {
		return nil, nil
	}
	return mfs, nil
}

func (d *Daemon) read() ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.client.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.shown, errors.Unwrap(err))
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", d.shown, resp.Status)
	}
	p := expfmt.NewTextParser(pmodel.UTF8Validation)
	all, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.shown, err)
	}
	var out []*dto.MetricFamily
	for name, mf := range all {
		if slices.Contains(daemonFamilies, name) {
			out = append(out, mf)
		}
	}
	return out, nil
}
