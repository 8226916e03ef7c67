package krb5profile

import "strings"

// TargetKind is where a [logging] spec sends a daemon's messages.
type TargetKind int

const (
	TargetFile    TargetKind = iota + 1 // FILE:path (appended) or FILE=path (truncated at start)
	TargetSyslog                        // SYSLOG[:severity[:facility]], and MIT's default
	TargetStderr                        // STDERR
	TargetConsole                       // CONSOLE
	TargetDevice                        // DEVICE=path
)

// LogTarget is one valid [logging] spec.
type LogTarget struct {
	Kind TargetKind
	Path string // FILE and DEVICE
	// From is the relation that named it; zero for MIT's default (no
	// valid spec: syslog).
	From Relation
}

// Logging returns where the daemon that reads [logging] entity sends its
// messages (krb5kdc: "kdc", kadmind: "admin_server"), as MIT's
// krb5_klog_init (lib/kadm5/logger.c) reads the profile: every spec of
// [logging] entity, or if there is none of [logging] default. A spec it
// cannot parse is skipped (bad lists them; MIT prints each to standard
// error); with no valid spec left the daemon logs to syslog.
func Logging(p *Profile, entity string) (targets []LogTarget, bad []Relation) {
	specs := p.Values("logging", entity)
	if len(specs) == 0 {
		specs = p.Values("logging", "default")
	}
	for _, r := range specs {
		t, ok := ParseLogSpec(r.Value)
		if !ok {
			bad = append(bad, r)
			continue
		}
		t.From = r
		targets = append(targets, t)
	}
	if len(targets) == 0 {
		targets = []LogTarget{{Kind: TargetSyslog}}
	}
	return targets, bad
}

// ParseLogSpec reads one spec as krb5_klog_init does: keywords in any
// case, the value trimmed of white space; "FILE:" or "FILE=" then the
// path; "SYSLOG" then optionally ":SEVERITY" (which must be one syslog
// knows) and ":FACILITY" (an unknown one is ignored); "STDERR";
// "CONSOLE"; "DEVICE=" then the path. A FILE target that the daemon
// cannot open is not valid for MIT either, but only the daemon can tell.
func ParseLogSpec(spec string) (LogTarget, bool) {
	s := strings.TrimSpace(spec)
	prefix := func(p string) bool { return len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) }
	switch {
	case prefix("FILE"):
		if len(s) > 5 && (s[4] == ':' || s[4] == '=') {
			return LogTarget{Kind: TargetFile, Path: s[5:]}, true
		}
	case prefix("SYSLOG"):
		if len(s) == 6 || s[6] != ':' {
			return LogTarget{Kind: TargetSyslog}, true
		}
		sev, _, _ := strings.Cut(s[7:], ":")
		switch strings.ToUpper(sev) {
		case "ERR", "EMERG", "ALERT", "CRIT", "WARNING", "NOTICE", "INFO", "DEBUG":
			return LogTarget{Kind: TargetSyslog}, true
		}
	case strings.EqualFold(s, "STDERR"):
		return LogTarget{Kind: TargetStderr}, true
	case strings.EqualFold(s, "CONSOLE"):
		return LogTarget{Kind: TargetConsole}, true
	case prefix("DEVICE"):
		if len(s) > 7 && s[6] == '=' {
			return LogTarget{Kind: TargetDevice, Path: s[7:]}, true
		}
	}
	return LogTarget{}, false
}
