package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"text/template"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// realmConfigTmpl is the exporter configuration for a harness realm: the
// probe principal over UDP and TCP (and its KDC proxy, if any), and the
// daemons' logs. It is text
// (not marshalled structs) so that it reads like a hand-written example,
// and it is parsed back before it is written, so it is always valid.
var realmConfigTmpl = template.Must(template.New("").Parse(`# krb5-exporter configuration for the throwaway realm {{.Realm}} in {{.Dir}}
# (written by krb5-exporter realm up --exporter-config).
modules:
  {{.Module}}:
    realm: {{.Realm}}
    client: {{.ProbePrincipal}}
    keytab: {{.ProbeKeytab}}
    service: {{.Service}}
    transport: udp
    timeout: 5s
    allowed_kdcs: ["{{.KDCAddr}}"]   # what /probe may use this module against
  {{.Module}}_tcp:
    realm: {{.Realm}}
    client: {{.ProbePrincipal}}
    keytab: {{.ProbeKeytab}}
    service: {{.Service}}
    transport: tcp
    timeout: 5s
    allowed_kdcs: ["{{.KDCAddr}}"]
{{- if .ProxyURL}}
  {{.Module}}_https:
    # through the realm's KDC proxy (python3-kdcproxy under gunicorn)
    realm: {{.Realm}}
    client: {{.ProbePrincipal}}
    keytab: {{.ProbeKeytab}}
    service: {{.Service}}
    transport: https
    timeout: 5s
    proxy_ca_file: {{.ProxyCA}}
    allowed_proxy_urls: ["{{.ProxyURL}}"]   # what /probe may use this module against
{{- end}}
{{- if .KpasswdAddr}}
  {{.Module}}_kpasswd:               # kadmind's password-change service
    prober: kpasswd
    realm: {{.Realm}}
    client: {{.ProbePrincipal}}
    keytab: {{.ProbeKeytab}}
    kdc: {{.KDCAddr}}                 # where it logs in for kadmin/changepw
    transport: udp
    timeout: 5s
    allowed_kdcs: ["{{.KpasswdAddr}}"]
  {{.Module}}_kadmin:                # kadmind's admin RPC: no keys
    prober: kadmin
    timeout: 5s
    allowed_kdcs: ["{{.KadmindAddr}}"]
{{- end}}
{{- if .Trust}}
  # the trusted realm {{.Trust}}'s own login, and the trust: a login in
  # {{.Realm}}, the cross-realm TGT krbtgt/{{.Trust}}@{{.Realm}} from its KDC, the
  # service ticket from {{.Trust}}'s KDC with it
  {{.TrustModule}}:
    realm: {{.Trust}}
    client: {{.TrustProbePrincipal}}
    keytab: {{.TrustProbeKeytab}}
    service: {{.TrustService}}
    transport: udp
    timeout: 5s
    allowed_kdcs: ["{{.TrustKDCAddr}}"]
  {{.Module}}_to_{{.TrustModule}}:
    realm: {{.Realm}}
    client: {{.ProbePrincipal}}
    keytab: {{.ProbeKeytab}}
    service: {{.TrustService}}
    realm_kdcs: {"{{.Trust}}": ["{{.TrustKDCAddr}}"]}
    transport: udp
    timeout: 5s
    allowed_kdcs: ["{{.KDCAddr}}", "{{.TrustKDCAddr}}"]   # /probe contacts both
{{- end}}

probes:
  - name: {{.Module}}-udp
    address: {{.KDCAddr}}
    module: {{.Module}}
    interval: 15s
  - name: {{.Module}}-tcp
    address: {{.KDCAddr}}
    module: {{.Module}}_tcp
    interval: 15s
{{- if .ProxyURL}}
  - name: {{.Module}}-https
    address: {{.ProxyURL}}
    module: {{.Module}}_https
    interval: 15s
{{- end}}
{{- if .KpasswdAddr}}
  - name: {{.Module}}-kpasswd
    address: {{.KpasswdAddr}}
    module: {{.Module}}_kpasswd
    interval: 15s
  - name: {{.Module}}-kadmin
    address: {{.KadmindAddr}}
    module: {{.Module}}_kadmin
    interval: 15s
{{- end}}
{{- if .Trust}}
  - name: {{.TrustModule}}-udp
    address: {{.TrustKDCAddr}}
    module: {{.TrustModule}}
    interval: 15s
  - name: {{.Module}}-to-{{.TrustModule}}
    address: {{.KDCAddr}}
    module: {{.Module}}_to_{{.TrustModule}}
    interval: 15s
{{- end}}

logs:
{{- if .JournalDir}}
  # the daemons log through syslog into the journal in {{.JournalDir}}
  # (their entries count as the user running them: root, or user)
  - type: kdc
    journal: {directory: {{.JournalDir}}{{.JournalUser}}}
    start_at: beginning
    probe_principals: [{{.ProbePrincipal}}{{if .Trust}}, {{.TrustProbePrincipal}}{{end}}]
{{- if .KadmindLog}}
  - type: kadmind
    journal: {directory: {{.JournalDir}}{{.JournalUser}}}
    start_at: beginning
{{- end}}
{{- if .KpropdLog}}
  - type: kpropd
    journal: {directory: {{.JournalDir}}{{.JournalUser}}}
    start_at: beginning
{{- end}}
{{- else}}
  - path: {{.KDCLog}}
    type: kdc
    start_at: beginning
    probe_principals: [{{.ProbePrincipal}}{{if .Trust}}, {{.TrustProbePrincipal}}{{end}}]
{{- if .KadmindLog}}
  - path: {{.KadmindLog}}
    type: kadmind
    start_at: beginning
{{- end}}
{{- if .KpropdLog}}
  - path: {{.KpropdLog}}
    type: kpropd
    start_at: beginning
{{- end}}
{{- end}}
{{- if .Trust}}
  - path: {{.TrustKDCLog}}
    type: kdc
    start_at: beginning
    probe_principals: [{{.TrustProbePrincipal}}, {{.ProbePrincipal}}]
{{- end}}
`))

