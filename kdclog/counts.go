package kdclog

import "sync/atomic"

// Weak etype kinds: what a request did with DES/3DES/RC4.
const (
	weakOffered = iota // the client's list held a weak type
	weakOnly           // the client's list held nothing but weak types
	weakIssued         // the reply, ticket or session key used one (ISSUE lines)
	numWeakKinds
)

var weakKindNames = [numWeakKinds]string{"offered", "only_weak", "issued"}

// Key parts of an ISSUE line's etypes {rep=..., tkt=..., ses=...}.
const (
	partRep = iota
	partTkt
	partSes
	numParts
)

var partNames = [numParts]string{"reply", "ticket", "session"}

// counts are the log-derived counters shared by every source. Plain
// atomics indexed by small integers: the hot path does no map lookup,
// no label hashing and no allocation; Collect turns them into series.
type counts struct {
	statuses *boundedLabels
	methods  *boundedLabels
	ops      *boundedLabels

	requests  [numRequests][]atomic.Uint64 // [request][status]
	probe     [numRequests][]atomic.Uint64
	issued    [numRequests][numParts][numEtypeLabels]atomic.Uint64
	weak      [numRequests][numWeakKinds]atomic.Uint64
	preauth   [][numPreauthReasons]atomic.Uint64 // [method][reason]
	recovered []atomic.Uint64                    // [method]
	retrans   [numRetransmits]atomic.Uint64
	tooMany   atomic.Uint64
	s4u       [numS4U]atomic.Uint64
	kdcLife   [numLifecycle]atomic.Uint64
	kadmLife  [numLifecycle]atomic.Uint64
	kadmin    [][numKadminResults]atomic.Uint64 // [op][result]
	kadmAuth  atomic.Uint64
}

func newCounts() *counts {
	c := &counts{
		statuses: newBoundedLabels(knownStatuses, maxDynamicStatuses),
		methods:  newBoundedLabels(knownPreauthMethods, maxDynamicMethods),
		ops:      newBoundedLabels(knownKadminOps, maxDynamicOps),
	}
	for r := range c.requests {
		c.requests[r] = make([]atomic.Uint64, c.statuses.size())
		c.probe[r] = make([]atomic.Uint64, c.statuses.size())
	}
	c.preauth = make([][numPreauthReasons]atomic.Uint64, c.methods.size())
	c.recovered = make([]atomic.Uint64, c.methods.size())
	c.kadmin = make([][numKadminResults]atomic.Uint64, c.ops.size())
	return c
}

// statusIndex is the status label index of a request line.
func (c *counts) statusIndex(e *Event) int {
	if e.MorePreauth {
		return c.statuses.known[StatusMorePreauth]
	}
	return c.statuses.index(e.Status)
}
