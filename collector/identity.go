package collector

import (
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/logging"
)

// identity applies kdcproc's rule to the processes discovery finds by
// name or pid file: one check per process (pid and start time), kept
// while the process is looked at; each rejected process is counted once
// and each program and reason logged once.
type identity struct {
	rule     *kdcproc.Rule
	logger   log.Logger
	verdicts map[procID]verdict
	rejected map[string]map[string]float64 // program -> reason -> processes
	logged   *logging.Changes              // program/reason seen: logged
	pidFiles *logging.Changes              // path -> the pid file's last error
	desc     *prometheus.Desc
	metrics  []prometheus.Metric // the counters as last sent; nil: changed since
}

type verdict struct {
	reason string // "": the daemon
	gen    uint64 // the scan that last looked at it
}

// maxVerdicts bounds the verdicts kept: beyond it (that many processes
// named like a daemon at once) a process is checked on every scan and its
// rejection not counted again.
const maxVerdicts = 4096

var rejectReasons = []string{kdcproc.RejectUser, kdcproc.RejectExecutable, kdcproc.RejectUnit, kdcproc.RejectPidFile}

func newIdentity(rule *kdcproc.Rule, logger log.Logger) *identity {
	id := &identity{rule: rule, logger: logger, verdicts: map[procID]verdict{}, rejected: map[string]map[string]float64{},
		logged: logging.NewChanges(nil), pidFiles: logging.NewChanges(nil),
		desc: prometheus.NewDesc("krb5_exporter_process_rejected_total",
			"Processes named like the program that were not counted as it, each once, by reason: user (runs as another user than root, the exporter's or --collector.process.user), executable (/proc/PID/exe not the MIT binary), unit (exe unreadable and not in a KDC unit of systemd), pid_file (the pid file is not root's or writable by others).",
			[]string{"program", "reason"}, nil)}
	for _, p := range programNames {
		id.rejected[p] = map[string]float64{}
		for _, r := range rejectReasons {
			id.rejected[p][r] = 0
		}
	}
	return id
}

// accept tells whether process pid, named prog, is that daemon; gen is
// the scan's number.
func (id *identity) accept(dir string, pid procID, prog string, gen uint64) bool {
	if v, ok := id.verdicts[pid]; ok {
		v.gen = gen
		id.verdicts[pid] = v
		return v.reason == ""
	}
	rej := id.rule.Check(dir, prog)
	if rej == kdcproc.Gone {
		return false
	}
	if len(id.verdicts) < maxVerdicts {
		id.verdicts[pid] = verdict{rej.Reason, gen}
	} else if rej.Reason != "" {
		return false // counted when first kept
	}
	if rej.Reason == "" {
		return true
	}
	id.rejected[prog][rej.Reason]++
	id.metrics = nil
	if _, _, first := id.logged.Note(prog+"/"+rej.Reason, "seen"); first {
		level.Warn(id.logger).Log("msg", "a process named "+prog+" is not counted as "+prog+" (logged once per reason; krb5_exporter_process_rejected_total counts them; see docs/security.md)",
			"program", prog, "reason", rej.Reason, "pid", pid.pid, "seen", rej.Detail)
	}
	return false
}

// pidFile counts a pid file newly found untrusted; err is its check's
// result.
func (id *identity) pidFile(prog, path string, err error) {
	outcome := ""
	if err != nil {
		outcome = err.Error()
	}
	if _, _, changed := id.pidFiles.Note(path, outcome); changed && err != nil {
		id.rejected[prog][kdcproc.RejectPidFile]++
		id.metrics = nil
	}
}

// sweep forgets the processes the scan gen did not look at (exited).
func (id *identity) sweep(gen uint64) {
	for k, v := range id.verdicts {
		if v.gen != gen {
			delete(id.verdicts, k)
		}
	}
}

// collect sends the counters, built again only after a change (twelve
// series on every scrape were a tenth of a scrape's allocations).
func (id *identity) collect(ch chan<- prometheus.Metric) {
	if id.metrics == nil {
		for _, p := range programNames {
			for _, r := range rejectReasons {
				id.metrics = append(id.metrics, prometheus.MustNewConstMetric(id.desc, prometheus.CounterValue, id.rejected[p][r], p, r))
			}
		}
	}
	for _, m := range id.metrics {
		ch <- m
	}
}
