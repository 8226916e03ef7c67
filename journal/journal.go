// Package journal follows KDC log entries in the systemd journal, where a
// stock Debian 12 KDC logs (no [logging] section in its kdc.conf, no
// syslog daemon): a supervised `journalctl --follow --output=json` child,
// as established log shippers do without cgo, restarted with back-off when
// it exits, its stderr in our log, killed with us. Only entries whose
// trusted fields, which journald records from the kernel and no client can
// set, say the KDC wrote them are read: the process name (_COMM) is one of
// the programs, its uid (_UID) root or one of the KDC's users, and its unit
// (_SYSTEMD_UNIT) one of the units where units are given; SYSLOG_IDENTIFIER,
// which any local user sets (logger -t krb5kdc), decides nothing. Entries
// are handed on with their identifier (SYSLOG_IDENTIFIER), pid and
// message; the journal cursor of the last entry handed on is kept in a
// CursorStore, so that a restart resumes right after it: nothing counted
// twice, nothing skipped.
// A cursor the journal no longer holds (rotated or vacuumed away) is noticed
// at start, counted and logged once, and reading resumes at the oldest entry
// still there, but never at an entry at or before the lost one (its time
// and boot are in the cursor). Every boot after the cursor is read.
// journald's own entries (_TRANSPORT=driver, _UID=0) saying it dropped
// messages of a KDC process under its rate limit (OBJECT_COMM, OBJECT_UID
// and OBJECT_SYSTEMD_UNIT as above) are counted (Stats.Suppressed), not
// handed on.
package journal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"golang.org/x/sys/unix"
)

// Options say which entries to follow.
type Options struct {
	// Programs are the daemons' process names (krb5kdc, kadmind, kpropd),
	// matched against _COMM: the kernel's name of the process, at most 15
	// bytes (a longer name is cut). At least one is required.
	Programs []string
	// UIDs are the users the daemons may run as besides root (uid 0,
	// always accepted): an entry of another _UID is not read.
	UIDs []uint32
	// Units, if any, must also hold the entry (_SYSTEMD_UNIT, such as
	// krb5-kdc.service).
	Units []string
	// Directory or Files read a journal other than the system's (journalctl
	// --directory/--file): containers, copies, tests.
	Directory string
	Files     []string
	// FromBeginning reads the whole journal when no cursor is saved;
	// otherwise reading starts at its end.
	FromBeginning bool
	// Journalctl is the program (default "journalctl" from PATH).
	Journalctl string
	// MaxBackoff bounds the wait before journalctl is started again after
	// it exited (default 30s; it starts at 100ms and doubles).
	MaxBackoff time.Duration
	// Coalesce is how long to wait after a read that brought less than a
	// pipe's worth, so that the next one brings more entries: one wake-up,
	// flush and cursor store per batch is what a journal entry costs most
	// (default 50ms; negative: none).
	Coalesce time.Duration
	// Flush, if set, runs after every batch of entries handed on, before
	// the cursor is stored and Stats.Entries counts them.
	Flush func()
}

// Entry is one journal entry. Its byte slices are valid only during the
// Handler call.
type Entry struct {
	Identifier []byte // SYSLOG_IDENTIFIER
	PID        int    // _PID, else SYSLOG_PID; 0 if neither
	Message    []byte
	Cursor     []byte
}

// Handler receives each entry in journal order.
type Handler func(e *Entry)

// CursorStore keeps the cursor of the last entry handed on, per key.
type CursorStore interface {
	Cursor(key string) string
	SetCursor(key, cursor string)
}

// Stats are the follower's counters, read by the caller's metrics.
type Stats struct {
	Entries    atomic.Uint64 // entries handed on
	Malformed  atomic.Uint64 // output lines of journalctl that were not an entry
	Starts     atomic.Uint64 // journalctl processes started
	Exits      atomic.Uint64 // journalctl processes that ended while we ran
	CursorLost atomic.Uint64 // saved cursors the journal no longer held
	// LostEntries is how many journal entries (of every program, an upper
	// bound for ours) lay between a lost cursor and the oldest entry left,
	// where the journal's sequence numbers tell.
	LostEntries atomic.Uint64
	// Suppressed is how many messages of the source's services journald
	// dropped under its rate limit, from its own "Suppressed N messages"
	// entries: lines lost before any reader saw them.
	Suppressed atomic.Uint64
	// ReadErrors counts journalctl outputs that could not be read; each
	// time the child is killed and started again.
	ReadErrors atomic.Uint64
	// Oversized counts entries skipped because journalctl wrote them
	// longer than maxEntry (it shows fields over 4 KiB as null, so only
	// a journalctl that does not would).
	Oversized atomic.Uint64
	Running   atomic.Bool // a journalctl is running now
}

