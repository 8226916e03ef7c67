package report

import (
	"bytes"
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
// maxRequestsBytes a raw requests CSV (about 40 bytes a request: an
// hour's load at 10,000/s is 1.4 GB; a day's at full speed is not read).
const (
	maxReportBytes   = 64 << 20
	maxRequestsBytes = 2 << 30
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
	data, err := readRegular(file, maxReportBytes)
	if err != nil {
		return nil, "", err
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, "", fmt.Errorf("%s: %w", file, err)
	}
	if rep.Schema != SchemaVersion {
		return nil, "", fmt.Errorf("%s: schema %d, this krb5-exporter reads schema %d", file, rep.Schema, SchemaVersion)
	}
	for name, loads := range requestLoads(&rep) {
		f := filepath.Join(dir, "raw", name)
		data, err := readRegular(f, maxRequestsBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = readRequests(data, loads)
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", f, err)
		}
	}
	return &rep, dir, nil
}

// readRegular reads a regular file of at most limit bytes: not a FIFO
// that would block, nor a device (safefile.ReadFile).
func readRegular(path string, limit int64) ([]byte, error) {
	b, _, err := safefile.ReadFile(path, limit, 0)
	return b, err
}

// readRequests puts the rows of a requests CSV into the Records of loads
// (the load column's 1-based index).
func readRequests(data []byte, loads []*Load) error {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1 // the header says itself what is wrong
	head, err := cr.Read()
	if err != nil {
		return err
	}
	if !slices.Equal(head, requestColumns) {
		return fmt.Errorf("columns %v, want %v", head, requestColumns)
	}
	cr.FieldsPerRecord = len(requestColumns)
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
		start, err1 := strconv.ParseFloat(row[4], 64)
		lat, err2 := strconv.ParseFloat(row[5], 64)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		loads[i-1].Records = append(loads[i-1].Records, Record{
			Start: time.Duration(math.Round(start * 1e9)), Latency: time.Duration(math.Round(lat * 1e6)), Kind: row[3], Class: row[6]})
	}
}
