package collector

import (
	"errors"
	"io/fs"
)

// /proc/PID/status is the only unprivileged source of a process's
// voluntary and nonvoluntary context switches, and the dearest file read
// per process (about 15 µs of kernel time: it formats some 55 lines). A
// KDC worker that has not been scheduled since the previous scrape has
// not switched either, so ctxCache re-reads status only when the
// process's /proc/PID/schedstat (about 1 µs: run time, run-queue wait and
// the number of times it was switched in) changed. Both files describe
// the same task, the thread group leader (status's ctxt lines are the
// leader's, not summed over threads), and a switch out always adds run
// time, so an unchanged schedstat means unchanged counts. Without
// schedstat (a kernel without CONFIG_SCHED_INFO, or a copied tree),
// status is read every time.
type ctxCache struct {
	m   map[procID]*ctxEntry
	gen uint64
	off bool // no schedstat on this system: always read status
}

type ctxEntry struct {
	sched       [64]byte // schedstat as last read
	n           int
	vol, nonvol uint64
	gen         uint64
}

// read returns the context switches of pr, re-reading its status only
// when its schedstat changed since the last call for the same process.
func (c *ctxCache) read(files *fileCache, pr *kdcProc) (vol, nonvol uint64, err error) {
	if c.off {
		return readParsed2(files, pr.file("status"), statusCtxt)
	}
	sched, serr := files.readSingle(pr.file("schedstat"))
	if serr != nil {
		vol, nonvol, err = readParsed2(files, pr.file("status"), statusCtxt)
		if err == nil && errors.Is(serr, fs.ErrNotExist) {
			c.off = true // the process is there, its schedstat is not
		}
		return vol, nonvol, err
	}
	if c.m == nil {
		c.m = map[procID]*ctxEntry{}
	}
	e := c.m[pr.id()]
	if e != nil && len(sched) <= len(e.sched) && string(sched) == string(e.sched[:e.n]) {
		e.gen = c.gen
		return e.vol, e.nonvol, nil
	}
	if e == nil {
		e = &ctxEntry{}
	}
	// Remember schedstat before status: a switch between the two reads
	// then shows as a change at the next scrape, never as one missed.
	e.n = copy(e.sched[:], sched)
	if len(sched) > len(e.sched) {
		e.n = 0 // never equal: always re-read
	}
	vol, nonvol, err = readParsed2(files, pr.file("status"), statusCtxt)
	if err != nil {
		delete(c.m, pr.id())
		return 0, 0, err
	}
	e.vol, e.nonvol, e.gen = vol, nonvol, c.gen
	c.m[pr.id()] = e
	return vol, nonvol, nil
}

// sweep forgets the processes not read since the previous sweep.
func (c *ctxCache) sweep() {
	for id, e := range c.m {
		if e.gen != c.gen {
			delete(c.m, id)
		}
	}
	c.gen++
}
