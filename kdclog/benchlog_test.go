package kdclog

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The benchmark log: at least a million lines shaped like the captured
// MIT 1.20 lines (the same lines with other user and service numbers), in
// a production-like mix per event: 62% a service ticket, 30% a SPAKE
// login (4 lines), and unknown clients, unknown services, wrong passwords
// (5 lines) and probe logins (5 lines) at 2% each.

var (
	benchLogPath  = flag.String("benchlog", "", "TestWriteBenchLog: write the benchmark log to this file")
	benchLogLines = flag.Int("benchlines", 1_000_000, "lines in the benchmark log")
	benchLogSkew  = flag.Float64("benchskew", 0, "users and services of the benchmark log drawn from a Zipf distribution of this exponent (> 1; 0: uniform, the worst case of the top talkers)")
)

// template is a captured line with holes for a user and a service number.
type template struct {
	parts []string
	holes []byte // 'U' user, 'S' service, between parts
}

var holeRE = regexp.MustCompile(`user\d{4}|web\d{4}`)

func compileTemplate(line string) template {
	var t template
	last := 0
	for _, m := range holeRE.FindAllStringIndex(line, -1) {
		t.parts = append(t.parts, line[last:m[0]])
		if strings.HasPrefix(line[m[0]:], "user") {
			t.holes = append(t.holes, 'U')
		} else {
			t.holes = append(t.holes, 'S')
		}
		last = m[1]
	}
	t.parts = append(t.parts, line[last:]+"\n")
	return t
}

func (t template) write(w *bufio.Writer, user, svc int) {
	for i, p := range t.parts {
		w.WriteString(p)
		if i < len(t.holes) {
			if t.holes[i] == 'U' {
				fmt.Fprintf(w, "user%04d", user)
			} else {
				fmt.Fprintf(w, "web%04d", svc)
			}
		}
	}
}

// benchEvents picks the event templates out of the captured KDC log.
func benchEvents(tb testing.TB) (events [][]template, weights []int) {
	data, err := os.ReadFile(filepath.Join("testdata", "mit-1.20-kdc.log"))
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	// seq returns n lines starting back lines before the first line
	// containing anchor.
	seq := func(anchor string, back, n int) []template {
		for i, l := range lines {
			if strings.Contains(l, anchor) && i >= back && i-back+n <= len(lines) {
				var out []template
				for _, x := range lines[i-back : i-back+n] {
					out = append(out, compileTemplate(x))
				}
				return out
			}
		}
		tb.Fatalf("fixture lacks %q", anchor)
		return nil
	}
	tgs := seq("TGS_REQ (4 etypes", 0, 1)
	login := seq("NEEDED_PREAUTH: user0001@", 0, 4)
	noClient := seq("CLIENT_NOT_FOUND: nosuchuser@", 0, 1)
	noServer := seq("LOOKING_UP_SERVER", 0, 1)
	wrong := seq("verify failure: Preauthentication failed", 3, 5)
	probe := seq("NEEDED_PREAUTH: krb5-exporter-probe@", 0, 5)
	for name, ev := range map[string][]template{"login": login, "wrong password": wrong, "probe": probe} {
		if !strings.Contains(strings.Join(ev[len(ev)-1].parts, ""), "_REQ") || !strings.Contains(strings.Join(ev[0].parts, ""), "NEEDED_PREAUTH") {
			tb.Fatalf("fixture: the %s sequence is not where expected", name)
		}
	}
	return [][]template{tgs, login, noClient, noServer, wrong, probe}, []int{62, 30, 2, 2, 2, 2}
}

