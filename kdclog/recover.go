package kdclog

// Recovery matching: an AS PREAUTH_FAILED counts as recovered when an
// ISSUE for the same client and address follows within recoverWindow AS
// lines of the same file (docs/metrics.md). Every failure so followed
// counts, however many the client had: two kinit runs of one user that
// both fall back from a SPAKE group the KDC lacks log F, F, ISSUE, ISSUE
// (or F, ISSUE, F, ISSUE), and with krb5kdc -w N the two may be answered
// by different workers: both failures recovered. (The first version kept
// one failure per client and address, so the second F overwrote the first
// and one of the pair went unmatched: 15 of 920 fallbacks under -w 2.)
//
// Worker processes share the file, and each logs its lines before it
// sends its answer, so a client's next request is logged after its
// failure whichever worker answers it. The matching is exact unless:
//   - more than maxPendingPerClient failures of one client and address
//     wait for an ISSUE at once (the oldest is dropped: it stays
//     unrecovered);
//   - clients with failures waiting hash to the same two of the
//     pendingSlots slots as two others with failures waiting (the one
//     whose newest failure is oldest is dropped): with 1,024 slots, rare
//     below hundreds of failing clients within one window;
//   - more than len(pidMethods) workers are between a verify failure line
//     and their AS line at once: then the method of one may read "other"
//     (the count is unaffected).

// maxPendingPerClient bounds the failures of one client and address that
// wait for an ISSUE.
const maxPendingPerClient = 4

// pendingSlots is the size of the table of clients with failures waiting.
const pendingSlots = 1024

// pendingClient is one client and address with failures waiting for an
// ISSUE: the AS line number and method of each, oldest first.
type pendingClient struct {
	key     uint64
	n       uint8
	methods [maxPendingPerClient]uint8
	seqs    [maxPendingPerClient]uint64
}

// newest is the AS line number of the client's last failure (0: none).
func (p *pendingClient) newest() uint64 {
	if p.n == 0 {
		return 0
	}
	return p.seqs[p.n-1]
}

// pidMethod is the method of a worker's last verify failure line, waiting
// for that worker's AS line.
type pidMethod struct{ pid, method int }

// recoveries matches a source's preauth failures with later ISSUEs. It
// runs on the source's goroutine.
type recoveries struct {
	pending    [pendingSlots]pendingClient
	pidMethods [16]pidMethod
	inUse      int // entries of pidMethods with a pid: none for most AS lines
}

func (r *recoveries) init() {
	for i := range r.pidMethods {
		r.pidMethods[i].pid = -1
	}
}

// verifyFailure notes the method of a verify failure line of pid.
func (r *recoveries) verifyFailure(pid, method int) {
	free := -1
	for i := range r.pidMethods {
		switch r.pidMethods[i].pid {
		case pid:
			r.pidMethods[i].method = method
			return
		case -1:
			if free < 0 {
				free = i
			}
		}
	}
	if free < 0 {
		free = int(uint(pid) % uint(len(r.pidMethods)))
	} else {
		r.inUse++
	}
	r.pidMethods[free] = pidMethod{pid, method}
}

// takeMethod returns the method of pid's verify failure line before its
// AS line, and forgets it: it belongs to that line alone.
func (r *recoveries) takeMethod(pid int) (int, bool) {
	i := r.find(pid)
	if i < 0 {
		return 0, false
	}
	r.pidMethods[i].pid = -1
	r.inUse--
	return r.pidMethods[i].method, true
}

// peekMethod is takeMethod without forgetting: the method of pid's verify
// failure line, for a reader of the AS line before countRequest takes it.
func (r *recoveries) peekMethod(pid int) (int, bool) {
	if i := r.find(pid); i >= 0 {
		return r.pidMethods[i].method, true
	}
	return 0, false
}

// find returns the entry of pidMethods holding pid, or -1.
func (r *recoveries) find(pid int) int {
	if r.inUse == 0 { // most AS lines: no verify failure waits
		return -1
	}
	for i := range r.pidMethods {
		if r.pidMethods[i].pid == pid {
			return i
		}
	}
	return -1
}

// slots returns the two slots a key may use.
func slots(key uint64) (int, int) {
	i := int(key % pendingSlots)
	return i, i ^ 1
}

// failure notes a PREAUTH_FAILED of key at AS line seq.
func (r *recoveries) failure(key, seq uint64, method int) {
	a, b := slots(key)
	p := &r.pending[a]
	switch {
	case p.key == key && p.n > 0:
	case r.pending[b].key == key && r.pending[b].n > 0:
		p = &r.pending[b]
	default:
		// A free or expired slot, else the one whose newest failure is
		// oldest.
		pa, pb := &r.pending[a], &r.pending[b]
		if !r.live(pa, seq) {
			p = pa
		} else if !r.live(pb, seq) || pb.newest() < pa.newest() {
			p = pb
		}
		*p = pendingClient{key: key}
	}
	if p.n == maxPendingPerClient {
		copy(p.methods[:], p.methods[1:])
		copy(p.seqs[:], p.seqs[1:])
		p.n--
	}
	// A method index fits a uint8: there are at most the known methods,
	// maxDynamicMethods others and other.
	p.methods[p.n], p.seqs[p.n] = uint8(method), seq
	p.n++
}

// live reports whether p has a failure still within the window at seq.
func (r *recoveries) live(p *pendingClient, seq uint64) bool {
	return p.n > 0 && seq-p.newest() <= recoverWindow
}

// issue counts, for an ISSUE of key at AS line seq, every failure of key
// within the window as recovered, by method, and forgets key's failures.
func (r *recoveries) issue(key, seq uint64, recovered []uint64) {
	a, b := slots(key)
	for _, i := range [2]int{a, b} {
		p := &r.pending[i]
		if p.key != key || p.n == 0 {
			continue
		}
		for j := range p.n {
			if seq-p.seqs[j] <= recoverWindow {
				recovered[p.methods[j]]++
			}
		}
		*p = pendingClient{}
	}
}
