// Command krb5-exporter exposes MIT Kerberos KDC metrics to Prometheus
// (the default command), and runs benchmarks, one-shot probes and
// throwaway test realms on the command line.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"
)

// defaultListenAddress: the Prometheus default-port list has no free
// number left in 9100-9999; 10088 ends in the Kerberos port, 88.
const defaultListenAddress = ":10088"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run builds a fresh command line (no global flag state), parses args and
// runs the chosen command, returning the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	app := kingpin.New("krb5-exporter", "Prometheus exporter and benchmark for MIT Kerberos KDCs (krb5kdc, kadmind).")
	app.Version(version.Print("krb5-exporter"))
	app.HelpFlag.Short('h')
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)

	serve := addServeCommand(app)
	realmUp, realmDown, realmEnv := addRealmCommands(app)
	probe := addProbeCommand(app)
	bench := app.Command("bench", "Run the KDC performance tests of the seed document (not built yet).")

	cmd, err := app.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter: error: %v, try --help\n", err)
		if len(args) > 0 && args[0] == "probe" {
			// A monitoring system running the check reads 3 as UNKNOWN,
			// and shows the first line of stdout.
			fmt.Fprintf(stdout, "KRB5 UNKNOWN - bad command line: %v\n", err)
			return nagiosUnknown
		}
		return 2
	}
	switch cmd {
	case serve.cmd.FullCommand():
		return serve.run(stdout, stderr)
	case realmUp.cmd.FullCommand():
		return realmUp.run(stdout, stderr)
	case realmDown.cmd.FullCommand():
		return realmDown.run(stdout, stderr)
	case realmEnv.cmd.FullCommand():
		return realmEnv.run(stdout, stderr)
	case probe.cmd.FullCommand():
		return probe.run(stdout, stderr)
	case bench.FullCommand():
		fmt.Fprintf(stderr, "krb5-exporter %s: not built yet; nothing was run\n", cmd)
		return 2
	}
	fmt.Fprintf(stderr, "krb5-exporter: unknown command %q\n", cmd)
	return 2
}
