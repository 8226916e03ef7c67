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

	"github.com/krb5-exporter/krb5-exporter/kdclog/talkers"
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
	// Width and Height are the terminal's (0: no limit, as --batch
	// prints): columns are dropped by priority and lines wrapped between
	// values to fit Width, rows cut to fit Height; no value is cut.
	Width, Height int
}

// Write prints snap as plain text, as `top -b` does: a summary, the column
// line, one line per process and the total.
func Write(w io.Writer, snap Snapshot, v View) error {
	var lines []string
	add := func(ls ...string) { lines = append(lines, ls...) }
	title := []string{"krb5-exporter top - " + snap.At.Format("15:04:05"), "interval " + interval(snap), fmt.Sprintf("workers %d", workers(snap.Rows))}
	if snap.OtherKDCs > 0 {
		title = append(title, fmt.Sprintf("(+%d other KDCs on this host: --collector.process.krb5kdc-pidfile)", snap.OtherKDCs))
	}
	add(wrap(title, v.Width)...)
	for _, h := range headlines(snap) {
		add(wrap(h, v.Width)...)
	}
	sum := []string{fmt.Sprintf("requests %s/s (AS %s, TGS %s)", num(snap.Total.Requests()), num(snap.Total.ASOK+snap.Total.ASErr+snap.Total.ASStep),
		num(snap.Total.TGSOK+snap.Total.TGSErr+snap.Total.TGSStep)), "errors " + pct(snap.Total.ErrorRatio()) + "%", "KDC CPU " + pct(snap.Total.CPU) + "%"}
	if snap.HasKadmin {
		sum = append(sum, fmt.Sprintf("kadmind %s ops/s (%s failed)", num(snap.KadminOps), num(snap.KadminErr)))
	}
	if snap.HasNetwork {
		sum = append(sum, "UDP drops "+num(snap.UDPDrops)+"/s", "TCP overflows "+num(snap.TCPOverflows)+"/s")
	}
	if snap.Capacity > 0 {
		sum = append(sum, fmt.Sprintf("capacity ~%s/s (%s) used %s%%", num(snap.Capacity), Printable(snap.CapacitySource), pct(snap.Total.Requests()/snap.Capacity)))
	}
	add(wrap(sum, v.Width)...)
	switch {
	case snap.DaemonErr != nil:
		add(wrap([]string{"probes: cannot read the daemon: " + Printable(snap.DaemonErr.Error())}, v.Width)...)
	case snap.Daemon != "" && len(snap.Probes) == 0:
		add(wrap([]string{"probes: none in " + Printable(snap.Daemon)}, v.Width)...)
	}
	// What is above the table: the title, the headlines and the summary
	// (head), then the probes, attack signals, service time and talkers
	// (mid), which give way to the table's rows on a short terminal.
	head := lines
	lines = nil
	if len(snap.Probes) > 0 {
		segs := []string{"probes"}
		failing := 0
		for _, p := range snap.Probes {
			seg := Printable(p.Target) + "/" + Printable(p.Exchange)
			switch {
			case !p.OK:
				failing++ // with its reason in the headline above
				continue
			case p.Latency > 0:
				seg += " OK " + latency(p.Latency)
			default:
				seg += " OK"
			}
			segs = append(segs, seg)
		}
		if failing > 0 {
			segs = append(segs, fmt.Sprintf("(%d failing: above)", failing))
		}
		add(wrap(segs, v.Width)...)
	}
	var b strings.Builder
	writeOffenders(&b, snap.Offenders)
	writeService(&b, snap)
	// The talkers are the daemon's last complete window: with the KDC
	// answering nothing now, they are not now's.
	if snap.KDCUp || !snap.KDCKnown {
		writeTalkers(&b, snap.Talkers)
	}
	if b.Len() > 0 {
		for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if v.Width == 0 || utf8.RuneCountInString(l) <= v.Width {
				add(l)
				continue
			}
			add(wrapSep(strings.Fields(l), v.Width, " ")...) // between words, no value cut
		}
	}
	mid := lines
	rows := VisibleRows(snap, v)
	if v.Height > 0 {
		// The process table (its blank line, header, rows and total) is
		// what top is for: mid gives way to it first, keeping a line to
		// say so; rows give way only to the head.
		if room := v.Height - len(head) - (3 + len(rows)); len(mid) > max(room, 0) {
			keep := max(room-1, 0)
			if keep < len(mid) {
				mid = append(mid[:keep:keep], fmt.Sprintf("... %d lines not shown: a taller terminal shows them", len(mid)-keep))
			}
		}
	}
	lines = append(head, mid...)
	cols := fit(columnsFor(snap.HasService), v.Width)
	add("", header(cols))
	// Room for the rows: the screen less what is above, the total and
	// the line that says how many did not fit.
	room := len(rows)
	if v.Height > 0 {
		room = max(1, v.Height-len(lines)-2)
	}
	for i := range rows {
		if i == room && i < len(rows)-1 {
			add(fmt.Sprintf("... %d more rows (/ to filter, s to sort)", len(rows)-i))
			break
		}
		add(rowLine(cols, &rows[i]))
	}
	add(rowLine(cols, &snap.Total))
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// headlines say first what needs a look: the KDC not running, probes
// failing with their reason, tracing not attached. Each is a line's
// segments.
func headlines(snap Snapshot) [][]string {
	var out [][]string
	if snap.KDCKnown && !snap.KDCUp {
		h := "KDC DOWN: no krb5kdc process"
		if !snap.LastSeen.IsZero() {
			h += ", last seen " + snap.LastSeen.Format("15:04:05")
		} else {
			h += " since top started"
		}
		out = append(out, []string{h, "start it: systemctl start krb5-kdc (RHEL: krb5kdc)", "why: journalctl -u krb5-kdc"})
	}
	var failing []string
	for _, p := range snap.Probes {
		if !p.OK {
			f := Printable(p.Target) + "/" + Printable(p.Exchange)
			if p.Reason != "" {
				f += " " + Printable(p.Reason)
			}
			failing = append(failing, f)
		}
	}
	if len(failing) > 0 {
		out = append(out, append([]string{fmt.Sprintf("PROBES FAILING (%d):", len(failing))}, failing...))
	}
	// A storm, as KDCClientStorm: one address or client above the rate,
	// in the daemon's last window (not while the KDC answers nothing).
	if snap.KDCUp || !snap.KDCKnown {
		for _, t := range snap.Talkers {
			if (t.Kind == "requests by address" || t.Kind == "requests by client") && t.Rate > talkers.StormRate {
				out = append(out, []string{fmt.Sprintf("STORM: %s %s sends %s requests/s", strings.TrimPrefix(t.Kind, "requests by "), Printable(t.Name), num(t.Rate)),
					"(KDCClientStorm above " + num(talkers.StormRate) + "/s)"})
			}
		}
	}
	return out
}

