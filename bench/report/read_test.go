package report

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A run written by WriteAll reads back with every request in its load;
// a broken raw CSV, a report.json of another schema or a FIFO in its
// place are errors naming the file (and line), never a hang.
func TestReadRun(t *testing.T) {
	rep, _ := stored(t)
	rep.AS.Records = []Record{{Start: 1500000, Latency: 2345000, Kind: KindAS, Class: "success"}, {Start: 2e9, Latency: 5e9, Kind: KindAS, Class: "timeout"}}
	dir := t.TempDir()
	if err := WriteAll(rep, dir, ""); err != nil {
		t.Fatal(err)
	}
	back, got, err := ReadRun(filepath.Join(dir, "report.json"))
	if err != nil || got != dir {
		t.Fatalf("%q: %v", got, err)
	}
	if len(back.AS.Records) != 2 || back.AS.Records[0] != rep.AS.Records[0] || back.AS.Records[1] != rep.AS.Records[1] {
		t.Errorf("records read back %+v, written %+v", back.AS.Records, rep.AS.Records)
	}
	for name, c := range map[string]struct {
		file, data, want string
	}{
		"a load not in report.json": {"raw/as-requests.csv", "load,clients,transport,kind,start_s,latency_ms,result\n2,64,udp,as,0.1,1.0,success\n", "as-requests.csv: line 2: load \"2\" is not in report.json"},
		"other columns":             {"raw/as-requests.csv", "load,start_s\n1,0.1\n", "columns [load start_s]"},
		"a bad number":              {"raw/as-requests.csv", "load,clients,transport,kind,start_s,latency_ms,result\n1,64,udp,as,0.1,fast,success\n", "line 2: latency_ms: strconv.ParseFloat"},
		"another schema":            {"report.json", `{"schema": 2}`, "schema 2, this krb5-exporter reads schema 1"},
	} {
		d := t.TempDir()
		if err := WriteAll(rep, d, ""); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, c.file), []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadRun(d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	d := t.TempDir()
	if err := WriteAll(rep, d, ""); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(d, "raw", "tgs-requests.csv"))
	if err := syscall.Mkfifo(filepath.Join(d, "raw", "tgs-requests.csv"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadRun(d); err == nil || !strings.Contains(err.Error(), "a FIFO") {
		t.Errorf("FIFO: %v", err)
	}
}