// moduleName is a realm's name as a module name: perf_test for PERF.TEST.
func moduleName(realm string) string {
	return strings.ToLower(strings.NewReplacer(".", "_", "-", "_").Replace(realm))
}

// journalUser is the journal sources' user: option for daemons run by
// uid (journal entries of root's count without it).
func journalUser(uid int) string {
	if uid == 0 {
		return ""
	}
	return fmt.Sprintf(", user: \"%d\"", uid)
}

// writeRealmConfig writes the exporter configuration for r to path.
func writeRealmConfig(r *realm.Realm, path string) error {
	var b strings.Builder
	service := ""
	if r.Opts.Services > 0 {
		service = r.Service(1)
	}
	kadmindLog, kpropdLog := r.KadmindLog, ""
	kpasswdAddr, kadmindAddr := "", ""
	if r.Replica != nil {
		kadmindLog, kpropdLog = "", r.Replica.Log // a replica runs kpropd, no kadmind
	} else if !r.Opts.NoKadmind {
		kpasswdAddr, kadmindAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.KpasswdPort)), r.KadmindAddr
	}
	proxyURL, proxyCA := "", ""
	if p := r.KDCProxy; p != nil {
		proxyURL, proxyCA = p.URL, p.CA
	}
	vars := map[string]string{
		"Realm": r.Realm, "Dir": r.Dir, "Module": moduleName(r.Realm),
		"ProbePrincipal": r.ProbePrincipal, "ProbeKeytab": r.ProbeKeytab, "Service": service,
		"KDCAddr": r.KDCAddr, "KDCLog": r.KDCLog, "KadmindLog": kadmindLog, "KpropdLog": kpropdLog,
		"JournalDir": r.JournalDir, "JournalUser": journalUser(os.Getuid()),
		"ProxyURL": proxyURL, "ProxyCA": proxyCA,
		"KpasswdAddr": kpasswdAddr, "KadmindAddr": kadmindAddr,
	}
	if t := r.Trusted; t != nil {
		vars["Trust"], vars["TrustModule"], vars["TrustKDCAddr"], vars["TrustKDCLog"] = t.Realm, moduleName(t.Realm), t.KDCAddr, t.KDCLog
		vars["TrustProbePrincipal"], vars["TrustProbeKeytab"], vars["TrustService"] = t.ProbePrincipal, t.ProbeKeytab, t.Service(1)
	}
	err := realmConfigTmpl.Execute(&b, vars)
	if err != nil {
		return err
	}
	text := b.String()
	if service == "" {
		text = strings.ReplaceAll(text, "    service: \n", "")
	}
	if _, err := config.Parse([]byte(text), path); err != nil {
		return fmt.Errorf("generated configuration is invalid (a bug): %w", err)
	}
	// It names the probe keytab: readable by its owner only, and written
	// without following a link planted at path.
	return safefile.Write(path, []byte(text), 0o600)
}
