package report

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// raw/resource-samples.csv has a row per sample of the run with the
// KDC's waits for a CPU, its cores and the state sampler's counts next
// to its CPU time (what report.json's samples and the textfile have),
// and the disk-wait share since the previous row.
func TestResourceSamplesCSV(t *testing.T) {
	rep, _ := stored(t)
	dir := t.TempDir()
	if err := WriteAll(rep, dir, ""); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "raw", "resource-samples.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"kdc_cpu_wait_s", "kdc_cores", "kdc_state_core_ticks", "kdc_state_disk_wait", "kdc_disk_wait_ratio"} {
		if !slices.Contains(rows[0], c) {
			t.Errorf("no column %s: %q", c, rows[0])
		}
	}
	if len(rows)-1 != len(rep.Samples) {
		t.Fatalf("%d rows for %d samples", len(rows)-1, len(rep.Samples))
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	num := func(row []string, c string) float64 {
		v, err := strconv.ParseFloat(row[col[c]], 64)
		if err != nil {
			t.Fatalf("%s %q: %v", c, row[col[c]], err)
		}
		return v
	}
	looked := false
	for i, row := range rows[1:] {
		s := rep.Samples[i]
		if got := num(row, "kdc_cpu_wait_s"); got != roundTo(s.KDCRunDelay.Seconds(), 6) {
			t.Errorf("row %d: kdc_cpu_wait_s %v, sample %v", i, got, s.KDCRunDelay)
		}
		if num(row, "kdc_cores") != float64(s.KDCCores) || num(row, "kdc_state_core_ticks") != float64(s.KDCStateCores) || num(row, "kdc_state_disk_wait") != float64(s.KDCStateDisk) {
			t.Errorf("row %d %q: sample %+v", i, row, s)
		}
		if row[col["kdc_disk_wait_ratio"]] == "" {
			continue
		}
		ratio := num(row, "kdc_disk_wait_ratio")
		p := rep.Samples[i-1]
		if want := float64(s.KDCStateDisk-p.KDCStateDisk) / float64(s.KDCStateCores-p.KDCStateCores); ratio < 0 || ratio > 1 || ratio != roundTo(want, 4) {
			t.Errorf("row %d: disk wait ratio %v, samples say %v", i, ratio, want)
		}
		looked = looked || row[col["test"]] == "as"
	}
	if !looked {
		t.Errorf("no disk-wait share in the as test's rows: %q", rows)
	}
}

func roundTo(v float64, digits int) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', digits, 64), 64)
	return f
}
