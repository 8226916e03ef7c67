package kdclog

import (
	"bytes"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/kdclog/attack"
)

// attackModes are the detector's settings the benchmarks compare: off,
// on as configured by default (failures and RC4 tickets followed), and
// on with every login and service ticket followed.
var attackModes = []struct {
	name string
	cfg  config.AttackSignals
}{
	{"off", config.AttackSignals{Disabled: true}},
	{"on", config.AttackSignals{}},
	{"follow", config.AttackSignals{FollowLogins: true, FollowServiceTickets: true}},
}

// BenchmarkAttackSignals is BenchmarkTailParseCount (the whole process:
// read, split, parse, count, positions) with each of attackModes in turn
// within each op (the order rotating), so that all see the same machine:
// it reports lines per CPU-second of each and their ratios to off.
//
//	taskset -c 1 go test ./kdclog -run '^$' -bench AttackSignals -benchtime 3x -count 5
func BenchmarkAttackSignals(b *testing.B) {
	path, data := benchLog(b)
	n := uint64(bytes.Count(data, []byte{'\n'}))
	src := followSource(path)
	cpu := interleaved(b, func(c config.AttackSignals) {
		followLog(b, &config.Config{Logs: []config.LogSource{src}, AttackSignals: c}, path, n)
	})
	total := float64(n) * float64(b.N)
	for k, m := range attackModes {
		b.ReportMetric(total/cpu[k], m.name+"-lines/cpu-s")
		if k > 0 {
			b.ReportMetric(cpu[0]/cpu[k], m.name+"/off")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAttackHandle is BenchmarkParseCount (parse and count, no
// file) with the attack signals off and on in turn: the detector's cost
// per line, without the reading.
func BenchmarkAttackHandle(b *testing.B) {
	_, data := benchLog(b)
	lines := splitLines(data)
	run := func(cfg config.AttackSignals) {
		c := newCounts()
		c.attack.apply(cfg)
		src := benchSource(c)
		handleBatched(src, lines)
		if cfg.FollowLogins {
			var snap attack.Snapshot
			c.attack.d.Snapshot(&snap)
			// The log's logins are all pre-authenticated; 2% of its
			// events are wrong passwords of distinct users.
			if snap.Events[attack.EventNoPreauthTicket] != 0 || snap.Events[attack.EventWrongPassword] == 0 {
				b.Fatalf("events %v: tickets without pre-authentication in a log that has none, or no wrong password", snap.Events)
			}
		}
	}
	cpu := interleaved(b, run)
	total := float64(len(lines)) * float64(b.N)
	for k, m := range attackModes {
		b.ReportMetric(cpu[k]/total*1e9, m.name+"-ns/line")
	}
	b.ReportMetric(0, "ns/op")
}

// interleaved runs f with each of attackModes in turn, b.N times, the
// order rotating, and returns the CPU seconds of each mode.
func interleaved(b *testing.B, f func(config.AttackSignals)) []float64 {
	return interleave(b, len(attackModes), func(k int) { f(attackModes[k].cfg) })
}

// interleave runs f(k) for each of n modes in turn, b.N times, the order
// rotating, and returns the CPU seconds of each mode.
func interleave(b *testing.B, n int, f func(k int)) []float64 {
	cpu := make([]float64, n)
	b.ResetTimer()
	for i := range b.N {
		for j := range n {
			k := (i + j) % n
			c0 := cpuSeconds()
			f(k)
			cpu[k] += cpuSeconds() - c0
		}
	}
	return cpu
}