// Follower follows one journal source.
type Follower struct {
	opts   Options
	key    string
	logger log.Logger
	store  CursorStore
	stats  *Stats
	h      Handler

	mu     sync.Mutex
	cursor string
	// startAt, when set, is where reading resumes (inclusive) after the
	// saved cursor was found lost: journalctl --after-cursor would skip
	// the entry next to a cursor it cannot find.
	startAt string
	fromEnd bool // the journal holds nothing at or after a lost cursor
	// machineID restricts the system journal to this machine's entries.
	machineID string
	// comms and uids are the _COMM and _UID values of the KDC's entries
	// (Programs cut to the kernel's length; root and UIDs).
	comms []string
	uids  []uint32
	// floor, once the saved cursor was found lost, is where that entry
	// was: an entry at or before it was read before the stop and is not
	// handed on again, wherever journalctl --cursor starts.
	floor position
}

// position is an entry's place in the journal, from its cursor: boot id
// (b=), monotonic (m=) and realtime (t=) timestamps in µs.
type position struct {
	set             bool
	boot            string
	monotonic, real uint64
}

// covers reports whether j is at or before p: written no later by the
// wall clock, or earlier in the same boot by the monotonic clock (which
// never goes back). Another boot's entry written later with its clock set
// back before p's time is taken as read: counting it twice is what must
// not happen.
func (p *position) covers(j *jsonEntry) bool {
	if !p.set {
		return false
	}
	if j.realtime != 0 && j.realtime <= p.real {
		return true
	}
	return j.monotonic != 0 && j.monotonic <= p.monotonic && string(j.boot) == p.boot
}

// positionOf reads a cursor's position; set is false if it holds none.
func positionOf(cur string) position {
	var p position
	haveT := false
	for _, part := range strings.Split(cur, ";") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "b":
			p.boot = v
		case "m":
			p.monotonic, _ = strconv.ParseUint(v, 16, 64)
		case "t":
			n, err := strconv.ParseUint(v, 16, 64)
			p.real, haveT = n, err == nil
		}
	}
	p.set = haveT || (p.boot != "" && p.monotonic != 0)
	return p
}

// fromKDC reports whether journald says a KDC process wrote an entry: comm,
// unit and uid are the entry's trusted fields (_COMM...) or, for its
// suppression entries, those of the process they are about (OBJECT_*).
func (f *Follower) fromKDC(comm, unit []byte, uid int64) bool {
	if uid < 0 || !slices.Contains(f.uids, uint32(uid)) {
		return false
	}
	if !slices.ContainsFunc(f.comms, func(c string) bool { return string(comm) == c }) {
		return false
	}
	return len(f.opts.Units) == 0 || slices.ContainsFunc(f.opts.Units, func(u string) bool { return string(unit) == u })
}

// commLen is the most of a process name the kernel keeps (TASK_COMM_LEN
// less its NUL): journald's _COMM is cut there.
const commLen = 15

// New returns a Follower; Run starts it. key names the source in store.
func New(opts Options, key string, logger log.Logger, store CursorStore, stats *Stats, h Handler) (*Follower, error) {
	if len(opts.Programs) == 0 {
		return nil, errors.New("journal: no program to match")
	}
	for _, s := range append(append([]string{}, opts.Programs...), opts.Units...) {
		if s == "" || strings.ContainsAny(s, "= \t\n+") {
			return nil, fmt.Errorf("journal: bad program or unit %q", s)
		}
	}
	if opts.Directory != "" && len(opts.Files) > 0 {
		return nil, errors.New("journal: directory and files are exclusive")
	}
	if opts.Journalctl == "" {
		opts.Journalctl = "journalctl"
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.Coalesce == 0 {
		opts.Coalesce = 50 * time.Millisecond
	}
	f := &Follower{opts: opts, key: key, logger: logger, store: store, stats: stats, h: h}
	for _, p := range opts.Programs {
		if c := p[:min(len(p), commLen)]; !slices.Contains(f.comms, c) {
			f.comms = append(f.comms, c)
		}
	}
	f.uids = []uint32{0}
	for _, u := range opts.UIDs {
		if !slices.Contains(f.uids, u) {
			f.uids = append(f.uids, u)
		}
	}
	if opts.Directory == "" && len(opts.Files) == 0 {
		f.machineID = localMachineID()
	}
	if store != nil {
		f.cursor = store.Cursor(key)
	}
	return f, nil
}

// Cursor returns the cursor of the last entry handed on ("" before any).
func (f *Follower) Cursor() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cursor
}

