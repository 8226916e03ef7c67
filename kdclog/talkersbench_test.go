package kdclog

import (
	"bytes"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// talkersModes are the settings the top-talkers benchmarks compare.
var talkersModes = []struct {
	name string
	cfg  config.TopTalkers
}{
	{"off", config.TopTalkers{Disabled: true}},
	{"on", config.TopTalkers{}},
}

// BenchmarkTopTalkers is BenchmarkTailParseCount (the whole process:
// read, split, parse, count, positions) with the top talkers off and on
// in turn within each op (the order rotating), so that both see the same
// machine: it reports lines per CPU-second of each and on/off, the
// throughput ratio.
//
//	taskset -c 1 go test ./kdclog -run '^$' -bench 'TopTalkers$' -benchtime 3x -count 5
func BenchmarkTopTalkers(b *testing.B) {
	path, data := benchLog(b)
	n := uint64(bytes.Count(data, []byte{'\n'}))
	src := followSource(path)
	cpu := interleave(b, len(talkersModes), func(k int) {
		followLog(b, &config.Config{Logs: []config.LogSource{src}, TopTalkers: talkersModes[k].cfg}, path, n)
	})
	total := float64(n) * float64(b.N)
	for k, m := range talkersModes {
		b.ReportMetric(total/cpu[k], m.name+"-lines/cpu-s")
	}
	b.ReportMetric(cpu[0]/cpu[1], "on/off")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTopTalkersHandle is BenchmarkParseCount (parse and count, no
// file) with the top talkers off and on in turn: their cost per line
// without the reading.
func BenchmarkTopTalkersHandle(b *testing.B) {
	_, data := benchLog(b)
	lines := splitLines(data)
	cpu := interleave(b, len(talkersModes), func(k int) {
		c := newCounts()
		c.talkers.apply(talkersModes[k].cfg)
		src := benchSource(c)
		handleBatched(src, lines)
	})
	total := float64(len(lines)) * float64(b.N)
	for k, m := range talkersModes {
		b.ReportMetric(cpu[k]/total*1e9, m.name+"-ns/line")
	}
	b.ReportMetric(0, "ns/op")
}

// TestTopTalkersNoAllocation: a request line whose names are tracked
// already costs the top talkers no allocation.
func TestTopTalkersNoAllocation(t *testing.T) {
	c := newCounts()
	now := time.Now()
	c.talkers.now = func() time.Time { return now }
	s := newSource(config.LogSource{Path: "t", Type: "kdc"}, c, &sourceStats{})
	lines := [][]byte{
		[]byte(hdr + "AS_REQ (" + etypes4 + ") 192.0.2.7: NEEDED_PREAUTH: job@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, Additional pre-authentication required"),
		[]byte(hdr + "AS_REQ (" + etypes4 + ") 192.0.2.7: PREAUTH_FAILED: job@PERF.TEST for krbtgt/PERF.TEST@PERF.TEST, Preauthentication failed"),
		[]byte(hdr + "TGS_REQ (" + etypes4 + ") 192.0.2.7: ISSUE: authtime 1, etypes {rep=18 tkt=18 ses=18}, job@PERF.TEST for HTTP/web@PERF.TEST"),
		[]byte(hdr + "DISPATCH: repeated (retransmitted?) request from 192.0.2.7, resending previous response"),
	}
	for _, l := range lines {
		s.handle(l, false)
	}
	s.flush()
	allocs := testing.AllocsPerRun(1000, func() {
		for _, l := range lines {
			s.handle(l, false)
		}
	})
	s.flush()
	if allocs != 0 {
		t.Errorf("%v allocations per 4 lines", allocs)
	}
	now = now.Add(time.Minute) // the window over: the lines were counted, a login (NEEDED_PREAUTH, a wrong password) one request
	if l := c.talkers.last(); len(l.Lists[0]) != 1 || l.Lists[0][0].Count < 1000 {
		t.Errorf("AS requests by address %v, want job's 1,000 and more", l.Lists[0])
	}
}
