package collector

import (
	"errors"
	"io/fs"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/logging"
)

// accessTracker records, per program and /proc file, whether the exporter
// could read it in this scrape. Running unprivileged (not root, no
// CAP_SYS_PTRACE) hides the daemons' fd targets and io: the metrics that
// need them are omitted, which this makes visible as a gauge and as one
// log line per program and file when it becomes unreadable (and one when
// it is readable again), not one per scrape.
type accessTracker struct {
	logger   log.Logger
	readable *prometheus.Desc
	denied   *logging.Changes   // unreadable at the last look: logged
	cur      map[accessKey]bool // this scrape: readable or not
	// logged holds the keys denied has as unreadable: a readable key
	// not among them has no change to note (no lock, no key string).
	logged map[accessKey]bool
}

type accessKey struct{ program, file string }

func (k accessKey) String() string { return k.program + " " + k.file }

func newAccessTracker(logger log.Logger) *accessTracker {
	return &accessTracker{
		logger: logger,
		readable: prometheus.NewDesc("krb5_exporter_proc_readable",
			"1 if the exporter could read this /proc file of every process of the running program in this scrape, 0 if permission was denied (the metrics that need it are omitted): fd (the count of open descriptors), fd_links (the sockets behind them), status, io, limits.",
			[]string{"program", "file"}, nil),
		denied: logging.NewChanges(nil),
		cur:    map[accessKey]bool{},
		logged: map[accessKey]bool{},
	}
}

// note records one read of file for program, the file rel of process p;
// err is the read's error.
// Only a permission error counts as unreadable: a process that exited
// meanwhile says nothing about access. consequence says in the log line
// what the exporter does without the file. It returns whether err was a
// permission error.
func (a *accessTracker) note(program, file string, p *kdcProc, rel string, err error, consequence string) bool {
	k := accessKey{program, file}
	denied := err != nil && errors.Is(err, fs.ErrPermission)
	if err != nil && !denied {
		return false
	}
	if ok, seen := a.cur[k]; !seen || ok {
		a.cur[k] = !denied
	}
	if denied {
		a.logged[k] = true
		if _, _, changed := a.denied.Note(k.String(), "denied"); changed {
			level.Warn(a.logger).Log("msg", "cannot read "+file+" of "+program+"; "+consequence+" (run the exporter as the daemon's user, or see docs/security.md)",
				"program", program, "pid", p.pid, "path", p.file(rel), "err", err)
		}
	}
	return denied
}

// collect logs the changes since the previous scrape, sends the gauges of
// this scrape and starts the next one. Programs not running this scrape
// send nothing and keep their state.
func (a *accessTracker) collect(ch chan<- prometheus.Metric) {
	for k, ok := range a.cur {
		if ok && a.logged[k] {
			delete(a.logged, k)
			if _, _, changed := a.denied.Note(k.String(), ""); changed {
				level.Info(a.logger).Log("msg", "can read "+k.file+" of "+k.program+" again", "program", k.program)
			}
		}
		ch <- gauge(a.readable, boolFloat(ok), k.program, k.file)
		delete(a.cur, k)
	}
}
