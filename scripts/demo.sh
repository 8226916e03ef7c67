#!/usr/bin/env bash
# Brings up a throwaway MIT realm on loopback (the embedded default: the
# seed's 1,000 users, 100 services, 10,000 fillers) and runs krb5-exporter
# against it in the foreground. Ctrl-C stops both and removes the realm.
# DEMO_REPLICA=1 adds a replica (its own KDC and database, kpropd pulling
# by iprop; needs krb5-kpropd) with a second exporter on the next port.
set -euo pipefail
bin=$(realpath "${1:-./krb5-exporter}")
dir=$(realpath -m "${DEMO_DIR:-.demo}")
listen=${LISTEN:-127.0.0.1:10088}

# A realm left over from an interrupted run is stopped and removed first.
if [ -f "$dir/replica/realm.json" ]; then "$bin" realm down --dir "$dir/replica" >/dev/null || true; fi
if [ -f "$dir/realm/realm.json" ]; then "$bin" realm down --dir "$dir/realm" >/dev/null || true; fi
rm -rf "$dir"
mkdir -p "$dir"

"$bin" realm up --dir "$dir/realm" --exporter-config "$dir/krb5-exporter.yml"
trap '"$bin" realm down --dir "$dir/realm"; rm -rf "$dir"' EXIT
if [ "${DEMO_REPLICA:-}" = 1 ]; then
	"$bin" realm up --dir "$dir/replica" --replica-of "$dir/realm" --exporter-config "$dir/replica.yml"
	rep="$dir/replica"
	rlisten="${listen%:*}:$((${listen##*:} + 1))"
	"$bin" --web.listen-address="$rlisten" --config.file="$dir/replica.yml" \
		--collector.process.krb5kdc-pidfile="$rep/krb5kdc.pid" --collector.process.kadmind-pidfile="$rep/kadmind.pid" \
		--collector.process.kpropd-pidfile="$rep/kpropd.pid" \
		--collector.kdcconf.path="$rep/kdc.conf" --collector.kdcconf.krb5-config="$rep/krb5.conf" 2>"$dir/replica-exporter.log" &
	rpid=$!
	trap 'kill $rpid 2>/dev/null || true; "$bin" realm down --dir "$dir/replica"; "$bin" realm down --dir "$dir/realm"; rm -rf "$dir"' EXIT
	cat <<MSG

The replica's exporter is on http://$rlisten/ (log: $dir/replica-exporter.log):
  serials:  curl -s http://$listen/metrics http://$rlisten/metrics | grep ^krb5_iprop_ulog_last_serial
  change:   eval "\$("$bin" realm env --dir "$dir/realm")"; kadmin.local -q "addprinc -randkey demo1"
  stall:    kill \$(cat $rep/kpropd.pid)
MSG
fi

cat <<MSG

krb5-exporter is starting on http://$listen/ against the realm above:
  metrics:  curl -s http://$listen/metrics | grep ^krb5_
  reload:   curl -X POST http://$listen/-/reload   (config: $dir/krb5-exporter.yml)
Press Ctrl-C to stop the exporter and remove the realm.

MSG
r="$dir/realm"
"$bin" --web.listen-address="$listen" --config.file="$dir/krb5-exporter.yml" \
	--collector.process.krb5kdc-pidfile="$r/krb5kdc.pid" --collector.process.kadmind-pidfile="$r/kadmind.pid" \
	--collector.process.kpropd-pidfile="$r/kpropd.pid" --collector.replication.dump-file="$r/replica_datatrans" \
	--collector.kdcconf.path="$r/kdc.conf" --collector.kdcconf.krb5-config="$r/krb5.conf" || true
