#!/usr/bin/env bash
# Brings up a throwaway MIT realm on loopback (the embedded default: the
# seed's 1,000 users, 100 services, 10,000 fillers) and runs krb5-exporter
# against it in the foreground. Ctrl-C stops both and removes the realm.
set -euo pipefail
bin=$(realpath "${1:-./krb5-exporter}")
dir=$(realpath -m "${DEMO_DIR:-.demo}")
listen=${LISTEN:-127.0.0.1:10088}

# A realm left over from an interrupted run is stopped and removed first.
if [ -f "$dir/realm/realm.json" ]; then "$bin" realm down --dir "$dir/realm" >/dev/null || true; fi
rm -rf "$dir"
mkdir -p "$dir"

"$bin" realm up --dir "$dir/realm" --exporter-config "$dir/krb5-exporter.yml"
trap '"$bin" realm down --dir "$dir/realm"; rm -rf "$dir"' EXIT

cat <<MSG

krb5-exporter is starting on http://$listen/ against the realm above:
  metrics:  curl -s http://$listen/metrics | grep ^krb5_
  reload:   curl -X POST http://$listen/-/reload   (config: $dir/krb5-exporter.yml)
Press Ctrl-C to stop the exporter and remove the realm.

MSG
r="$dir/realm"
"$bin" --web.listen-address="$listen" --config.file="$dir/krb5-exporter.yml" \
	--collector.process.krb5kdc-pidfile="$r/krb5kdc.pid" --collector.process.kadmind-pidfile="$r/kadmind.pid" \
	--collector.kdcconf.path="$r/kdc.conf" --collector.kdcconf.krb5-config="$r/krb5.conf" || true