// column is one column of the process table: its head, its width, its
// priority (1 is the last to go when the terminal is narrow) and its cell.
type column struct {
	head  string
	width int
	prio  int
	left  bool
	cell  func(r *Row) string
}

// columnsFor are the table's columns in their order.
func columnsFor(svc bool) []column {
	cols := []column{
		{"WORKER", 12, 1, true, func(r *Row) string { return Printable(r.Name) }},
		{"PID", 6, 2, false, func(r *Row) string {
			switch {
			case r.Gone:
				return "gone"
			case r.PID > 0:
				return strconv.Itoa(r.PID)
			}
			return "-"
		}},
		{"AS ok/s", 10, 4, false, func(r *Row) string { return num(r.ASOK) }},
		{"AS err/s", 10, 9, false, func(r *Row) string { return num(r.ASErr) }},
		{"preauth/s", 10, 11, false, func(r *Row) string { return num(r.ASStep + r.TGSStep) }},
		{"TGS ok/s", 9, 5, false, func(r *Row) string { return num(r.TGSOK) }},
		{"TGS err/s", 10, 10, false, func(r *Row) string { return num(r.TGSErr) }},
		{"ERR%", 7, 6, false, func(r *Row) string { return pct(r.ErrorRatio()) }},
		{"CPU%", 7, 3, false, func(r *Row) string { return pct(r.CPU) }},
		{"RSS", 9, 7, false, func(r *Row) string { return byteSize(r.RSS) }},
	}
	if svc {
		cols = append(cols, column{"SVC/req", 9, 8, false, func(r *Row) string { return seconds(r.ServiceMean()) }})
	}
	return cols
}

// fit drops the columns of the lowest priority until the table fits
// width (0: every column).
func fit(cols []column, width int) []column {
	for width > 0 && tableWidth(cols) > width && len(cols) > 1 {
		worst := 0
		for i, c := range cols {
			if c.prio > cols[worst].prio {
				worst = i
			}
		}
		cols = append(cols[:worst:worst], cols[worst+1:]...)
	}
	return cols
}

func tableWidth(cols []column) int {
	w := 0
	for _, c := range cols {
		w += c.width + 1
	}
	return w - 1
}

func header(cols []column) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(' ')
		}
		if c.left {
			fmt.Fprintf(&b, "%-*s", c.width, c.head)
		} else {
			fmt.Fprintf(&b, "%*s", c.width, c.head)
		}
	}
	return strings.TrimRight(b.String(), " ")
}

func rowLine(cols []column, r *Row) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(' ')
		}
		if c.left {
			fmt.Fprintf(&b, "%-*s", c.width, c.cell(r))
		} else {
			fmt.Fprintf(&b, "%*s", c.width, c.cell(r))
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// wrap joins segments with two spaces into lines of at most width
// columns (0: one line), breaking between segments, never inside one but
// for a segment wider than the whole line, which is cut with "...".
func wrap(segs []string, width int) []string { return wrapSep(segs, width, "  ") }

// wrapSep is wrap with sep between segments.
func wrapSep(segs []string, width int, sep string) []string {
	var out []string
	cur := ""
	for _, s := range segs {
		if width > 0 && utf8.RuneCountInString(s) > width {
			s = string([]rune(s)[:width-3]) + "..."
		}
		switch {
		case cur == "":
			cur = s
		case width > 0 && utf8.RuneCountInString(cur)+len(sep)+utf8.RuneCountInString(s) > width:
			out = append(out, cur)
			cur = "  " + s // a continuation is indented
			if utf8.RuneCountInString(cur) > width {
				cur = s
			}
		default:
			cur += sep + s
		}
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
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
