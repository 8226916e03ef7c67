package report

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// requestLoads maps each raw/*-requests.csv to the loads whose records it
// holds, in the order of its load column (1-based).
func requestLoads(rep *Report) map[string][]*Load {
	m := map[string][]*Load{fileAS: {rep.AS}, fileTGS: {rep.TGS}}
	if rep.Latency != nil {
		// The logins' records are the whole session load's: logins and
		// tickets, told apart by the kind column.
		m[fileLatency] = []*Load{rep.Latency.Logins}
	}
	if rep.Concurrency != nil {
		m[fileConcurrency] = rep.Concurrency.Levels
	}
	if rep.TCP != nil {
		m[fileTCP] = []*Load{rep.TCP.Load}
	}
	return m
}

// maxReportBytes bounds report.json (a real one is tens of kilobytes),
// maxLine a line of a raw requests CSV (a real one is about 40 bytes);
// the CSV is streamed, its records bounded by the requests report.json
// says each load made.
const (
	maxReportBytes = 64 << 20
	maxLine        = 4096
)

// ReadRun reads a run written by WriteAll: path is its directory or its
// report.json. The requests of raw/*-requests.csv, when there, go back
// into the loads' Records (which report.json does not hold); a run
// without them (only report.json copied) has none. It returns the
// directory read.
func ReadRun(path string) (*Report, string, error) {
	dir, file := path, filepath.Join(path, "report.json")
	if fi, err := os.Stat(path); err != nil {
		return nil, "", err
	} else if !fi.IsDir() {
		dir, file = filepath.Dir(path), path
	}
	rep, err := ReadSummary(file)
	if err != nil {
		return nil, "", err
	}
	for name, loads := range requestLoads(rep) {
		f := filepath.Join(dir, "raw", name)
		fh, _, err := safefile.Open(f, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = readRequests(fh, loads, requestsOf(rep, name, loads))
			fh.Close()
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", f, err)
		}
	}
	return rep, dir, nil
}

// ReadSummary reads and validates a run's report.json alone, as ReadRun
// does, without the requests of its raw CSVs (the daemon's reading of the
// latest run's ceilings).
func ReadSummary(file string) (*Report, error) {
	data, err := readRegular(file, maxReportBytes)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if rep.Schema != SchemaVersion {
		return nil, fmt.Errorf("%s: schema %d, this krb5-exporter reads schema %d", file, rep.Schema, SchemaVersion)
	}
	if err := validate(&rep); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &rep, nil
}

// requestsOf is how many requests report.json says each of loads (the
// file name's) made: the records its CSV may hold.
func requestsOf(rep *Report, name string, loads []*Load) []int {
	n := make([]int, len(loads))
	for i, l := range loads {
		if l != nil {
			n[i] = l.Requests
		}
	}
	if name == fileLatency && rep.Latency.Tickets != nil {
		n[0] += rep.Latency.Tickets.Requests // the session load's records are both kinds'
	}
	return n
}

// readRegular reads a regular file of at most limit bytes: not a FIFO
// that would block, nor a device (safefile.ReadFile).
func readRegular(path string, limit int64) ([]byte, error) {
	b, _, err := safefile.ReadFile(path, limit, 0)
	return b, err
}

// readRequests puts the rows of a requests CSV into the Records of loads
// (the load column's 1-based index), at most limit[i] into loads[i].
func readRequests(r io.Reader, loads []*Load, limit []int) error {
	cr := csv.NewReader(bufio.NewReader(&lineLimit{r: r, line: 1}))
	cr.FieldsPerRecord = -1 // the header says itself what is wrong
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return err
	}
	if !slices.Equal(head, requestColumns) {
		return fmt.Errorf("columns %v, want %v", head, requestColumns)
	}
	cr.FieldsPerRecord = len(requestColumns)
	// The kinds and classes repeat: one string each, not one a row.
	names := map[string]string{}
	intern := func(s string) (string, bool) {
		if v, ok := names[s]; ok {
			return v, true
		}
		if len(names) >= 64 {
			return "", false
		}
		s = strings.Clone(s)
		names[s] = s
		return s, true
	}
	for {
		row, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		line, _ := cr.FieldPos(0)
		i, err := strconv.Atoi(row[0])
		if err != nil || i < 1 || i > len(loads) || loads[i-1] == nil {
			return fmt.Errorf("line %d: load %q is not in report.json", line, row[0])
		}
		l := loads[i-1]
		if len(l.Records) >= limit[i-1] {
			return fmt.Errorf("line %d: more requests of load %d than the %d report.json says it made", line, i, limit[i-1])
		}
		start, err := duration(row[4], time.Second)
		if err != nil {
			return fmt.Errorf("line %d: start_s: %w", line, err)
		}
		lat, err := duration(row[5], time.Millisecond)
		if err != nil {
			return fmt.Errorf("line %d: latency_ms: %w", line, err)
		}
		kind, ok1 := intern(row[3])
		class, ok2 := intern(row[6])
		if !ok1 || !ok2 {
			return fmt.Errorf("line %d: more than 64 kinds and results", line)
		}
		l.Records = append(l.Records, Record{Start: start, Latency: lat, Kind: kind, Class: class})
	}
}

// duration parses a number of units: finite, in [0, MaxWall].
func duration(s string, unit time.Duration) (time.Duration, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if !(v >= 0 && v*float64(unit) <= float64(MaxWall)) {
		return 0, fmt.Errorf("%s out of range 0..%s", s, MaxWall)
	}
	return time.Duration(math.Round(v * float64(unit))), nil
}

// lineLimit fails a read that would pass more than maxLine bytes without
// a newline: csv.Reader holds a whole line.
type lineLimit struct {
	r       io.Reader
	n, line int
}

func (l *lineLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, c := range p[:n] {
		l.n++
		if c == '\n' {
			l.n = 0
			l.line++
		} else if l.n > maxLine {
			return 0, fmt.Errorf("line %d: longer than %d bytes", l.line, maxLine)
		}
	}
	return n, err
}
