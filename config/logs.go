package config

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
)

// LogSource is one KDC or kadmind log to follow and count. With neither
// path nor journal, the log is the one kdc.conf's [logging] names (the
// daemon resolves it: FILE: a file, syslog or nothing: the journal).
//
//	logs:
//	  - type: kdc                  # wherever kdc.conf says
//	  - path: /var/log/krb5kdc.log
//	    type: kdc
//	    start_at: end              # or beginning; only when no position is saved
//	    probe_principals: [krb5-exporter-probe@EXAMPLE.COM]
//	  - path: /var/log/kadmind.log
//	    type: kadmind
type LogSource struct {
	// Path is the file the daemon writes: a FILE: target of kdc.conf's
	// [logging] section, or a file a syslog daemon writes its lines to.
	// Empty, with no journal: what kdc.conf says (FromKDCConf).
	Path string `yaml:"path"`
	// Type selects whose lines are counted: "kdc" (krb5kdc), "kadmind"
	// (kadmind, plus kadmin.local/kdb5_util lines, which share its target)
	// or "any" (a syslog file both daemons write to); "kpropd" for the
	// lines of kpropd (a replica's syslog file, or kpropd -d output).
	Type string `yaml:"type"`
	// StartAt is where reading begins when no position is saved for the
	// file: "end" (the default: count only what happens from now on) or
	// "beginning".
	StartAt string `yaml:"start_at"`
	// ProbePrincipals are clients whose requests are synthetic (the
	// exporter's own probes). Their lines are counted only in
	// krb5_kdc_log_probe_requests_total, so they inflate no user rate and
	// trigger no error alert. "name@REALM", or "name" for any realm.
	// Absent: the clients of the configured modules (ProbePrincipalsOf).
	ProbePrincipals []string `yaml:"probe_principals"`
	// PollInterval is how often the file is checked for new lines when no
	// change notification arrives (default 1s; inotify wakes it sooner).
	PollInterval time.Duration `yaml:"poll_interval"`
	// RotateWait is how long a file that was renamed or deleted is still
	// read after its replacement appeared, for the lines the daemon writes
	// before it reopens its log (default 30s).
	RotateWait time.Duration `yaml:"rotate_wait"`
	// Journal reads the systemd journal instead of a file (no path): where
	// a KDC logs through syslog and no syslog daemon writes a file, as on a
	// stock Debian 12 KDC. start_at applies as for files.
	Journal *JournalSource `yaml:"journal"`
}

// JournalSource selects KDC entries of the systemd journal.
//
//	logs:
//	  - type: kdc
//	    journal: {}                        # process krb5kdc run by root, the system journal
//	  - type: kadmind
//	    journal: {units: [krb5-admin-server.service], user: kadmin}
//
// An entry is read only when journald's own record of its sender, which no
// client can set, says the KDC wrote it: its process name (_COMM) is one
// of the identifiers, its uid (_UID) root or user, and, where units are
// given, its unit (_SYSTEMD_UNIT) one of them. SYSLOG_IDENTIFIER, which
// any local user sets (logger -t krb5kdc), decides nothing.
type JournalSource struct {
	// Identifiers are the daemons' program names, matched against their
	// process name (_COMM, cut by the kernel at 15 bytes); absent, those
	// of the type: krb5kdc, kadmind, both for "any", kpropd.
	Identifiers []string `yaml:"identifiers"`
	// Units, if given, must also hold the entry (_SYSTEMD_UNIT).
	Units []string `yaml:"units"`
	// User is the account the daemons run as when not root: a name or a
	// uid. Entries of root's processes are always read.
	User string `yaml:"user"`
	// Directory or Files read a journal other than the system's
	// (journalctl --directory/--file): containers, copies, tests.
	Directory string   `yaml:"directory"`
	Files     []string `yaml:"files"`
}

// JournalPrograms are the process names (_COMM) a journal source reads.
func (l *LogSource) JournalPrograms() []string {
	switch {
	case l.Journal == nil:
		return nil
	case len(l.Journal.Identifiers) > 0:
		return l.Journal.Identifiers
	}
	return typePrograms(l.Type)
}

// JournalUIDs are the uids besides root whose entries a journal source
// reads: its user's.
func (l *LogSource) JournalUIDs() ([]uint32, error) {
	if l.Journal == nil || l.Journal.User == "" {
		return nil, nil
	}
	u := l.Journal.User
	if n, err := strconv.ParseUint(u, 10, 32); err == nil {
		return []uint32{uint32(n)}, nil
	}
	acct, err := user.Lookup(u)
	if err != nil {
		return nil, fmt.Errorf("user %q: %v", u, err)
	}
	n, err := strconv.ParseUint(acct.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q: uid %q: %v", u, acct.Uid, err)
	}
	return []uint32{uint32(n)}, nil
}

