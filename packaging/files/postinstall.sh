#!/bin/sh
# krb5-exporter post-install (deb: configure; rpm: 1 = install, 2 = upgrade).
set -e
user=krb5-exporter

if ! getent group "$user" >/dev/null; then
	groupadd --system "$user"
fi
if ! getent passwd "$user" >/dev/null; then
	nologin=/usr/sbin/nologin
	[ -x "$nologin" ] || nologin=/sbin/nologin
	useradd --system --gid "$user" --home-dir /var/lib/krb5-exporter --no-create-home \
		--shell "$nologin" --comment "krb5-exporter (Prometheus exporter for the KDC)" "$user"
fi

# The configuration may name keytabs: readable by root and the service only.
chown root:"$user" /etc/krb5-exporter /etc/krb5-exporter/config.yml
chmod 0750 /etc/krb5-exporter
chmod 0640 /etc/krb5-exporter/config.yml
install -d -o "$user" -g "$user" -m 0750 /var/lib/krb5-exporter

# Read access to the KDC logs named in the configuration (ACL, see
# grant-access). Not fatal: the exporter says what it cannot read.
/usr/libexec/krb5-exporter/grant-access || true

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	case "$1" in
	configure)
		# Debian: enabled and started, restarted on upgrade.
		systemctl enable krb5-exporter.service >/dev/null 2>&1 || true
		if [ -n "${2:-}" ]; then
			systemctl try-restart krb5-exporter.service >/dev/null 2>&1 || true
		else
			systemctl start krb5-exporter.service >/dev/null 2>&1 || true
		fi
		;;
	2)
		# RHEL upgrade: restart if running; a fresh install starts nothing
		# (systemctl enable --now krb5-exporter).
		systemctl try-restart krb5-exporter.service >/dev/null 2>&1 || true
		;;
	esac
fi
exit 0
