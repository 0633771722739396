#!/usr/bin/env bash
# The figures of issue 19's network attacks against real nodes of a release build: a greedy peer's cost in memory,
# an honest node's time to link during a slowloris and during a beacon flood, and the time /quit and SIGTERM take to
# end a flooded node. Needs root for the beacon flood (a network namespace of its own, ns-sec-net-…).
#
# Usage: scripts/attack-figures.sh [--nodes NATTER] [--attacker NATTER] [--only greedy|slowloris|beacons]
#   --nodes     the natter binary the victim and honest nodes run (default .build/release/natter): pass an older
#               build to measure it before a change
#   --attacker  the natter binary with `natter debug attack` (default .build/release/natter)
# The victim's 23,000-record feed is written once (about two minutes of fsynced appends) and kept in
# .build-figures/victim-template. Every process is stopped by PID, every wait is bounded, the namespace is removed.
set -euo pipefail
cd "$(dirname "$0")/.."

nodes=.build/release/natter
attacker=.build/release/natter
only=""
while [ $# -gt 0 ]; do
    case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --attacker) attacker="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    *) echo "usage: $0 [--nodes NATTER] [--attacker NATTER] [--only greedy|slowloris|beacons]" >&2; exit 2 ;;
    esac
done
work=$(mktemp -d /tmp/natter-attack-figures.XXXXXX)
pids=()
namespace=""
cleanup() {
    for pid in "${pids[@]}"; do { kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true; done
    if [ -n "$namespace" ]; then ip netns del "$namespace" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { echo "$2 - $1" | bc; }
rss_kib() { awk '/VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# Waits (at most $3 s) until file $1 has a line matching $2; prints the time waited ("0.8 s"), or "never within N s".
wait_line() {
    local start end
    start=$(now)
    for _ in $(seq 1 $(( $3 * 20 ))); do
        if grep -q "$2" "$1" 2>/dev/null; then end=$(now); echo "$(elapsed "$start" "$end") s"; return; fi
        sleep 0.05
    done
    echo "never within $3 s"
}

# Waits (at most $2 s) for PID $1 to exit; prints the time waited ("0.5 s"), or "still running after N s".
wait_exit() {
    local start end
    start=$(now)
    for _ in $(seq 1 $(( $2 * 20 ))); do
        if ! kill -0 "$1" 2>/dev/null; then end=$(now); echo "$(elapsed "$start" "$end") s"; return; fi
        sleep 0.05
    done
    echo "still running after $2 s"
}

# A node listening on 127.0.0.1:$2 (no discovery) in data directory $1, its output in $1.log; sets $node_pid.
start_node() {
    "$nodes" run --data "$1" --name "$(basename "$1")" --headless --no-discovery --listen "127.0.0.1:$2" \
        "${@:3}" >"$1.log" 2>&1 &
    node_pid=$!
    pids+=("$node_pid")
    wait_line "$1.log" "listening on port" 30 >/dev/null
}

victim_template() {
    local template=.build-figures/victim-template
    if [ ! -d "$template" ]; then
        mkdir -p .build-figures
        echo "writing the victim's 23,000-record feed (once)…"
        "$nodes" init --data "$template" --name Victim >/dev/null
        "$attacker" debug append-loop --data "$template" --count 23000 >/dev/null
    fi
    cp -r "$template" "$work/victim"
}

greedy() {
    victim_template
    local feed conversation author
    feed=$("$attacker" debug feeds --data "$work/victim" | awk '$4 == 23000 { print $1, $2 }')
    conversation=${feed% *}
    author=${feed#* }
    # stalled: never reads; credit-only: one REQUEST, then CREDIT alone (what backpressure must stop); reading: reads
    # and discards (what the resend bound must stop).
    for mode in stalled credit-only reading; do
        rm -rf "$work/victim-$mode"
        cp -r "$work/victim" "$work/victim-$mode"
        start_node "$work/victim-$mode" 47311
        local victim=$node_pid before peak=0 rss
        sleep 1
        before=$(rss_kib "$victim")
        local flags=()
        [ "$mode" = reading ] && flags=(--read)
        [ "$mode" = credit-only ] && flags=(--requests 1)
        "$attacker" debug attack greedy --peer 127.0.0.1:47311 --conversation "$conversation" --author "$author" \
            --seconds 20 "${flags[@]}" >"$work/greedy-$mode.out" 2>&1 &
        local attack=$!
        pids+=("$attack")
        while kill -0 "$attack" 2>/dev/null; do
            rss=$(rss_kib "$victim")
            [ "$rss" -gt "$peak" ] && peak=$rss
            sleep 0.5
        done
        echo "greedy ($mode): victim RSS $((before / 1024)) MiB before, peak $((peak / 1024)) MiB during the 20 s" \
            "(+$(((peak - before) / 1024)) MiB); attacker: $(tail -1 "$work/greedy-$mode.out")"
        { grep -h "link failed\|banned" "$work/victim-$mode.log" || echo "no link failed, nobody banned"; } | head -2 |
            sed 's/^/    victim: /'
        kill "$victim"
        wait_exit "$victim" 30 >/dev/null
    done
}

slowloris() {
    rm -rf "$work/sl-victim" "$work/sl-honest" "$work/sl-baseline"
    start_node "$work/sl-victim" 47312
    local victim=$node_pid
    # The baseline: an honest node links with nobody attacking.
    local start
    start=$(now)
    "$nodes" run --data "$work/sl-baseline" --name Baseline --headless --no-discovery --listen 127.0.0.1:0 \
        --peer 127.0.0.1:47312 >"$work/sl-baseline.log" 2>&1 &
    local baseline=$!
    pids+=("$baseline")
    echo "slowloris: baseline, an honest node links $(wait_line "$work/sl-baseline.log" "is online" 30) after it starts"
    kill "$baseline"
    wait_exit "$baseline" 30 >/dev/null
    "$attacker" debug attack slowloris --peer 127.0.0.1:47312 --from 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5 \
        --per-address 8 --renew 4 --seconds 40 >"$work/slowloris.out" 2>&1 &
    pids+=($!)
    sleep 5  # the silent connections are open and renewed once
    "$nodes" run --data "$work/sl-honest" --name Honest --headless --no-discovery --listen 127.0.0.1:0 \
        --peer 127.0.0.1:47312 >"$work/sl-honest.log" 2>&1 &
    pids+=($!)
    echo "slowloris: 32 silent connections from 127.0.0.2-5 renewed every 4 s; an honest node links" \
        "$(wait_line "$work/sl-honest.log" "is online" 30) after it starts"
    kill "$victim"
    wait_exit "$victim" 30 >/dev/null
}

beacons() {
    namespace="ns-sec-net-fig-$$"
    local subnet=91 ns=(ip netns exec "$namespace")
    ip netns add "$namespace"
    ip -n "$namespace" link set lo up
    ip -n "$namespace" link add v0 type veth peer name v1
    ip -n "$namespace" addr add "10.77.$subnet.1/24" brd + dev v0
    local flooders=()
    for i in $(seq 101 108); do
        ip -n "$namespace" addr add "10.77.$subnet.$i/24" dev v0
        flooders+=("10.77.$subnet.$i")
    done
    ip -n "$namespace" link set v0 up
    ip -n "$namespace" link set v1 up
    "${ns[@]}" nft "add table inet flood; add chain inet flood input { type filter hook input priority 0; };" \
        "add rule inet flood input tcp dport 9 drop"
    "${ns[@]}" "$attacker" debug attack beacons --from "$(IFS=,; echo "${flooders[*]}")" --to "10.77.$subnet.255" \
        --announce 9 --rate 32 --seconds 60 >"$work/beacons.out" 2>&1 &
    pids+=($!)
    sleep 3  # the flood is on before the honest nodes start
    mkfifo "$work/ann.in"
    local start
    start=$(now)
    "${ns[@]}" "$nodes" run --data "$work/Ann" --name Ann --listen 0.0.0.0:0 <"$work/ann.in" >"$work/Ann.log" 2>&1 &
    local ann=$!
    pids+=("$ann")
    exec 7>"$work/ann.in"
    "${ns[@]}" "$nodes" run --data "$work/Ben" --name Ben --headless --listen 0.0.0.0:0 >"$work/Ben.log" 2>&1 &
    local ben=$!
    pids+=("$ben")
    local linked=()
    for name in Ann Ben; do
        if [ "$(wait_line "$work/$name.log" "is online" 25)" = "never within 25 s" ]; then
            linked+=("never within 25 s")
        else
            linked+=("$(elapsed "$start" "$(now)") s")
        fi
    done
    echo "beacons: 32 forged beacons/s with fresh tags from 8 addresses; two honest nodes link ${linked[0]} and" \
        "${linked[1]} after the first starts"
    sleep 5  # five more seconds of flood
    echo "/quit" >&7
    echo "beacons: /quit ends a flooded node in $(wait_exit "$ann" 200)"
    exec 7>&-
    kill -TERM "$ben"
    echo "beacons: SIGTERM ends a flooded node in $(wait_exit "$ben" 200)"
    echo "beacons: the nodes logged $(grep -c "announces TCP port 9" "$work/Ann.log" || true) and" \
        "$(grep -c "announces TCP port 9" "$work/Ben.log" || true) lines about forged nodes"
}

[ -z "$only" ] || [ "$only" = greedy ] && greedy
[ -z "$only" ] || [ "$only" = slowloris ] && slowloris
if [ -z "$only" ] || [ "$only" = beacons ]; then
    if [ "$(id -u)" -eq 0 ]; then beacons; else echo "beacons: skipped (needs root for a network namespace)"; fi
fi
