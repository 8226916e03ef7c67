package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kingpin/v2"
)

// writeMan writes krb5-exporter(1) in roff from the command line model, so
// the manual page lists exactly the flags the binary accepts, with their
// defaults. (kingpin's own --help-man puts the multi-line version text in
// the .TH line, which man(1) shows as garbage.)
func writeMan(w io.Writer, m *kingpin.ApplicationModel, version string) error {
	b := bufio.NewWriter(w)
	if version == "" {
		version = "dev"
	}
	fmt.Fprintf(b, ".TH KRB5-EXPORTER 1 \"\" \"krb5-exporter %s\" \"User Commands\"\n", roff(version))
	fmt.Fprintf(b, ".SH NAME\nkrb5-exporter \\- %s\n", roff(m.Help))
	b.WriteString(".SH SYNOPSIS\n.B krb5-exporter\n[\\fIcommand\\fR] [\\fIflags\\fR]\n")
	b.WriteString(`.SH DESCRIPTION
Without a command, \fBkrb5-exporter\fR runs the exporter daemon (\fBserve\fR).
It serves /metrics, /probe, /-/healthy, /-/ready and /-/reload; SIGHUP or
POST /-/reload reloads the configuration file.
`)
	b.WriteString(".SH OPTIONS\n")
	manFlags(b, m.Flags)
	b.WriteString(".SH COMMANDS\n")
	for _, c := range m.FlattenedCommands() {
		if c.Hidden {
			continue
		}
		fmt.Fprintf(b, ".SS %s\n%s\n", roff(c.FullCommand), roff(c.Help))
		manFlags(b, c.Flags)
	}
	b.WriteString(`.SH FILES
.TP
.I /etc/krb5-exporter/config.yml
The configuration file of the packaged service (probe modules, probe targets, logs).
.TP
.I /etc/default/krb5-exporter \fRor\fP /etc/sysconfig/krb5-exporter
Flags of the packaged service (ARGS=...).
.TP
.I /var/lib/krb5-exporter/
The service's state: the read positions of the logs.
.SH EXIT STATUS
0 on success; 1 when the configuration or the listen address is bad; 2 on a
command line error. \fBprobe\fR exits 0, 1, 2 or 3 (OK, WARNING, CRITICAL,
UNKNOWN) like a Nagios check.
.SH SEE ALSO
.BR krb5kdc (8),
.BR kadmind (8),
.BR kadmin (1),
.BR logrotate (8)
`)
	return b.Flush()
}

func manFlags(b *bufio.Writer, flags []*kingpin.FlagModel) {
	for _, f := range flags {
		if f.Hidden {
			continue
		}
		name := "\\-\\-" + roff(f.Name)
		if f.IsBoolFlag() && len(f.Default) > 0 && f.Default[0] == "true" {
			name = "\\-\\-[no\\-]" + roff(f.Name)
		}
		if f.Short != 0 {
			name = "\\-" + string(f.Short) + ", " + name
		}
		if !f.IsBoolFlag() {
			name += "=\\fI" + roff(strings.ToUpper(f.Name)) + "\\fR"
		}
		help := roff(f.Help)
		if d := strings.Join(f.Default, ", "); d != "" && !f.IsBoolFlag() {
			help += " Default: " + roff(d) + "."
		}
		fmt.Fprintf(b, ".TP\n\\fB%s\\fR\n%s\n", name, help)
	}
}

// roff escapes text for a roff line: backslashes, hyphens (minus signs in
// option names), and a leading dot or quote that would start a request.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