// source are the arguments that select the journal files.
func (f *Follower) source() []string {
	var a []string
	if f.opts.Directory != "" {
		a = append(a, "--directory="+f.opts.Directory)
	}
	for _, file := range f.opts.Files {
		a = append(a, "--file="+file)
	}
	return a
}

// DroppedMessageID is the MESSAGE_ID of journald's own entry for messages
// it dropped under its rate limit (SD_MESSAGE_JOURNAL_DROPPED): "Suppressed
// N messages from UNIT", with N_DROPPED=N and the OBJECT_* fields of the
// service's process.
const DroppedMessageID = "a596d6fe7bfa4994828e72309e95d61e"

// matches are journalctl's match arguments: one field's values are ORed,
// different fields ANDed, "+" ORs groups. Two groups: the KDC's entries
// (_COMM, _UID, _SYSTEMD_UNIT: fields journald sets from the kernel and the
// sender's cgroup, which it drops from what a client sends), and journald's
// own suppression entries (_TRANSPORT=driver and _UID=0, journald's, set
// the same way) about a KDC process: the rate limit is per unit, and the
// entry's OBJECT_* fields are the process that logged next, read by
// journald as it reads a sender's. read checks the same again. Reading
// the system journal with --merge (see followArgs), every group also
// matches this machine's id, as journalctl's default of local journals
// only would.
func (f *Follower) matches() []string {
	uids := make([]string, len(f.uids))
	for i, u := range f.uids {
		uids[i] = strconv.FormatUint(uint64(u), 10)
	}
	kdc := func(comm, uid, unit string) []string {
		return append(append(prefixed(comm, f.comms), prefixed(uid, uids)...), prefixed(unit, f.opts.Units)...)
	}
	groups := [][]string{
		kdc("_COMM=", "_UID=", "_SYSTEMD_UNIT="),
		append([]string{"MESSAGE_ID=" + DroppedMessageID, "_TRANSPORT=driver", "_UID=0"},
			kdc("OBJECT_COMM=", "OBJECT_UID=", "OBJECT_SYSTEMD_UNIT=")...),
	}
	var a []string
	for i, g := range groups {
		if i > 0 {
			a = append(a, "+")
		}
		if f.machineID != "" {
			a = append(a, "_MACHINE_ID="+f.machineID)
		}
		a = append(a, g...)
	}
	return a
}

func prefixed(p string, vals []string) []string {
	a := make([]string, len(vals))
	for i, v := range vals {
		a[i] = p + v
	}
	return a
}

// localMachineID is this machine's id (/etc/machine-id), "" if unreadable.
func localMachineID() string {
	b, err := os.ReadFile("/etc/machine-id")
	id := strings.TrimSpace(string(b))
	if err != nil || len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return ""
	}
	return id
}

// followArgs is the command line of the follow process for the current
// cursor. --merge: journalctl (systemd 250 on) takes --follow without it
// for "this boot only", so after a reboot --after-cursor=<entry of the
// boot before> would skip the rest of that boot and the first entry of
// this one; --merge reads every boot, as the cursor needs. No --all:
// journalctl writes a field over 4 KiB as null, which bounds an entry.
func (f *Follower) followArgs() []string {
	a := append(f.source(), "--follow", "--merge", "--output=json", "--no-pager", "--quiet",
		"--output-fields="+outputFields)
	f.mu.Lock()
	startAt, fromEnd := f.startAt, f.fromEnd
	f.mu.Unlock()
	switch cur := f.Cursor(); {
	case startAt != "":
		a = append(a, "--cursor="+startAt, "--no-tail")
	case fromEnd:
		a = append(a, "--lines=0")
	case cur != "":
		a = append(a, "--after-cursor="+cur, "--no-tail")
	case f.opts.FromBeginning:
		a = append(a, "--no-tail")
	default:
		a = append(a, "--lines=0")
	}
	return append(a, f.matches()...)
}

