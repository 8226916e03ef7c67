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

// tally is one set of the log-derived counters, indexed by small
// integers so that counting does no map lookup, no label hashing and no
// allocation. The shared tally holds atomics that Collect reads; each
// source adds into a plain tally of its own and flushes it into the
// shared one after every batch of lines, so a line costs no atomic
// instruction either.
type tally[T any] struct {
	requests  [numRequests][]T // [request][status]
	probe     [numRequests][]T
	issued    [numRequests][numParts][numEtypeLabels]T
	weak      [numRequests][numWeakKinds]T
	preauth   [][numPreauthReasons]T // [method][reason]
	recovered []T                    // [method]
	retrans   [numRetransmits]T
	tooMany   [1]T
	s4u       [numS4U]T
	kdcLife   [numLifecycle]T
	kadmLife  [numLifecycle]T
	kadmin    [][numKadminResults]T // [op][result]
	kadmAuth  [1]T
}

func newTally[T any](c *counts) *tally[T] {
	t := &tally[T]{}
	for r := range t.requests {
		t.requests[r] = make([]T, c.statuses.size())
		t.probe[r] = make([]T, c.statuses.size())
	}
	t.preauth = make([][numPreauthReasons]T, c.methods.size())
	t.recovered = make([]T, c.methods.size())
	t.kadmin = make([][numKadminResults]T, c.ops.size())
	return t
}

// counts are the label sets and the shared tally.
type counts struct {
	statuses *boundedLabels
	methods  *boundedLabels
	ops      *boundedLabels
	*tally[atomic.Uint64]
	kpropd  kpropdCounts    // kpropd.go
	workers workerCounts    // workers.go
	attack  *attackState    // attacksignals.go
	refused *refusedClients // refused.go
	// badEtype is BAD_ENCRYPTION_TYPE's status index.
	badEtype int
}

func newCounts() *counts {
	c := &counts{
		statuses: newBoundedLabels(knownStatuses, maxDynamicStatuses, statusChar),
		methods:  newBoundedLabels(knownPreauthMethods, maxDynamicMethods, identChar),
		ops:      newBoundedLabels(knownKadminOps, maxDynamicOps, identChar),
		attack:   newAttackState(),
		refused:  newRefusedClients(),
	}
	c.badEtype = c.statuses.known["BAD_ENCRYPTION_TYPE"]
	c.tally = newTally[atomic.Uint64](c)
	return c
}

// add moves src into dst and zeroes src.
func add(dst []atomic.Uint64, src []uint64) {
	for i, v := range src {
		if v != 0 {
			dst[i].Add(v)
			src[i] = 0
		}
	}
}

// flush moves every count of src into the shared tally dst.
func flush(dst *tally[atomic.Uint64], src *tally[uint64]) {
	for r := range src.requests {
		add(dst.requests[r], src.requests[r])
		add(dst.probe[r], src.probe[r])
		for p := range src.issued[r] {
			add(dst.issued[r][p][:], src.issued[r][p][:])
		}
		add(dst.weak[r][:], src.weak[r][:])
	}
	for m := range src.preauth {
		add(dst.preauth[m][:], src.preauth[m][:])
	}
	add(dst.recovered, src.recovered)
	add(dst.retrans[:], src.retrans[:])
	add(dst.tooMany[:], src.tooMany[:])
	add(dst.s4u[:], src.s4u[:])
	add(dst.kdcLife[:], src.kdcLife[:])
	add(dst.kadmLife[:], src.kadmLife[:])
	for o := range src.kadmin {
		add(dst.kadmin[o][:], src.kadmin[o][:])
	}
	add(dst.kadmAuth[:], src.kadmAuth[:])
}

// statusIndex is the status label index of a request line. The common
// statuses are matched without hashing.
func (c *counts) statusIndex(e *Event) int {
	if e.issue {
		return idxIssue
	}
	if e.MorePreauth {
		return idxMorePreauth
	}
	switch string(e.Status) {
	case "ISSUE":
		return idxIssue
	case "NEEDED_PREAUTH":
		return idxNeededPreauth
	case "PREAUTH_FAILED":
		return idxPreauthFailed
	case "CLIENT_NOT_FOUND":
		return idxClientNotFound
	case "LOOKING_UP_SERVER":
		return idxLookingUpSrv
	}
	return c.statuses.index(e.Status)
}

// methodIndex is the preauth method label index; the two methods of
// almost every login are matched without hashing.
func (c *counts) methodIndex(m []byte) int {
	switch string(m) {
	case "encrypted_timestamp":
		return 0
	case "spake":
		return 1
	}
	return c.methods.index(m)
}
