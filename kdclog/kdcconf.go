package kdclog

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5profile"
)

// A log source with neither path nor journal follows what kdc.conf's
// [logging] says, so that one configuration fits Debian (no [logging]:
// syslog, which journald keeps) and RHEL (FILE:/var/log/krb5kdc.log in
// krb5.conf).

// kdcConfEntity is the [logging] tag a type's daemon reads; "" for
// kpropd, which logs through syslog whatever the profile says.
func kdcConfEntity(typ string) string {
	switch typ {
	case "kdc":
		return "kdc"
	case "kadmind":
		return "admin_server"
	}
	return ""
}

// hostJournal is the journal a daemon's syslog messages reach: opts'
// (tests), else the system journal where systemd runs, else none.
func (o *Config) hostJournal() *config.JournalSource {
	if o.HostJournal != nil {
		return o.HostJournal
	}
	if fi, err := os.Stat("/run/systemd/system"); err == nil && fi.IsDir() {
		return &config.JournalSource{}
	}
	return nil
}

// profilePaths are the profile files o names, or the distribution's.
func (o *Config) profilePaths() (kdc, krb5 []string) {
	k, k5 := o.KDCProfile, o.Krb5Profile
	if k == "" {
		k = krb5profile.DefaultKDCConf()
	}
	if k5 == "" {
		k5 = krb5profile.DefaultKrb5Conf
	}
	return krb5profile.SplitPaths(k), krb5profile.SplitPaths(k5)
}

// resolved is the outcome for one source that follows kdc.conf: the
// source to follow (ok), or why there is none and what fixes it.
type resolved struct {
	src config.LogSource
	ok  bool
	why string   // the choice, or why there is none, with the fix
	bad []string // specs MIT skips too
}

// fromKDCConf resolves src by the profile's [logging]; prof is nil when
// it could not be read (profErr). journal is the host's (nil: none).
func fromKDCConf(src config.LogSource, prof *krb5profile.Profile, profErr error, files string, journal *config.JournalSource) resolved {
	entity := kdcConfEntity(src.Type)
	var targets []krb5profile.LogTarget
	r := resolved{src: src}
	switch {
	case entity == "":
		targets = []krb5profile.LogTarget{{Kind: krb5profile.TargetSyslog}}
	case profErr != nil:
		r.why = fmt.Sprintf("cannot read the KDC's profile (%v): name the log with path: or journal:, or fix the file", profErr)
		return r
	default:
		var bad []krb5profile.Relation
		targets, bad = krb5profile.Logging(prof, entity)
		for _, b := range bad {
			r.bad = append(r.bad, b.String())
		}
	}
	said := func(t krb5profile.LogTarget) string {
		switch {
		case entity == "":
			return "kpropd logs through syslog"
		case t.From.Value == "":
			return fmt.Sprintf("no valid [logging] %s or default in %s: MIT logs to syslog", entity, files)
		}
		return fmt.Sprintf("[logging] %s = %s", entity, t.From)
	}
	for _, t := range targets {
		if t.Kind == krb5profile.TargetFile {
			r.ok, r.why = true, said(t)
			r.src.Path = t.Path
			return r
		}
	}
	for _, t := range targets {
		if t.Kind != krb5profile.TargetSyslog && t.Kind != krb5profile.TargetStderr {
			continue
		}
		where := "syslog, which journald keeps"
		if t.Kind == krb5profile.TargetStderr {
			where = "standard error, which journald keeps for a service run in the foreground"
		}
		if journal == nil {
			r.why = said(t) + ", and this host runs no systemd journal: name the file the syslog daemon writes in path:, or add " +
				fileFix(entity) + " and restart the daemon"
			return r
		}
		j := *journal
		r.ok, r.why = true, said(t)+": "+where
		r.src.Journal = &j
		return r
	}
	r.why = said(targets[0]) + ": nothing krb5-exporter can read; add " + fileFix(entity) + " and restart the daemon"
	return r
}

// fileFix is the kdc.conf line that gives a daemon a log file.
func fileFix(entity string) string {
	switch entity {
	case "kdc":
		return "kdc = FILE:/var/log/krb5kdc.log to [logging] in kdc.conf"
	case "admin_server":
		return "admin_server = FILE:/var/log/kadmind.log to [logging] in kdc.conf"
	}
	return "a syslog daemon that writes a file"
}

// resolveKDCConf turns every source that follows kdc.conf into what it
// says, reading the profile once. Two that resolve to one file (a
// [logging] default both daemons share) become one source of type "any":
// each line counted once. unresolved are those with nothing to follow.
func (o *Config) resolveKDCConf(logs []config.LogSource) (out []config.LogSource, notes, unresolved []resolved) {
	var prof *krb5profile.Profile
	var profErr error
	kdcPaths, krb5Paths := o.profilePaths()
	files := strings.Join(append(append([]string{}, kdcPaths...), krb5Paths...), ", ")
	loaded := false
	journal := o.hostJournal()
	byFile := map[string]int{}
	for _, l := range logs {
		if !l.FromKDCConf() {
			out = append(out, l)
			continue
		}
		if !loaded {
			prof, profErr = krb5profile.Load(kdcPaths, krb5Paths, nil)
			loaded = true
		}
		r := fromKDCConf(l, prof, profErr, files, journal)
		if !r.ok {
			unresolved = append(unresolved, r)
			continue
		}
		notes = append(notes, r)
		if r.src.Journal == nil {
			if i, dup := byFile[r.src.Path]; dup && out[i].Type != r.src.Type {
				out[i].Type = "any"
				out[i].ProbePrincipals = mergePrincipals(out[i].ProbePrincipals, r.src.ProbePrincipals)
				continue
			}
			byFile[r.src.Path] = len(out)
		}
		out = append(out, r.src)
	}
	return out, notes, unresolved
}

// mergePrincipals is the union of two probe_principals lists; nil (the
// modules' clients) stays nil only when both are.
func mergePrincipals(a, b []string) []string {
	if a == nil && b == nil {
		return nil
	}
	out := append([]string{}, a...)
	for _, p := range b {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
