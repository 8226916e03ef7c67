// Command gen writes the JSON of every dashboard of package dashboards into
// the directory given (default: dashboards/ of the repository, when run
// from its root as `go run ./dashboards/gen`).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/krb5-exporter/krb5-exporter/dashboards"
)

func main() {
	dir := flag.String("dir", "dashboards", "directory to write the dashboards' JSON to")
	flag.Parse()
	for name, b := range dashboards.All() {
		out, err := dashboards.Render(b)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			os.Exit(1)
		}
		path := filepath.Join(*dir, name)
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, out, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := os.Rename(tmp, path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
