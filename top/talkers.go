package top

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/krb5-exporter/krb5-exporter/kdclog"
)

// The top talkers' series (kdclog/talkers): the last complete window's.
const (
	mTopRequests    = kdclog.MetricTopRequests
	mTopFailures    = kdclog.MetricTopFailures
	mTopRetransmits = kdclog.MetricTopRetransmits
	mTopWindow      = kdclog.MetricTopWindowSeconds
)

// Talker is one of the daemon's top talkers of its last complete window:
// what it is the top of ("requests by address"), its name as the daemon
// exports it (show it with Printable) and its requests a second.
type Talker struct {
	Kind, Name string
	Rate       float64
}

// talkerSums adds up the top series of one gather: AS and TGS together,
// and the KDCs together when top reads several daemons.
type talkerSums struct {
	counts map[[2]string]float64
	window float64
}

// add takes one series; it reports whether it was a top talkers' one.
func (t *talkerSums) add(name string, l labelSet, v float64) bool {
	var kind string
	switch name {
	case mTopRequests:
		kind = "requests by " + l["by"]
	case mTopFailures:
		kind = "failures by " + l["by"]
	case mTopRetransmits:
		kind = "retransmits by address"
	case mTopWindow:
		t.window = max(t.window, v)
		return true
	default:
		return false
	}
	if t.counts == nil {
		t.counts = map[[2]string]float64{}
	}
	t.counts[[2]string{kind, l["name"]}] += v
	return true
}

// talkers are the sums as rates, by kind, the busiest first.
func (t *talkerSums) talkers() []Talker {
	if t.window <= 0 {
		return nil
	}
	var out []Talker
	for k, v := range t.counts {
		out = append(out, Talker{Kind: k[0], Name: k[1], Rate: v / t.window})
	}
	slices.SortFunc(out, func(a, b Talker) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		if c := cmpDesc(a.Rate, b.Rate); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// writeTalkers writes one line per kind of top talkers: the busiest
// three with their requests a second, escaped.
func writeTalkers(b *strings.Builder, ts []Talker) {
	for i := 0; i < len(ts); {
		kind := ts[i].Kind
		fmt.Fprintf(b, "talkers %s:", Printable(kind))
		n := 0
		for ; i < len(ts) && ts[i].Kind == kind; i++ {
			if n++; n <= maxOffendersShown {
				fmt.Fprintf(b, " %s (%s/s)", Printable(ts[i].Name), strconv.FormatFloat(ts[i].Rate, 'f', 1, 64))
			}
		}
		if n > maxOffendersShown {
			fmt.Fprintf(b, " and %d more", n-maxOffendersShown)
		}
		b.WriteString("\n")
	}
}
