#!/bin/sh
# krb5-exporter pre-remove (deb: remove/upgrade; rpm: 0 = erase, 1 = upgrade).
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now krb5-exporter.service krb5-exporter.socket >/dev/null 2>&1 || true
	fi
	# Take back the log ACLs while the helper is still installed.
	/usr/libexec/krb5-exporter/grant-access --revoke || true
	;;
esac
exit 0
