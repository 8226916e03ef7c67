#!/bin/sh
# krb5-exporter post-remove (deb: remove/purge/upgrade; rpm: 0 = erase).
# Purge (deb) removes the service's state, keytab and user; rpm keeps the
# user, as Fedora/RHEL packaging does, but removes the state.
set -e
user=krb5-exporter
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
case "$1" in
purge)
	rm -rf /var/lib/krb5-exporter /etc/krb5-exporter
	if getent passwd "$user" >/dev/null; then userdel "$user" >/dev/null 2>&1 || true; fi
	if getent group "$user" >/dev/null; then groupdel "$user" >/dev/null 2>&1 || true; fi
	;;
0)
	rm -rf /var/lib/krb5-exporter
	;;
esac
exit 0
