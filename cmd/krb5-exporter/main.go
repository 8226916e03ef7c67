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

// commands are the parsed command line's destinations.
type commands struct {
	serve                          *serveCmd
	realmUp, realmDown, env, relay *realmCmd
	probePrincipal                 *probePrincipalCmd
	realmLoad                      *realmLoadCmd
	probe                          *probeCmd
	man                            *kingpin.CmdClause
	manFormat                      *string
	bench                          *benchCmd
	top                            *topCmd
}

// newApp builds the command line model: main parses it, the man page and
// the README test read it (kingpin's Model).
func newApp(stdout, stderr io.Writer) (*kingpin.Application, *commands) {
	app := kingpin.New("krb5-exporter", "Prometheus exporter and benchmark for MIT Kerberos KDCs (krb5kdc, kadmind).")
	app.Version(version.Print("krb5-exporter"))
	app.HelpFlag.Short('h')
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	c := &commands{serve: addServeCommand(app)}
	c.realmUp, c.realmDown, c.env, c.relay, c.probePrincipal, c.realmLoad = addRealmCommands(app)
	c.probe = addProbeCommand(app)
	c.bench = addBenchCommand(app)
	c.top = addTopCommand(app)
	c.man = app.Command("man", "Print the manual page (roff) generated from this command line.").Hidden()
	c.manFormat = c.man.Flag("format", "roff (the man page) or markdown (docs/commands.md).").Default("roff").Enum("roff", "markdown")
	return app, c
}

// run builds a fresh command line (no global flag state), parses args and
// runs the chosen command, returning the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	app, c := newApp(stdout, stderr)
	cmd, err := app.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter: error: %v, try --help\n", err)
		if len(args) > 0 && args[0] == "probe" {
			// A monitoring system running the check reads 3 as UNKNOWN,
			// and shows the first line of stdout.
			return probeUnknown(stdout, "bad command line: "+err.Error())
		}
		return 2
	}
	switch cmd {
	case c.serve.cmd.FullCommand():
		return c.serve.run(stdout, stderr)
	case c.realmUp.cmd.FullCommand():
		return c.realmUp.run(stdout, stderr)
	case c.realmDown.cmd.FullCommand():
		return c.realmDown.run(stdout, stderr)
	case c.relay.cmd.FullCommand():
		return c.relay.run(stdout, stderr)
	case c.env.cmd.FullCommand():
		return c.env.run(stdout, stderr)
	case c.probePrincipal.cmd.FullCommand():
		return c.probePrincipal.run(stdout, stderr)
	case c.realmLoad.cmd.FullCommand():
		return c.realmLoad.run(stdout, stderr)
	case c.probe.cmd.FullCommand():
		return c.probe.run(stdout, stderr)
	case c.man.FullCommand():
		write := func(w io.Writer) error { return writeMan(w, app.Model(), version.Version) }
		if *c.manFormat == "markdown" {
			write = func(w io.Writer) error { return writeCommandsDoc(w, app.Model()) }
		}
		if err := write(stdout); err != nil {
			fmt.Fprintf(stderr, "krb5-exporter: %v\n", err)
			return 1
		}
		return 0
	case c.bench.runCmd.FullCommand():
		return c.bench.run(stdout, stderr)
	case c.bench.cmp.cmd.FullCommand():
		return c.bench.compare(stdout, stderr)
	case c.bench.merge.cmd.FullCommand():
		return c.bench.mergeRuns(stdout, stderr)
	case c.top.cmd.FullCommand():
		return c.top.run(stdout, stderr)
	}
	fmt.Fprintf(stderr, "krb5-exporter: unknown command %q\n", cmd)
	return 2
}
