#!/usr/bin/env bash
# Benchmarks of the running node in network namespaces (docs/performance.md):
#   first contact — from `natter run` starting to the node being linked to a neighbour, by discovery alone, over
#   --runs fresh nodes (each in a namespace and data directory of its own, so no earlier link or redial helps);
#   idle cost — RSS and CPU of two linked nodes doing nothing for --idle seconds, read from /proc.
#
# Usage: sudo scripts/bench-netns.sh [--runs N] [--idle SECONDS] [--binary PATH] [--smaps DIR] [--cold]
#        (default: .build/release/natter)
# --smaps DIR keeps the two idle processes' /proc/PID/smaps (DIR/node0.smaps, DIR/nodeN.smaps) for
# scripts/smaps-summary.py; --cold first drops the binary's pages from the page cache, as scripts/idle-node.sh does
# (what is cached before the start moves RSS by about 1 MiB).
# "Linked" is observed through the line interface: `/wait peer node0` (which polls every 50 ms) followed by
# `/whoami` ("NAME FINGERPRINT"), whose line this script waits for (polling every 5 ms): the figures include up to ~55 ms of polling.
# Everything it creates (namespaces, processes, temp files) is removed on exit, even on failure; every wait is
# bounded; processes are stopped by PID; traffic stays inside its own namespaces.
set -euo pipefail

runs=10
idle=60
binary=""
smaps_dir=""
cold=false
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --idle) idle="$2"; shift 2 ;;
        --binary) binary="$2"; shift 2 ;;
        --smaps) smaps_dir="$2"; shift 2 ;;
        --cold) cold=true; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$(id -u)" -ne 0 ]; then echo "bench-netns: needs root (ip netns)"; exit 2; fi
cd "$(dirname "$0")/.."
[ -n "$binary" ] || binary="$(pwd)/.build/release/natter"
[ -x "$binary" ] || { echo "bench-netns: build first (swift build -c release); no $binary"; exit 2; }
if $cold; then dd if="$binary" iflag=nocache count=0 status=none; fi

tag="b$$"
subnet="10.214.$(( $$ % 200 + 20 ))"
work="$(mktemp -d /tmp/natter-bench-XXXXXX)"
switch="${tag}sw"
pids=()
hosts=()

cleanup() {
    set +e
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    sleep 0.5
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    for host in "${hosts[@]}"; do ip netns del "$host" 2>/dev/null; done
    ip netns del "$switch" 2>/dev/null
    if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'echo "bench-netns: interrupted" >&2; exit 1' INT TERM

ns() { ip netns exec "$1" "${@:2}"; }
ip netns add "$switch"
ns "$switch" ip link add br0 type bridge
ns "$switch" ip link set br0 up
add_host() {  # index
    local host="${tag}h$1"
    ip netns add "$host"
    hosts+=("$host")
    ip link add "${tag}e$1" netns "$host" type veth peer name "p$1" netns "$switch"
    ns "$switch" ip link set "p$1" master br0 up
    ns "$host" ip addr add "$subnet.$(($1 + 10))/24" dev "${tag}e$1"
    ns "$host" ip link set "${tag}e$1" up
    ns "$host" ip link set lo up
}
start() {  # index: starts node$index in host$index reading the FIFO in$index; sets $started_pid
    ip netns exec "${tag}h$1" "$binary" run --data "$work/node$1" --listen "0.0.0.0:7718" \
        < "$work/in$1" > "$work/out$1" 2> "$work/err$1" &
    started_pid=$!
    pids+=($!)
}
prepare() {  # index
    "$binary" init --data "$work/node$1" --name "node$1" >/dev/null
    mkfifo "$work/in$1"
    : > "$work/out$1"
}
stop() {  # pid: SIGTERM, bounded wait, then SIGKILL
    local waited=0
    kill -TERM "$1" 2>/dev/null || true
    while kill -0 "$1" 2>/dev/null && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

add_host 0
prepare 0
start 0
anchor_pid=$started_pid
exec {anchor_fd}> "$work/in0"
sleep 1

echo "bench-netns: first contact over $runs fresh nodes ($binary)"
samples=()
for run in $(seq 1 "$runs"); do
    add_host "$run"
    prepare "$run"
    t0=$(now_ms)
    start "$run"
    pid=$started_pid
    exec {fd}> "$work/in$run"  # opening a FIFO for writing waits for its reader: after the start
    echo "/wait peer node0 10" >&"$fd"
    echo "/whoami" >&"$fd"
    deadline=$((SECONDS + 15))
    until grep -qE "^node$run [0-9a-f]+" "$work/out$run"; do  # /whoami: NAME FINGERPRINT
        if [ $SECONDS -ge $deadline ] || ! kill -0 "$pid" 2>/dev/null; then
            echo "bench-netns: node$run never linked"; tail -5 "$work/err$run"; exit 1
        fi
        sleep 0.005
    done
    t1=$(now_ms)
    samples+=($((t1 - t0)))
    echo "  run $run: $((t1 - t0)) ms"
    if [ "$run" -lt "$runs" ]; then
        exec {fd}>&-
        stop "$pid"
        ip netns del "${tag}h$run"
    else
        last_pid=$pid
        last_fd=$fd
    fi
done
sorted=($(printf '%s\n' "${samples[@]}" | sort -n))
count=${#sorted[@]}
if [ $((count % 2)) -eq 1 ]; then median=${sorted[$((count / 2))]}
else median=$(( (sorted[count / 2 - 1] + sorted[count / 2]) / 2 )); fi
echo "first_contact_ms median=$median min=${sorted[0]} max=${sorted[$((count - 1))]} runs=$count"

echo "bench-netns: idle cost of two linked nodes over $idle s"
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
before0=$(cpu "$anchor_pid"); before1=$(cpu "$last_pid")
sleep "$idle"
after0=$(cpu "$anchor_pid"); after1=$(cpu "$last_pid")
echo "  (PIDs: node0 $anchor_pid, node$runs $last_pid)"
for pair in "node0 $anchor_pid $before0 $after0" "node$runs $last_pid $before1 $after1"; do
    set -- $pair
    if [ -n "$smaps_dir" ]; then mkdir -p "$smaps_dir"; cp "/proc/$2/smaps" "$smaps_dir/$1.smaps"; fi
    awk -v name="$1" -v rss="$(rss "$2")" -v used="$(($4 - $3))" -v ticks="$ticks" -v idle="$idle" \
        'BEGIN { printf "idle %s rss_kib=%d cpu_seconds=%.2f cpu_percent=%.3f\n", name, rss, used / ticks, 100 * used / ticks / idle }'
done
: "$anchor_fd" "$last_fd"
