package realm

import (
	"fmt"
	"os"
	"strings"
)

// kdcConf renders kdc.conf: everything under Dir, listening on loopback only.
func (r *Realm) kdcConf() string {
	var b strings.Builder
	keysalts := make([]string, len(r.Opts.Enctypes))
	for i, e := range r.Opts.Enctypes {
		keysalts[i] = e + ":normal"
	}
	fmt.Fprintf(&b, `[kdcdefaults]
	kdc_listen = 127.0.0.1:%[2]d
	kdc_tcp_listen = 127.0.0.1:%[2]d

[realms]
	%[1]s = {
		key_stash_file = %[3]s
		acl_file = %[4]s
		kdc_listen = 127.0.0.1:%[2]d
		kdc_tcp_listen = 127.0.0.1:%[2]d
		kadmind_listen = 127.0.0.1:%[5]d
		kadmind_port = %[5]d
		kpasswd_listen = 127.0.0.1:%[6]d
		kpasswd_port = %[6]d
		master_key_type = aes256-cts-hmac-sha1-96
		supported_enctypes = %[7]s
		default_principal_flags = +preauth
		max_life = 10h 0m 0s
		max_renewable_life = 7d 0h 0m 0s
		iprop_logfile = %[13]s
%[14]s	}

[dbmodules]
	%[1]s = {
		db_library = db2
		database_name = %[8]s
		disable_last_success = %[9]t
	}
%[15]s`, r.Realm, r.KDCPort, r.path("stash"), r.path("kadm5.acl"), r.KadmindPort, r.KpasswdPort,
		strings.Join(keysalts, " "), r.path("principal"), r.Opts.DisableLastSuccess,
		r.KDCLog, r.KadmindLog, r.path("krb5lib.log"), r.IpropLog, r.ipropConf(), r.loggingConf())
	return b.String()
}

// loggingConf is the [logging] section: files in Dir, or none at all with
// LogToSyslog (Debian's kdc.conf), where MIT's daemons log through syslog.
func (r *Realm) loggingConf() string {
	if r.Opts.LogToSyslog {
		return ""
	}
	return fmt.Sprintf("\n[logging]\n\tkdc = FILE:%s\n\tadmin_server = FILE:%s\n\tdefault = FILE:%s\n",
		r.KDCLog, r.KadmindLog, r.path("krb5lib.log"))
}

// ipropConf is the iprop part of the realm's kdc.conf section: on a
// primary kadmind serves iprop on loopback only; a replica polls it.
func (r *Realm) ipropConf() string {
	switch {
	case r.Replica != nil:
		// iprop_resync_timeout (MIT's default 5m) is how long kpropd waits
		// for a full resync it asked for before it asks again: a dump or
		// kprop that failed under load would otherwise stall the replica
		// for minutes. It also bounds the receipt and load of the dump.
		return fmt.Sprintf("\t\tiprop_enable = true\n\t\tiprop_port = %d\n\t\tiprop_replica_poll = %s\n\t\tiprop_resync_timeout = %s\n",
			r.IpropPort, r.Replica.Poll, ResyncTimeout)
	case r.IProp:
		return fmt.Sprintf("\t\tiprop_enable = true\n\t\tiprop_port = %[1]d\n\t\tiprop_listen = 127.0.0.1:%[1]d\n", r.IpropPort)
	}
	return ""
}

// krb5Conf renders the client profile; DNS is off so nothing leaves loopback.
func (r *Realm) krb5Conf() string {
	spake := ""
	if !r.Opts.NoSPAKE {
		spake = "\tspake_preauth_groups = edwards25519\n"
	}
	// The trusted realm: its KDC, its hosts, and the direct path between
	// the two realms both ways ("." : no realm in between).
	var peerRealm, peerDomain string
	if p := r.Peer; p != nil {
		peerRealm = fmt.Sprintf("\t%s = {\n\t\tkdc = 127.0.0.1:%d\n\t}\n", p.Realm, p.KDCPort)
		peerDomain = fmt.Sprintf("\t.%[1]s = %[2]s\n\t%[1]s = %[2]s\n\n[capaths]\n\t%[3]s = {\n\t\t%[2]s = .\n\t}\n\t%[2]s = {\n\t\t%[3]s = .\n\t}\n",
			p.Domain, p.Realm, r.Realm)
	}
	return fmt.Sprintf(`[libdefaults]
	default_realm = %[1]s
	dns_lookup_realm = false
	dns_lookup_kdc = false
	rdns = false
	dns_canonicalize_hostname = false
	default_ccache_name = FILE:%[2]s
	default_tkt_enctypes = %[6]s
	default_tgs_enctypes = %[6]s
	permitted_enctypes = %[6]s
%[7]s
[realms]
	%[1]s = {
		kdc = 127.0.0.1:%[3]d
%[9]s		admin_server = 127.0.0.1:%[4]d
		kpasswd_server = 127.0.0.1:%[5]d
	}
%[10]s
[domain_realm]
	.%[8]s = %[1]s
	%[8]s = %[1]s
%[11]s`, r.Realm, r.path("ccache"), r.KDCPort, r.KadmindPort, r.KpasswdPort,
		strings.Join(r.Opts.Enctypes, " "), spake, r.Domain, r.primaryKDC(), peerRealm, peerDomain)
}

// writeConfigs (re)writes both profiles and the kadmind ACL.
func (r *Realm) writeConfigs() error {
	acl := fmt.Sprintf("%s *\n", r.AdminPrincipal)
	if r.IProp {
		// The replica's kpropd asks for updates as kiprop/<host>.
		acl += fmt.Sprintf("kiprop/%s@%s p\n", r.host(), r.Realm)
	}
	files := map[string]string{
		r.KDCConf:           r.kdcConf(),
		r.Krb5Conf:          r.krb5Conf(),
		r.path("kadm5.acl"): acl,
	}
	if r.Replica != nil {
		// kpropd accepts full propagations from the primary's kprop only.
		files[r.Replica.ACL] = fmt.Sprintf("host/%s@%s\n", r.host(), r.Realm)
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			return fmt.Errorf("realm: %w", err)
		}
	}
	return nil
}