// outputFields are the fields journalctl writes of each entry (and always
// __CURSOR, __REALTIME_TIMESTAMP, __MONOTONIC_TIMESTAMP and _BOOT_ID).
const outputFields = "MESSAGE,_PID,SYSLOG_PID,SYSLOG_IDENTIFIER,MESSAGE_ID,_TRANSPORT,N_DROPPED," +
	"_COMM,_UID,_SYSTEMD_UNIT,OBJECT_COMM,OBJECT_UID,OBJECT_SYSTEMD_UNIT"

// Run follows the journal until ctx ends, starting journalctl again with
// back-off whenever it exits. It returns nil when ctx ends.
func (f *Follower) Run(ctx context.Context) error {
	if cur := f.Cursor(); cur != "" {
		f.checkCursor(ctx, cur)
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := f.runOnce(ctx)
		if ctx.Err() != nil {
			break
		}
		f.stats.Exits.Add(1)
		if time.Since(start) > time.Minute {
			backoff = 100 * time.Millisecond
		}
		level.Warn(f.logger).Log("msg", "journalctl exited; starting it again", "source", f.key, "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, f.opts.MaxBackoff)
	}
	return nil
}

// command prepares journalctl with args: killed when ctx ends or when this
// process dies (Pdeathsig), its stderr lines logged.
func (f *Follower) command(ctx context.Context, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, f.opts.Journalctl, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0", "LC_ALL=C")
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

func (f *Follower) runOnce(ctx context.Context) error {
	cmd := f.command(ctx, f.followArgs())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if sc, ok := stdout.(syscall.Conn); ok {
		// A pipe of 1 MiB (the unprivileged maximum) lets journalctl write
		// on while we coalesce; it stays 64 KiB if the kernel refuses.
		if raw, err := sc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) })
		}
	}
	f.stats.Starts.Add(1)
	f.stats.Running.Store(true)
	defer f.stats.Running.Store(false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			level.Warn(f.logger).Log("msg", "journalctl says", "source", f.key, "line", sc.Text())
		}
	}()
	rerr := f.read(stdout)
	if rerr != nil && ctx.Err() == nil {
		// journalctl may write on, unread: it goes, and Run starts
		// another at the cursor.
		f.stats.ReadErrors.Add(1)
		level.Error(f.logger).Log("msg", "cannot read journalctl's output; killing it to start it again", "source", f.key, "err", rerr)
		cmd.Process.Kill()
	}
	<-done
	werr := cmd.Wait()
	if rerr != nil {
		return rerr
	}
	return werr
}

