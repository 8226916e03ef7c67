#!/usr/bin/env bash
# Installs what building and testing krb5-exporter needs on Debian/Ubuntu:
# the MIT Kerberos KDC, admin server, kpropd and client tools (the tests
# start a real krb5kdc/kadmind in a throwaway realm, and replicas of it), promtool, systemd-journal-remote
# (journal source tests), chromium (the bench test opens report.html in it,
# headless), and what the package tests use: systemd (systemd-analyze), rpm
# (rpm -qlp), logrotate, acl (setfacl); tmux (the terminal test of top); faketime
# (a kinit with a skewed clock: kdclog TestClockSkew). Idempotent.
# Set EXTRA_PACKAGES for more (e.g. mtail prometheus-process-exporter for
# the side-by-side benchmarks).
set -euo pipefail

packages=(krb5-kdc krb5-admin-server krb5-user krb5-kpropd prometheus systemd-journal-remote systemd rpm logrotate acl chromium tmux faketime ${EXTRA_PACKAGES:-})
# realm up --kdc-proxy: Debian's KDC proxy under gunicorn, and MIT's TLS
# plugin (kinit through the proxy: kdc = https://...).
packages+=(python3-kdcproxy gunicorn krb5-k5tls)
# alerts/: the Alertmanager end-to-end test and amtool check-config.
packages+=(prometheus-alertmanager)
# The kdcservice collector: clang, llvm (llvm-strip) and libbpf-dev (its
# headers) to check that the committed BPF object is what its source
# compiles to (internal/kdcbpf TestObjectIsSource; building needs none of
# them); strace for its slow-disk test.
packages+=(clang llvm libbpf-dev strace)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
	echo "deps: installing ${missing[*]}"
	$sudo apt-get update -qq
	# Debian's krb5 packages ask no questions in this mode and start no
	# realm of their own; /etc/krb5.conf is left as the package ships it.
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends "${missing[@]}" >/dev/null
fi

export PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null; then
	echo "deps: Go is not installed; install Go $(sed -n 's/^go //p' go.mod) or newer from go.dev/dl" >&2
	exit 1
fi
go mod download
(cd packaging && go mod download)
echo "deps: ok ($(go version | cut -d' ' -f3), krb5 $(dpkg-query -W -f='${Version}' krb5-kdc))"
