#!/usr/bin/env bash
# The demo behind `make demo`: a real local cluster (3 masters, 2 workers),
# a supervised distributed word count over the Go source tree (a driver that
# registers an application with 2 executors), shipped with --upload so that
# no worker needs it installed, a SIGKILL of the leader while it runs, and
# the result from the driver's log.
set -euo pipefail

bin=${BIN:-bin}
dir=$(mktemp -d "${TMPDIR:-/tmp}/drover-demo-XXXXXX")
# Workers run as root run the job as nobody, who must pass through to it.
chmod 711 "$dir"
input=${INPUT:-$(go env GOROOT)/src}
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "starting a dev cluster in $dir"
"$bin/drover" dev --dir "$dir/cluster" --env-file "$dir/cluster.env" >"$dir/dev.out" 2>&1 &
dev=$!
stop() {
	kill -TERM "$dev" 2>/dev/null || true
	wait "$dev" 2>/dev/null || true
	rm -rf "$dir"
}
trap stop EXIT
for _ in $(seq 1 300); do
	[ -f "$dir/cluster.env" ] && break
	kill -0 "$dev" 2>/dev/null || { cat "$dir/dev.out"; exit 1; }
	sleep 0.2
done
[ -f "$dir/cluster.env" ] || { echo "cluster did not come up"; cat "$dir/dev.out"; exit 1; }
cat "$dir/dev.out"
# shellcheck disable=SC1091
. "$dir/cluster.env"
client() { "$bin/drover" client "$@"; }

say "uploading $bin/wordcount and submitting it, supervised, over $input, with 2 executors"
id=$(client submit --supervise --name wordcount --upload "$bin/wordcount" -- ./wordcount --executors 2 --top 15 "$input" | tail -n 1)
for _ in $(seq 1 100); do
	client apps | grep -q RUNNING && break
	sleep 0.1
done
client apps

leader=$(client leader)
pid_var="${leader}_PID"
say "killing the leader, master $leader (pid ${!pid_var}), with SIGKILL while $id runs"
kill -KILL "${!pid_var}"
start=$(date +%s%N)
for _ in $(seq 1 100); do
	next=$(client --timeout 2s leader 2>/dev/null || true)
	[ -n "$next" ] && [ "$next" != "$leader" ] && break
	sleep 0.1
done
echo "new leader: master $next, elected $((($(date +%s%N) - start) / 1000000)) ms after the kill"

say "waiting for $id to finish"
client logs --follow "$id" >"$dir/result.txt"
client status "$id"
client apps

say "result (top 15 words), from drover client logs $id"
cat "$dir/result.txt"
state=$(client status --json "$id" | grep '"state"' | head -n 1)
case "$state" in
*FINISHED*) say "demo done: the driver finished once, across a leader kill" ;;
*) echo "driver did not finish: $state"; exit 1 ;;
esac
