#!/usr/bin/env bash
# Captures what a real MIT kpropd sends to syslog, for the kpropd parser's
# fixture: a harness primary and replica (krb5-exporter realm up
# --replica-of), the replica's kpropd restarted without -d inside a
# private mount namespace whose /dev/log is a socket this script reads
# (no syslog daemon, nothing of the host's logging touched; needs root).
# It walks the replica through incremental updates, the primary's kadmind
# going away and coming back, iprop permission withdrawn (kpropd gives
# up), and a reset update log (a full resync). The datagrams are written
# as rsyslog's traditional file format writes them: "<PRI>" dropped, the
# host name "kdc2" inserted after the time stamp.
#
#   kdclog/testdata/kpropd/capture-syslog.sh ./krb5-exporter kdclog/testdata/kpropd/mit-1.20-kpropd-syslog.log
set -euo pipefail
bin=$(realpath "$1")
out=$(realpath -m "$2")
d=$(mktemp -d)
cleanup() {
	[ -f "$d/kpropd.pid" ] && kill "$(cat "$d/kpropd.pid")" 2>/dev/null || true
	[ -n "${rcv:-}" ] && kill "$rcv" 2>/dev/null || true
	"$bin" realm down --dir "$d/r" >/dev/null 2>&1 || true
	"$bin" realm down --dir "$d/p" >/dev/null 2>&1 || true
	rm -rf "$d"
}
trap cleanup EXIT

"$bin" realm up --dir "$d/p" --users=2 --services=1 --fillers=-1 >/dev/null
"$bin" realm up --dir "$d/r" --replica-of "$d/p" >/dev/null
# await COUNT PATTERN: wait (at most 60 s) for COUNT datagrams matching.
await() {
	for _ in $(seq 600); do
		[ "$(grep -c -- "$2" "$d/datagrams" 2>/dev/null || true)" -ge "$1" ] && return 0
		sleep 0.1
	done
	echo "capture: no $1 x '$2' in 60s" >&2
	cat "$d/datagrams" >&2 || true
	exit 1
}
pidof_file() { cat "$1" 2>/dev/null || true; }
stop() { # pid: TERM and wait for it to go
	kill "$1"
	for _ in $(seq 200); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
}

stop "$(pidof_file "$d/r/kpropd.pid")"
python3 - "$d/log" "$d/datagrams" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "ab", buffering=0) as f:
    while True:
        f.write(s.recv(65536).rstrip(b"\n\0") + b"\n")
PY
rcv=$!
for _ in $(seq 100); do [ -S "$d/log" ] && break; sleep 0.05; done

port=$(jq -r .kprop_port "$d/r/realm.json")
start_kpropd() {
	# shellcheck disable=SC2016
	KRB5_CONFIG=$d/r/krb5.conf KRB5_KDC_PROFILE=$d/r/kdc.conf unshare -m sh -c '
		d=$1; shift
		mount --make-rprivate / && mkdir -p "$d/olddev" && mount --bind /dev "$d/olddev" && mount -t tmpfs tmpfs /dev &&
		for n in null zero random urandom; do touch /dev/$n && mount --bind "$d/olddev/$n" /dev/$n; done &&
		ln -s "$d/log" /dev/log && exec "$@"' sh "$d" \
		kpropd -D -r PERF.TEST -s "$d/r/kpropd.keytab" -a "$d/r/kpropd.acl" -f "$d/r/from_primary" -P "$port" \
		-p "$(command -v kdb5_util || echo /usr/sbin/kdb5_util)" --pid-file="$d/kpropd.pid" >/dev/null 2>&1 &
	for _ in $(seq 200); do [ -s "$d/kpropd.pid" ] && return 0; sleep 0.05; done
}
restart_kadmind() { # the primary's, with its own command line and environment
	local pid env args
	pid=$(pidof_file "$d/p/kadmind.pid")
	mapfile -d '' env <"/proc/$pid/environ"
	mapfile -d '' args <"/proc/$pid/cmdline"
	stop "$pid"
	env -i "${env[@]}" "${args[@]}"
	for _ in $(seq 200); do [ -s "$d/p/kadmind.pid" ] && kill -0 "$(cat "$d/p/kadmind.pid")" 2>/dev/null && return 0; sleep 0.05; done
}
PATH=$PATH:/usr/sbin
export KRB5_CONFIG=$d/p/krb5.conf KRB5_KDC_PROFILE=$d/p/kdc.conf

start_kpropd
kadmin.local -q "addprinc -randkey -clearpolicy s1" >/dev/null 2>&1
await 1 'Incremental updates:'
printf 'addprinc -randkey -clearpolicy s2\naddprinc -randkey -clearpolicy s3\ncpw -randkey s1\n' | kadmin.local >/dev/null 2>&1
await 2 'Incremental updates:'
# kadmind away, then back.
stop "$(pidof_file "$d/p/kadmind.pid")"
await 1 'while attempting to connect\|interface, retrying\|call failed'
env_p=("KRB5_CONFIG=$d/p/krb5.conf" "KRB5_KDC_PROFILE=$d/p/kdc.conf" "KRB5_KTNAME=FILE:$d/p/kprop.keytab")
env "${env_p[@]}" kadmind -r PERF.TEST -P "$d/p/kadmind.pid" -F "$d/p/replica_datatrans" -k "$port"
kadmin.local -q "addprinc -randkey -clearpolicy s4" >/dev/null 2>&1
await 3 'Incremental updates:'
# iprop permission withdrawn: kpropd gives up.
cp "$d/p/kadm5.acl" "$d/acl.orig"
grep -v '^kiprop/' "$d/acl.orig" >"$d/p/kadm5.acl"
restart_kadmind
await 1 'do_iprop failed'
cp "$d/acl.orig" "$d/p/kadm5.acl"
restart_kadmind
# A reset update log: a full resync.
for _ in $(seq 200); do kill -0 "$(pidof_file "$d/kpropd.pid")" 2>/dev/null || break; sleep 0.05; done
KRB5_CONFIG=$d/r/krb5.conf KRB5_KDC_PROFILE=$d/r/kdc.conf kproplog -R >/dev/null
rm -f "$d/kpropd.pid"
start_kpropd
await 1 'Full resync request granted'
await 1 'Connection from'
kadmin.local -q "addprinc -randkey -clearpolicy s5" >/dev/null 2>&1
await 4 'Incremental updates:'
sed -E 's/^<[0-9]+>([A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8}) /\1 kdc2 /' "$d/datagrams" >"$out"
echo "capture: $(wc -l <"$out") lines in $out"