// typePrograms are the daemons whose lines a source of that type counts.
func typePrograms(typ string) []string {
	switch typ {
	case "kdc":
		return []string{"krb5kdc"}
	case "kadmind":
		return []string{"kadmind"}
	case "kpropd":
		return []string{"kpropd"}
	}
	return []string{"krb5kdc", "kadmind"}
}

// FromKDCConf reports a source that names neither a file nor the
// journal: the daemon follows what kdc.conf's [logging] says.
func (l *LogSource) FromKDCConf() bool { return l.Path == "" && l.Journal == nil }

// Key names the source in metrics (the path label) and in the position
// file: its path, or for the journal "journal:" and what it matches.
func (l *LogSource) Key() string {
	if l.Journal == nil {
		return l.Path
	}
	j := l.Journal
	where := "system"
	switch {
	case j.Directory != "":
		where = j.Directory
	case len(j.Files) > 0:
		where = strings.Join(j.Files, ",")
	}
	// What it was named by when units alone selected entries: a saved
	// cursor stays found.
	ids := j.Identifiers
	if len(ids) == 0 && len(j.Units) == 0 {
		ids = typePrograms(l.Type)
	}
	what := append(append([]string{}, ids...), j.Units...)
	return "journal:" + where + ":" + strings.Join(what, ",")
}

// Defaults of a LogSource's optional fields.
const (
	DefaultLogPollInterval = time.Second
	DefaultLogRotateWait   = 30 * time.Second
)

// Validate checks a log source on its own; Config.Validate checks that no
// path is listed twice.
func (l *LogSource) Validate() error {
	if l.Journal != nil {
		if l.Path != "" {
			return fieldErr("path and journal are exclusive", "journal")
		}
		if err := l.Journal.validate(); err != nil {
			return err
		}
		if _, err := l.JournalUIDs(); err != nil {
			return fieldErr(err.Error(), "journal", "user")
		}
	} else if l.Path != "" && strings.TrimSpace(l.Path) == "" {
		return fieldErr("path is blank", "path")
	} else if l.FromKDCConf() && l.Type == "any" {
		return fieldErr(`type "any" (one file both daemons write) needs a path`, "path")
	}
	if err := checkName("path", l.Path); err != nil {
		return fieldErr(err.Error(), "path")
	}
	switch l.Type {
	case "kdc", "kadmind", "any", "kpropd":
	case "":
		return fieldErr(`type is required: "kdc", "kadmind", "any" or "kpropd"`, "type")
	default:
		return fieldErr(fmt.Sprintf(`type %q: must be "kdc", "kadmind", "any" or "kpropd"`, l.Type), "type")
	}
	switch l.StartAt {
	case "", "end", "beginning":
	default:
		return fieldErr(fmt.Sprintf(`start_at %q: must be "end" or "beginning"`, l.StartAt), "start_at")
	}
	seen := map[string]bool{}
	for i, p := range l.ProbePrincipals {
		if err := checkPrincipal(p); err != nil {
			return fieldErr(err.Error(), "probe_principals", strconv.Itoa(i))
		}
		if seen[p] {
			return fieldErr(fmt.Sprintf("probe principal %q listed twice", p), "probe_principals", strconv.Itoa(i))
		}
		seen[p] = true
	}
	if l.PollInterval != 0 && (l.PollInterval < 10*time.Millisecond || l.PollInterval > time.Minute) {
		return fieldErr(fmt.Sprintf("poll_interval %s: must be between 10ms and 1m", l.PollInterval), "poll_interval")
	}
	if l.RotateWait < 0 || l.RotateWait > time.Hour {
		return fieldErr(fmt.Sprintf("rotate_wait %s: must be between 0 and 1h", l.RotateWait), "rotate_wait")
	}
	return nil
}

func (j *JournalSource) validate() error {
	for i, v := range append(append([]string{}, j.Identifiers...), j.Units...) {
		if v == "" || strings.ContainsAny(v, "= +") || checkName("", v) != nil {
			field := "identifiers"
			if i >= len(j.Identifiers) {
				field, i = "units", i-len(j.Identifiers)
			}
			return fieldErr(fmt.Sprintf("%q is not an identifier or unit name", v), "journal", field, strconv.Itoa(i))
		}
	}
	if err := checkName("directory", j.Directory); err != nil {
		return fieldErr(err.Error(), "journal", "directory")
	}
	for i, f := range j.Files {
		if err := checkName("file", f); err != nil {
			return fieldErr(err.Error(), "journal", "files", strconv.Itoa(i))
		}
	}
	if j.Directory != "" && len(j.Files) > 0 {
		return fieldErr("directory and files are exclusive", "journal", "files")
	}
	return nil
}