// read hands on the entries journalctl writes, in batches: what one read
// of the pipe brings is handed on, then flushed and its cursor stored.
// Reads land in one buffer that only the unread rest of a line is moved
// to the front of, and the search for a line's end goes on where it left
// off, so an entry costs its length, however many reads it takes.
func (f *Follower) read(r io.Reader) error {
	buf := make([]byte, 0, readBuf)
	var e Entry
	var j jsonEntry
	searched := 0     // buf[:searched] holds no newline
	skipping := false // within an entry over maxEntry, dropped up to its end
	for {
		if cap(buf)-len(buf) < readChunk {
			buf = slices.Grow(buf, max(len(buf), readChunk))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		last := ""
		handed := uint64(0)
		off := 0
		for {
			nl := bytes.IndexByte(buf[searched:], '\n')
			if nl < 0 {
				searched = len(buf)
				break
			}
			end := searched + nl
			line := buf[off:end]
			off, searched = end+1, end+1
			switch {
			case skipping:
				skipping = false
			case len(line) == 0:
			case !j.parse(line) || j.cursor == nil:
				f.stats.Malformed.Add(1)
			case f.floor.covers(&j):
				last = string(j.cursor) // read before the stop
			case j.dropped:
				if j.uid == 0 && f.fromKDC(j.objComm, j.objUnit, j.objUID) {
					f.stats.Suppressed.Add(droppedCount(&j))
				}
				last = string(j.cursor)
			case !f.fromKDC(j.comm, j.unit, j.uid):
				last = string(j.cursor) // journalctl matched no such entry
			default:
				e = Entry{Identifier: j.ident, PID: j.pid, Message: j.message, Cursor: j.cursor}
				f.h(&e)
				last = string(j.cursor)
				handed++
			}
		}
		if last != "" {
			if handed > 0 && f.opts.Flush != nil {
				f.opts.Flush()
			}
			f.mu.Lock()
			f.cursor, f.startAt, f.fromEnd = last, "", false
			f.mu.Unlock()
			if f.store != nil {
				f.store.SetCursor(f.key, last)
			}
			f.stats.Entries.Add(handed)
		}
		// Keep the partial line at the start of the buffer.
		rest := copy(buf, buf[off:])
		buf, searched = buf[:rest], searched-off
		if rest > maxEntry {
			if !skipping {
				f.stats.Oversized.Add(1)
				level.Warn(f.logger).Log("msg", "skipped a journal entry longer than the limit", "source", f.key, "limit_bytes", maxEntry)
			}
			skipping, buf, searched = true, buf[:0], 0
		}
		if rest == 0 && cap(buf) > 4*readBuf {
			buf = make([]byte, 0, readBuf) // a long entry's buffer goes
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
		if n < coalesceBelow && f.opts.Coalesce > 0 {
			time.Sleep(f.opts.Coalesce)
		}
	}
}

// droppedCount is the N of journald's "Suppressed N messages" entry: its
// N_DROPPED field, else (systemd before 240 wrote none) the message's.
func droppedCount(j *jsonEntry) uint64 {
	if j.nDropped > 0 {
		return j.nDropped
	}
	var n uint64
	if _, err := fmt.Sscanf(string(j.message), "Suppressed %d messages", &n); err != nil {
		return 0
	}
	return n
}

// Reads of journalctl's output bring up to readChunk bytes into a buffer
// of readBuf at first; an entry longer than maxEntry is skipped (counted
// in Stats.Oversized). Without --all journalctl writes a field over 4 KiB
// as null: its entries stay far below.
const (
	readBuf   = 256 << 10
	readChunk = 128 << 10
	maxEntry  = 1 << 20
)

// pipeSize is the size asked for journalctl's stdout pipe; a read that
// brings less than coalesceBelow waits Options.Coalesce before the next.
const (
	pipeSize      = 1 << 20
	coalesceBelow = 64 << 10
)

// checkCursor asks the journal whether the saved cursor's entry is still
// there; if not, the entries between it and the oldest one left were never
// read: counted and said in one log line.
func (f *Follower) checkCursor(ctx context.Context, cur string) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := append(f.source(), "--cursor="+cur, "--output=json", "--no-pager", "--quiet",
		"--output-fields=__CURSOR", "--lines=all")
	cmd := f.command(cctx, args)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return
	}
	if err := cmd.Start(); err != nil {
		level.Warn(f.logger).Log("msg", "cannot check the saved journal cursor", "source", f.key, "err", err)
		return
	}
	line, _ := bufio.NewReader(out).ReadBytes('\n')
	cancel() // the first entry is all we need
	cmd.Wait()
	var j jsonEntry
	first := ""
	if j.parse(bytes.TrimSpace(line)) {
		first = string(j.cursor)
	}
	if first == cur {
		return
	}
	f.stats.CursorLost.Add(1)
	f.floor = positionOf(cur)
	f.mu.Lock()
	if first != "" {
		f.startAt = first
	} else {
		f.fromEnd = true
	}
	f.mu.Unlock()
	lost, known := cursorGap(cur, first)
	if known {
		f.stats.LostEntries.Add(lost)
	}
	level.Error(f.logger).Log("msg", "the journal no longer holds the last entry read (rotated or vacuumed while the exporter was stopped); entries written after it and before the oldest one left were not counted",
		"source", f.key, "journal_entries_lost", lostText(lost, known))
}

func lostText(n uint64, known bool) string {
	if !known {
		return "unknown"
	}
	return strconv.FormatUint(n, 10)
}

// cursorGap tells how many entries lay strictly between two cursors of the
// same journal (same seqnum id "s="), from their sequence numbers "i=".
func cursorGap(from, to string) (uint64, bool) {
	s1, i1, ok1 := cursorSeq(from)
	s2, i2, ok2 := cursorSeq(to)
	if !ok1 || !ok2 || s1 != s2 || i2 <= i1 {
		return 0, false
	}
	return i2 - i1 - 1, true
}

func cursorSeq(c string) (seqID string, seq uint64, ok bool) {
	var haveS, haveI bool
	for _, part := range strings.Split(c, ";") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "s":
			seqID, haveS = v, true
		case "i":
			n, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				return "", 0, false
			}
			seq, haveI = n, true
		}
	}
	return seqID, seq, haveS && haveI
}
