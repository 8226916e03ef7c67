package top

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Header is the column line of the table; ServiceColumn is added to it
// (and each row) when the daemon has per-worker service time.
const (
	Header        = "WORKER       PID    AS ok/s   AS err/s  preauth/s  TGS ok/s  TGS err/s    ERR%    CPU%       RSS"
	ServiceColumn = "   SVC/req"
)

// ServiceHeader is the column line of the service-time table, shown when
// the daemon runs the kdcservice collector: per request type, requests
// traced per second, the KDC's own time per request at p95 and on
// average, and its shares on a CPU, waiting for a CPU and blocked.
const ServiceHeader = "SERVICE      req/s       p95      mean    CPU%  RUNQ%  BLKD%  STLN%"

// View says how a snapshot is shown.
type View struct {
	Sort   string // one of SortOrders
	Filter string // show rows whose name contains it (empty: all)
}

// Write prints snap as plain text, as `top -b` does: a summary, the column
// line, one line per process and the total.
func Write(w io.Writer, snap Snapshot, v View) error {
	var b strings.Builder
	fmt.Fprintf(&b, "krb5-exporter top - %s  interval %s  workers %d\n", snap.At.Format("15:04:05"),
		interval(snap), workers(snap.Rows))
	fmt.Fprintf(&b, "requests %s/s (AS %s, TGS %s)  errors %s%%  KDC CPU %s%%",
		num(snap.Total.Requests()), num(snap.Total.ASOK+snap.Total.ASErr+snap.Total.ASStep),
		num(snap.Total.TGSOK+snap.Total.TGSErr+snap.Total.TGSStep), pct(snap.Total.ErrorRatio()), pct(snap.Total.CPU))
	if snap.HasKadmin {
		fmt.Fprintf(&b, "  kadmind %s ops/s (%s failed)", num(snap.KadminOps), num(snap.KadminErr))
	}
	if snap.HasNetwork {
		fmt.Fprintf(&b, "  UDP drops %s/s  TCP overflows %s/s", num(snap.UDPDrops), num(snap.TCPOverflows))
	}
	if snap.Capacity > 0 {
		fmt.Fprintf(&b, "  capacity ~%s/s (%s) used %s%%", num(snap.Capacity), Printable(snap.CapacitySource), pct(snap.Total.Requests()/snap.Capacity))
	}
	b.WriteString("\n")
	switch {
	case snap.DaemonErr != nil:
		fmt.Fprintf(&b, "probes: cannot read the daemon: %s\n", Printable(snap.DaemonErr.Error()))
	case snap.Daemon != "" && len(snap.Probes) == 0:
		fmt.Fprintf(&b, "probes: none in %s\n", Printable(snap.Daemon))
	}
	if len(snap.Probes) > 0 {
		b.WriteString("probes")
		for _, p := range snap.Probes {
			state := "OK"
			if !p.OK {
				state = "FAIL"
			}
			fmt.Fprintf(&b, "  %s/%s %s", Printable(p.Target), Printable(p.Exchange), state)
			if p.OK && p.Latency > 0 {
				fmt.Fprintf(&b, " %s", latency(p.Latency))
			}
		}
		b.WriteString("\n")
	}
	writeOffenders(&b, snap.Offenders)
	writeService(&b, snap)
	writeTalkers(&b, snap.Talkers)
	header := Header
	if snap.HasService {
		header += ServiceColumn
	}
	b.WriteString("\n" + header + "\n")
	rows := VisibleRows(snap, v)
	for i := range rows {
		b.WriteString(line(&rows[i], snap.HasService) + "\n")
	}
	b.WriteString(line(&snap.Total, snap.HasService) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// maxOffendersShown bounds the offenders shown per signal (the daemon
// exports its top k, 10 by default).
const maxOffendersShown = 3

// writeOffenders writes one line per attack signal with offenders in the
// daemon's window: the worst first, with their score, escaped.
func writeOffenders(b *strings.Builder, offs []Offender) {
	for i := 0; i < len(offs); {
		sig := offs[i].Signal
		fmt.Fprintf(b, "attack %s:", Printable(sig))
		n := 0
		for ; i < len(offs) && offs[i].Signal == sig; i++ {
			if n++; n <= maxOffendersShown {
				fmt.Fprintf(b, " %s (%s)", Printable(offs[i].Name), strconv.FormatFloat(offs[i].Score, 'f', -1, 64))
			}
		}
		if n > maxOffendersShown {
			fmt.Fprintf(b, " and %d more", n-maxOffendersShown)
		}
		b.WriteString("\n")
	}
}

// VisibleRows are the rows v shows, in v's order.
func VisibleRows(snap Snapshot, v View) []Row {
	var rows []Row
	for _, r := range snap.Rows {
		if v.Filter == "" || strings.Contains(r.Name, v.Filter) || strings.Contains(strconv.Itoa(r.PID), v.Filter) {
			rows = append(rows, r)
		}
	}
	SortRows(rows, v.Sort)
	return rows
}

// writeService writes what the daemon's kdcservice collector says: that
// it is not attached, the service-time table, the queue line.
func writeService(b *strings.Builder, snap Snapshot) {
	if t := snap.Tracing; t != nil && !t.Up {
		b.WriteString("service tracing: not attached")
		if len(t.Reasons) > 0 {
			var rs []string
			for _, r := range t.Reasons {
				rs = append(rs, Printable(r))
			}
			b.WriteString(" (errors: " + strings.Join(rs, ", ") + ")")
		}
		b.WriteString("\n")
	}
	if len(snap.Service) > 0 {
		b.WriteString("\n" + ServiceHeader + "\n")
		for _, sv := range snap.Service {
			if sv.Request == "other" && sv.Rate == 0 { // what is neither AS nor TGS: rare, shown when there is some
				continue
			}
			fmt.Fprintf(b, "%-10s %7s %9s %9s %7s %6s %6s %6s\n", sv.Request, num(sv.Rate), seconds(sv.P95), seconds(sv.Mean),
				pct(sv.CPU), pct(sv.RunQueue), pct(sv.Blocked), pct(sv.Stolen))
		}
	}
	if len(snap.Queue) > 0 {
		b.WriteString("queue (wait in the socket)")
		for _, q := range snap.Queue {
			fmt.Fprintf(b, "  %s p95 %s mean %s", q.Transport, seconds(q.P95), seconds(q.Mean))
		}
		b.WriteString("\n")
	}
}

// Line formats one row under Header.
func Line(r *Row) string { return line(r, false) }

// line formats one row, with its service time per request when svc.
func line(r *Row, svc bool) string {
	if svc {
		return lineBase(r) + fmt.Sprintf(" %10s", seconds(r.ServiceMean()))
	}
	return lineBase(r)
}

func lineBase(r *Row) string {
	name := Printable(r.Name)
	if r.Gone {
		name += " (gone)"
	}
	pid := "-"
	if r.PID > 0 {
		pid = strconv.Itoa(r.PID)
	}
	return fmt.Sprintf("%-12s %6s %10s %10s %10s %9s %10s %7s %7s %9s", name, pid,
		num(r.ASOK), num(r.ASErr), num(r.ASStep+r.TGSStep), num(r.TGSOK), num(r.TGSErr),
		pct(r.ErrorRatio()), pct(r.CPU), byteSize(r.RSS))
}

// Printable is s with what a terminal would act on escaped as in a Go
// string literal (\x1b, \r, \u009b, \u202e; a backslash as \\): label
// values come from the daemon's /metrics, whoever wrote its configuration.
func Printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == '\\' || r == utf8.RuneError }) < 0 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				fmt.Fprintf(&b, "\\x%02x", s[i])
				continue
			}
			fallthrough
		case !unicode.IsPrint(r) || r == '\\':
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func interval(s Snapshot) string {
	if s.Interval == 0 {
		return "-"
	}
	return strconv.FormatFloat(s.Interval.Seconds(), 'f', 2, 64) + "s"
}

func workers(rows []Row) int {
	n := 0
	for _, r := range rows {
		if _, err := strconv.Atoi(r.Name); err == nil && !r.Gone {
			n++
		}
	}
	return n
}

// latency is a duration in ms with a precision that suits it.
func latency(d time.Duration) string {
	ms := d.Seconds() * 1000
	if ms < 10 {
		return strconv.FormatFloat(ms, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(ms, 'f', 0, 64) + "ms"
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// seconds is a service or queue time with a unit that suits it: us below a
// millisecond (a KDC answers a TGS in tens of them), ms below a second.
func seconds(v float64) string {
	switch {
	case math.IsNaN(v) || v < 0:
		return "-"
	case v < 0.001:
		return strconv.FormatFloat(v*1e6, 'f', 0, 64) + "us"
	case v < 1:
		return strconv.FormatFloat(v*1e3, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "s"
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(100*v, 'f', 1, 64)
}

func byteSize(v float64) string {
	if math.IsNaN(v) || v <= 0 {
		return "-"
	}
	for _, u := range []string{"", "K", "M", "G"} {
		if v < 1024 || u == "G" {
			return strconv.FormatFloat(v, 'f', 1, 64) + u
		}
		v /= 1024
	}
	return ""
}