// checkPrincipal accepts what the KDC prints for a principal: no spaces or
// control characters, a non-empty name before an optional @REALM.
func checkPrincipal(p string) error {
	if p == "" {
		return fmt.Errorf("empty principal")
	}
	for _, c := range p {
		if c <= ' ' || c == 0x7f {
			return fmt.Errorf("principal %q contains a space or control character", p)
		}
	}
	at := strings.LastIndexByte(p, '@')
	if at == 0 || at == len(p)-1 {
		return fmt.Errorf("principal %q: want name@REALM or name", p)
	}
	return nil
}

// FromBeginning reports whether reading starts at the beginning of a file
// that has no saved position.
func (l *LogSource) FromBeginning() bool { return l.StartAt == "beginning" }

// Poll returns PollInterval or its default.
func (l *LogSource) Poll() time.Duration {
	if l.PollInterval == 0 {
		return DefaultLogPollInterval
	}
	return l.PollInterval
}

// RotationWait returns RotateWait or its default.
func (l *LogSource) RotationWait() time.Duration {
	if l.RotateWait == 0 {
		return DefaultLogRotateWait
	}
	return l.RotateWait
}

// checkLogFiles refuses a path that names something other than a regular
// file (a FIFO is never read to an end: the tailer would wait on it), and
// one file listed twice, under any spelling
// (/var/log/kdc.log, /var/log/../log/kdc.log, a symbolic link, a hard
// link): its lines would be counted twice. Files that do not exist yet
// are compared by their cleaned absolute paths.
func checkLogFiles(logs []LogSource) error {
	type fileID struct{ dev, ino uint64 }
	names := map[string]int{}
	ids := map[fileID]int{}
	keys := map[string]int{}
	for i, l := range logs {
		if l.FromKDCConf() {
			continue // resolved when applied, and checked then
		}
		if l.Journal != nil {
			if j, dup := keys[l.Key()]; dup {
				return fieldErr(fmt.Sprintf("journal source listed twice (logs[%d]): its entries would be counted twice", j), "logs", strconv.Itoa(i), "journal")
			}
			keys[l.Key()] = i
			continue
		}
		name, err := filepath.Abs(l.Path)
		if err != nil {
			name = filepath.Clean(l.Path)
		}
		if r, err := filepath.EvalSymlinks(name); err == nil {
			name = r
		}
		j, dup := names[name]
		fi, err := os.Stat(name) // a stat: no open, no wait on a FIFO
		if err == nil {
			if err := safefile.CheckRegular(fi.Mode()); err != nil {
				return fieldErr(fmt.Sprintf("log file %q: %v; logs are regular files", l.Path, err), "logs", strconv.Itoa(i), "path")
			}
		}
		if err == nil && !dup {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				id := fileID{uint64(st.Dev), st.Ino}
				j, dup = ids[id]
				ids[id] = i
			}
		}
		if dup {
			return fieldErr(fmt.Sprintf("log file %q listed twice (logs[%d] is %q): its lines would be counted twice", l.Path, j, logs[j].Path), "logs", strconv.Itoa(i), "path")
		}
		names[name] = i
	}
	return nil
}

// ProbeClients returns the client of every module as name@REALM, sorted.
func (c *Config) ProbeClients() []string {
	var out []string
	for _, m := range c.Modules {
		p := m.Client
		if !strings.Contains(p, "@") {
			p += "@" + m.Realm
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// ProbePrincipalsOf returns the probe principals of l: its own list, or
// without one the clients of the modules, so that the exporter's own
// logins never count as user traffic. missing lists the modules' clients
// an explicit list leaves out (their logins count as user traffic).
func (c *Config) ProbePrincipalsOf(l *LogSource) (principals, missing []string) {
	clients := c.ProbeClients()
	if l.ProbePrincipals == nil {
		return clients, nil
	}
	for _, cl := range clients {
		name, _, _ := strings.Cut(cl, "@")
		if !slices.Contains(l.ProbePrincipals, cl) && !slices.Contains(l.ProbePrincipals, name) {
			missing = append(missing, cl)
		}
	}
	return l.ProbePrincipals, missing
}
