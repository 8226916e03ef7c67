// Command capdump scrapes a daemon once in protobuf (so that native
// histograms come with it) and prints the families the capacity model
// reads as one JSON array: scripts/capacity-accuracy.sh's raw windows
// (RAW=DIR), which scripts/capacity-candidates.py evaluates offline.
//
//	go run ./capacity/testdata/capdump http://127.0.0.1:9119/metrics
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protojson"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: capdump URL")
		os.Exit(2)
	}
	req, err := http.NewRequest("GET", os.Args[1], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.NewFormat(expfmt.TypeProtoDelim))
	var parts []string
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if err != io.EOF {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			break
		}
		if n := mf.GetName(); n == "krb5_kdc_requests_total" || n == "krb5_kdc_workers" || hasPrefix(n, "krb5_process_", "krb5_kdc_worker_", "krb5_kdc_request_service", "krb5_kdc_capacity", "krb5_kdc_service_tracing") {
			b, _ := protojson.Marshal(&mf)
			parts = append(parts, string(b))
		}
	}
	fmt.Printf("[%s]\n", strings.Join(parts, ","))
}

func hasPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