// writeBenchLog writes n lines; skew > 1 draws users and services from
// a Zipf distribution of that exponent, 0 uniformly.
func writeBenchLog(tb testing.TB, w io.Writer, n int, skew float64) {
	events, weights := benchEvents(tb)
	rng := rand.New(rand.NewPCG(1, 2))
	name := func() int { return 1 + rng.IntN(9999) }
	if skew != 0 {
		// A few clients and services with most of the requests, as
		// production has (a Hadoop job's principal, a web service).
		z := rand.NewZipf(rng, skew, 1, 9998)
		if z == nil {
			tb.Fatalf("-benchskew %v: want an exponent above 1", skew)
		}
		name = func() int { return 1 + int(z.Uint64()) }
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	for written := 0; written < n; {
		pick := rng.IntN(100)
		e := 0
		for ; pick >= weights[e]; e++ {
			pick -= weights[e]
		}
		user, svc := name(), name()
		for _, t := range events[e] {
			if written == n {
				break
			}
			t.write(bw, user, svc)
			written++
		}
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// TestWriteBenchLog writes the benchmark log for tools outside Go (the
// mtail comparison): go test ./kdclog -run TestWriteBenchLog -benchlog FILE
func TestWriteBenchLog(t *testing.T) {
	if *benchLogPath == "" {
		t.Skip("no -benchlog")
	}
	f, err := os.Create(*benchLogPath)
	if err != nil {
		t.Fatal(err)
	}
	writeBenchLog(t, f, *benchLogLines, *benchLogSkew)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// benchFile is the benchmark log, written once per test binary run.
var benchFile struct {
	once sync.Once
	path string
	data []byte
}

func benchLog(b *testing.B) (string, []byte) {
	benchFile.once.Do(func() {
		dir, err := os.MkdirTemp("", "kdclog-bench")
		if err != nil {
			b.Fatal(err)
		}
		benchFile.path = filepath.Join(dir, "krb5kdc.log")
		f, err := os.Create(benchFile.path)
		if err != nil {
			b.Fatal(err)
		}
		writeBenchLog(b, f, *benchLogLines, *benchLogSkew)
		f.Close()
		if benchFile.data, err = os.ReadFile(benchFile.path); err != nil {
			b.Fatal(err)
		}
	})
	return benchFile.path, benchFile.data
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if benchFile.path != "" {
		os.RemoveAll(filepath.Dir(benchFile.path))
	}
	os.Exit(code)
}

func TestBenchLogShape(t *testing.T) {
	var sb strings.Builder
	writeBenchLog(t, &sb, 20000, 0)
	lines := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
	if len(lines) != 20000 {
		t.Fatalf("%d lines", len(lines))
	}
	var e Event
	tgs, issue := 0, 0
	for _, l := range lines {
		if !Parse([]byte(l), &e) {
			t.Fatalf("generated line not understood: %q", l)
		}
		if e.Kind == KindRequest && string(e.Status) == "ISSUE" {
			issue++
			if e.Request == RequestTGS {
				tgs++
			}
		}
	}
	// About 62 service tickets and 30 logins per 100 events of 2.06 lines.
	if tgs < 5000 || issue < 8000 {
		t.Errorf("mix off: %d TGS ISSUE, %d ISSUE in %d lines", tgs, issue, len(lines))
	}
	if n, _ := strconv.Atoi(strings.TrimPrefix(holeRE.FindString(lines[len(lines)/2]), "user")); n > 9999 {
		t.Errorf("bad user number in %q", lines[len(lines)/2])
	}
}

// TestBenchLogSkew: -benchskew gives the few heavy clients and services
// it promises, and the uniform log (the default) none; the mix of events
// is the same.
func TestBenchLogSkew(t *testing.T) {
	for _, c := range []struct {
		skew     float64
		min, max float64 // the busiest user's and service's share of the service tickets
	}{{0, 0, 0.01}, {1.1, 0.05, 0.5}} {
		var sb strings.Builder
		writeBenchLog(t, &sb, 20000, c.skew)
		users, svcs, tgs := map[string]int{}, map[string]int{}, 0
		for _, l := range strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n") {
			if !strings.Contains(l, "TGS_REQ") || !strings.Contains(l, ": ISSUE:") {
				continue
			}
			tgs++
			for _, h := range holeRE.FindAllString(l, -1) {
				if strings.HasPrefix(h, "user") {
					users[h]++
				} else {
					svcs[h]++
				}
			}
		}
		if tgs < 5000 {
			t.Errorf("skew %v: %d service tickets in 20,000 lines, want the usual mix", c.skew, tgs)
		}
		for what, m := range map[string]map[string]int{"user": users, "service": svcs} {
			top := 0
			for _, n := range m {
				top = max(top, n)
			}
			if share := float64(top) / float64(tgs); share < c.min || share > c.max {
				t.Errorf("skew %v: the busiest %s has %.3f of the service tickets, want %v to %v", c.skew, what, share, c.min, c.max)
			}
		}
	}
}
