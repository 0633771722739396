#!/usr/bin/env bash
# The idle-node benchmark (docs/performance.md): two real `natter run --headless` processes on loopback, one dialling
# the other, no discovery and no traffic; once they are linked, reads each process's CPU time (utime + stime from
# /proc/PID/stat) and memory (VmRSS, VmHWM from /proc/PID/status) at the start and the end of the window.
#
# Usage: scripts/idle-node.sh [--seconds N] [--binary PATH] [--smaps DIR] [--cold]
#        (default: 60 s, .build/release/natter)
# --smaps DIR keeps each process's /proc/PID/smaps at the end of the window (DIR/listener.smaps, DIR/dialler.smaps)
# for scripts/smaps-summary.py. --cold first drops the binary's pages from the page cache (when no process maps it):
# the kernel maps up to 64 KiB of cached pages around each page a process touches, so what is cached before the
# start moves RSS by about 1 MiB; --cold measures every run from the same state (the first start after a boot).
# It removes what it created (processes by PID, its temp directory) on exit, even on failure, and is bounded in
# time: the window plus at most 20 s of set-up.
set -euo pipefail

seconds=60
binary=""
smaps_dir=""
cold=false
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --binary) binary="$2"; shift 2 ;;
        --smaps) smaps_dir="$2"; shift 2 ;;
        --cold) cold=true; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
[ -n "$binary" ] || binary="$(pwd)/.build/release/natter"
[ -x "$binary" ] || { echo "idle-node: build first (swift build -c release); no $binary"; exit 2; }
if $cold; then dd if="$binary" iflag=nocache count=0 status=none; fi

work="$(mktemp -d /tmp/natter-idle-XXXXXX)"
pids=()
cleanup() {
    set +e
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    sleep 0.5
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

start_node() { # name, extra arguments...
    local name="$1"; shift
    "$binary" run --data "$work/$name" --name "$name" --headless --no-discovery --listen 127.0.0.1:0 "$@" \
        >"$work/$name.log" 2>&1 &
    pids+=($!)
}

port_of() { # log file → the port it printed
    local deadline=$((SECONDS + 10))
    while [ $SECONDS -lt $deadline ]; do
        local port
        port="$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$1" 2>/dev/null | head -n 1)"  # the log may not exist yet
        if [ -n "$port" ]; then echo "$port"; return 0; fi
        sleep 0.1
    done
    echo "idle-node: no port in $1" >&2; cat "$1" >&2; return 1
}

start_node listener
listener_pid="${pids[0]}"
listener_port="$(port_of "$work/listener.log")"
start_node dialler --peer "127.0.0.1:$listener_port"
dialler_pid="${pids[1]}"

# Linked: an established TCP connection to the listener's port (and a few seconds for the initial sync to end).
deadline=$((SECONDS + 10))
until ss -Htn state established "( sport = :$listener_port )" | grep -q .; do
    [ $SECONDS -lt $deadline ] || { echo "idle-node: the nodes never linked"; cat "$work"/*.log; exit 1; }
    sleep 0.1
done
sleep 3

ticks="$(getconf CLK_TCK)"
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }  # utime + stime (fields after the parenthesised name)
kib() { awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/status"; }

declare -A before
for pid in "$listener_pid" "$dialler_pid"; do before[$pid]="$(cpu_ticks "$pid")"; done
start_ns="$(date +%s%N)"
sleep "$seconds"
elapsed_ns=$(( $(date +%s%N) - start_ns ))

echo "idle-node: two nodes linked on loopback, no traffic, ${seconds} s window; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for pair in "listener:$listener_pid" "dialler:$dialler_pid"; do
    name="${pair%%:*}"; pid="${pair##*:}"
    kill -0 "$pid" 2>/dev/null || { echo "idle-node: $name exited"; cat "$work/$name.log"; exit 1; }
    used=$(( $(cpu_ticks "$pid") - before[$pid] ))
    if [ -n "$smaps_dir" ]; then mkdir -p "$smaps_dir"; cp "/proc/$pid/smaps" "$smaps_dir/$name.smaps"; fi
    awk -v name="$name" -v used="$used" -v ticks="$ticks" -v ns="$elapsed_ns" -v rss="$(kib "$pid" VmRSS)" \
        -v hwm="$(kib "$pid" VmHWM)" -v threads="$(kib "$pid" Threads)" 'BEGIN {
        cpu = used / ticks; wall = ns / 1e9
        printf "%-9s CPU %.2f s in %.1f s (%.3f %% of one core)  RSS %.1f MiB  peak RSS %.1f MiB  threads %d\n",
            name, cpu, wall, 100 * cpu / wall, rss / 1024, hwm / 1024, threads }'
done
