#!/bin/sh
# monitor: run $ARG_CMD, keep its output and status in state, and
# remember an anomaly (a failing status, output lacking $ARG_EXPECT or
# holding $ARG_ALERT) once: one that persists from the last run is not
# remembered again. Exits 1 on an anomaly, so a job's last status shows it.
set -u
run=${OXIOS_RUN:?monitor runs inside a run: ox-program run monitor}
name=${ARG_NAME:-default}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh -c "$ARG_CMD" >"$tmp/out" 2>&1
status=$?
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
why=""
[ "$status" -eq 0 ] || why="exit status $status"
if [ -n "${ARG_EXPECT:-}" ] && ! grep -Eq -- "$ARG_EXPECT" "$tmp/out"; then
	why="${why:+$why; }output lacks /$ARG_EXPECT/"
fi
if [ -n "${ARG_ALERT:-}" ] && grep -Eq -- "$ARG_ALERT" "$tmp/out"; then
	why="${why:+$why; }output matches /$ARG_ALERT/: $(grep -Em1 -- "$ARG_ALERT" "$tmp/out")"
fi
prev=$(ox-state load "monitor/$name/status" 2>/dev/null | cut -d' ' -f2-) || prev=""
ox-state save "monitor/$name/last" <"$tmp/out" >/dev/null
if [ -z "$why" ]; then
	echo "$now ok" | ox-state save "monitor/$name/status" >/dev/null
	echo "monitor $name: ok"
	exit 0
fi
echo "$now anomaly: $why" | ox-state save "monitor/$name/status" >/dev/null
if [ "$prev" = "anomaly: $why" ]; then
	echo "monitor $name: anomaly persists: $why"
else
	ox-remember -k episodic -t monitor -t anomaly -t "$name" \
		"monitor $name anomaly at $now (run $run): $why; command: $ARG_CMD" >/dev/null
	echo "monitor $name: anomaly: $why"
fi
exit 1
