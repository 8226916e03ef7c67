package metricsdoc

import (
	"slices"
	"testing"
)

func TestNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (status) (rate(krb5_kdc_requests_total{job=~"$job", request="as"}[5m]))`: {"krb5_kdc_requests_total"},
		// Label values are strings, not names, even when they look like one.
		`krb5_process_up{program="krb5_kdc"} == 1 and on (job) probe_success`: {"krb5_process_up", "probe_success"},
		// Recorded names, including those starting with the level krb5:.
		`krb5:iprop_replica_lag_seconds > 600 or instance:krb5_kdc_cpu_cores:rate5m`: {"krb5:iprop_replica_lag_seconds", "instance:krb5_kdc_cpu_cores:rate5m"},
		// A subquery's step is no name; functions and labels are not either.
		`max_over_time(krb5_kdc_log_bytes_behind[10m:1m]) > 0 unless krb5_kdc_log_bytes_behind`: {"krb5_kdc_log_bytes_behind"},
		`histogram_quantile(0.95, sum by (le) (rate(krb5_probe_duration_seconds_bucket[5m])))`:  {"krb5_probe_duration_seconds_bucket"},
		`time() - node_boot_time_seconds`: nil,
	} {
		if got := Names(expr); !slices.Equal(got, want) {
			t.Errorf("Names(%q) = %q, want %q", expr, got, want)
		}
	}
}

func TestUnknown(t *testing.T) {
	documented := map[string]string{"krb5_probe_duration_seconds": "histogram", "krb5_process_up": "gauge"}
	recorded := map[string]bool{"krb5:iprop_replica_lag_seconds": true}
	expr := `rate(krb5_probe_duration_seconds_bucket[5m]) + krb5_process_up + krb5:iprop_replica_lag_seconds + krb5:iprop_replica_lag_secs + krb5_process_upp + krb5_process_up_bucket`
	want := []string{"krb5:iprop_replica_lag_secs", "krb5_process_upp", "krb5_process_up_bucket"}
	if got := Unknown(expr, documented, recorded); !slices.Equal(got, want) {
		t.Errorf("Unknown = %q, want %q", got, want)
	}
}

// The real docs/metrics.md and rule files: a sample of each is found.
func TestDocumentedAndRecorded(t *testing.T) {
	d, r := Documented(t), Recorded(t)
	if d["krb5_probe_duration_seconds"] != "histogram" || d["krb5_kdc_requests_total"] != "counter" {
		t.Errorf("types: %q, %q", d["krb5_probe_duration_seconds"], d["krb5_kdc_requests_total"])
	}
	for _, name := range []string{"krb5_probe_duration_seconds", "krb5_kdc_requests_total", "krb5_bench_result"} {
		if d[name] == "" {
			t.Errorf("%s not found in docs/metrics.md", name)
		}
	}
	for _, name := range []string{"krb5:iprop_replica_lag_seconds", "instance:krb5_kdc_cpu_cores:rate5m"} {
		if !r[name] {
			t.Errorf("%s not found among the recording rules", name)
		}
	}
}
