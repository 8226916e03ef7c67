package kdclog

// Recovery matching: whether an AS PREAUTH_FAILED was recovered by a
// later ISSUE is decided by the attack detector's pending-failure table
// (kdclog/attack, the rule in its package doc and docs/metrics.md), which
// the request counters read too: one account of every failure. What is
// left here is the method of each failure: a worker's verify failure
// line names it just before that worker's AS line. Worker processes share
// the file, and each logs its lines before it sends its answer, so a
// client's next request is logged after its failure whichever worker
// answers it. When more than len(pidMethods) workers are between a verify
// failure line and their AS line at once, the method of one may read
// "other" (the count is unaffected).

// pidMethod is the method of a worker's last verify failure line, waiting
// for that worker's AS line.
type pidMethod struct{ pid, method int }

// recoveries holds the method of each worker's last verify failure. It
// runs on the source's goroutine.
type recoveries struct {
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
	if r.inUse == 0 { // most verify failures: the last one's AS line took it
		r.pidMethods[0] = pidMethod{pid, method}
		r.inUse = 1
		return
	}
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
