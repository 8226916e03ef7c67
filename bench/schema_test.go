package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestReportSchemaStillDecodes: a new real run's report.json has no key
// the stored one (report/testdata/report.json, which the renderers are
// tested from) lacks, so those tests still cover what runs write. When it
// fails, regenerate the stored report (see report/testdata/README).
func TestReportSchemaStillDecodes(t *testing.T) {
	stored, err := os.ReadFile(filepath.Join("report", "testdata", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := upRealm(t, realm.Options{NoKadmind: true})
	rep := runSuite(t, RealmSystem(r), small("as", "tgs", "latency", "cpu", "memory", "tcp"))
	fresh, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	have := jsonKeys(t, stored)
	// Keys only a test that errored writes (the stored run had none;
	// report's TestErroredTestRows renders them). A loaded machine can
	// make a test of this small run error (CI saw "no request completed").
	have["tests.error"] = true
	var missing []string
	for k := range jsonKeys(t, fresh) {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("keys of a new run's report.json not in report/testdata/report.json: %q", missing)
	}
}

// jsonKeys returns the paths of every object key in data ("as.cpu.ratio";
// array elements share their array's path).
func jsonKeys(t *testing.T, data []byte) map[string]bool {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := prefix + k
				if strings.HasSuffix(prefix, "system.settings.") || strings.HasSuffix(prefix, "error_classes.") || strings.HasSuffix(prefix, "error_texts.") {
					p = prefix + "*" // keys that are data: kdc.conf settings, error classes
				}
				out[p] = true
				walk(p+".", e)
			}
		case []any:
			for _, e := range x {
				walk(prefix, e)
			}
		}
	}
	walk("", v)
	return out
}
