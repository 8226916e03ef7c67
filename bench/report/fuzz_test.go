package report_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/bench/compare"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
)

// FuzzReadRun: whatever a results directory holds (report.json and
// raw/as-requests.csv), ReadRun returns an error or a run that compares
// with itself and with a real run without a panic, an allocation sized
// by its numbers, or a comparison JSON cannot hold. Seeds: the stored
// real runs, and one of them made hostile. (make test runs the seeds; go test -fuzz FuzzReadRun
// -fuzztime 30s ./bench/report/ searches.)
func FuzzReadRun(f *testing.F) {
	fast := filepath.Join("..", "compare", "testdata", "fast")
	for _, seed := range [][2]string{
		{filepath.Join("testdata", "report.json"), ""},
		{filepath.Join(fast, "report.json"), filepath.Join(fast, "raw", "as-requests.csv")},
	} {
		js, err := os.ReadFile(seed[0])
		if err != nil {
			f.Fatal(err)
		}
		var csv []byte
		if seed[1] != "" {
			if csv, err = os.ReadFile(seed[1]); err != nil {
				f.Fatal(err)
			}
			csv = csv[:bytes.LastIndexByte(csv[:min(len(csv), 2000)], '\n')+1] // a few requests: the fuzzer mutates what is short
		}
		f.Add(js, csv)
		if csv != nil {
			// A hostile seed: the as load's wall time negative (once a
			// panic in makeslice).
			f.Add(bytes.Replace(js, []byte(`"wall_ns": 2004382910`), []byte(`"wall_ns": -2004382910`), 1), csv)
		}
	}
	real, _, err := report.ReadRun(fast)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, js, csv []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "report.json"), js, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(csv) > 0 {
			if err := os.Mkdir(filepath.Join(dir, "raw"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "raw", "as-requests.csv"), csv, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rep, _, err := report.ReadRun(dir)
		if err != nil {
			return
		}
		for _, pair := range [][2]*report.Report{{rep, rep}, {real, rep}, {rep, real}} {
			c := compare.Compare(pair[0], pair[1], compare.Options{})
			if _, err := json.Marshal(c); err != nil {
				t.Fatalf("the comparison as JSON: %v", err)
			}
		}
	})
}
