package collector

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// TestConstMetricKeptPairs: gauge and counter with kept label pairs write
// what prometheus.MustNewConstMetric writes, scrape after scrape with
// values and label values changing, still reject a wrong label count,
// and keep at most maxKeptPairs series.
func TestConstMetricKeptPairs(t *testing.T) {
	d := prometheus.NewDesc("krb5_test_series", "A test series.", []string{"b", "a"}, prometheus.Labels{"c": "const"})
	for scrape := range 3 {
		for i, labels := range [][]string{{"x", "y"}, {"y", "x"}, {"x", "y"}, {"", "z"}} {
			v := float64(scrape*10 + i)
			for _, tc := range []struct {
				kind prometheus.ValueType
				got  prometheus.Metric
			}{{prometheus.GaugeValue, gauge(d, v, labels...)}, {prometheus.CounterValue, counter(d, v, labels...)}} {
				var got, want dto.Metric
				if err := tc.got.Write(&got); err != nil {
					t.Fatal(err)
				}
				if err := prometheus.MustNewConstMetric(d, tc.kind, v, labels...).Write(&want); err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(&got, &want) {
					t.Errorf("scrape %d, %q, kind %v: wrote %v, want %v", scrape, labels, tc.kind, &got, &want)
				}
			}
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a wrong number of label values was accepted")
			}
		}()
		gauge(d, 1, "only one")
	}()
	// Five label values (krb5_kdcconf_info) are kept too; metrics
	// handed out one after another do not share their value.
	five := prometheus.NewDesc("krb5_test_five", "A test series.", []string{"e", "d", "c", "b", "a"}, nil)
	labels := []string{"5", "4", "3", "2", "1"}
	var sent []prometheus.Metric
	for i := range 2 * presetSlab {
		sent = append(sent, gauge(five, float64(i), labels...))
	}
	for i, m := range sent {
		var got, want dto.Metric
		if err := m.Write(&got); err != nil {
			t.Fatal(err)
		}
		if err := prometheus.MustNewConstMetric(five, prometheus.GaugeValue, float64(i), labels...).Write(&want); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, &want) {
			t.Errorf("five labels, metric %d: wrote %v, want %v", i, &got, &want)
		}
		if _, ok := m.(*presetMetric); !ok && i > 0 {
			t.Errorf("five labels, metric %d: label pairs not kept (%T)", i, m)
		}
	}
	one := prometheus.NewDesc("krb5_test_many", "A test series.", []string{"n"}, nil)
	for i := range 2*maxKeptPairs + 10 {
		gauge(one, 1, strconv.Itoa(i))
	}
	keptPairs.Lock()
	n := len(keptPairs.m)
	keptPairs.Unlock()
	if n > maxKeptPairs {
		t.Errorf("%d series kept, bound %d", n, maxKeptPairs)
	}
}
