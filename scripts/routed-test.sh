#!/usr/bin/env bash
# Named peers across a router (SPEC F17, "Beyond one LAN"): two subnets, A (10.X.1.0/24) and B (10.X.2.0/24), each a
# bridge in a namespace of its own, joined only by a router namespace that forwards IPv4 between them (no bridge, so
# no broadcast or link-local multicast crosses). Two natter nodes per subnet with discovery on; one node of B names
# one node of A (`--peer`). Checks: a group of all four converges (equal log and conversation digests) — so
# discovery linked each subnet and the named peer linked the two —; captures on both bridges show beacons inside
# each subnet and none from the other one, and the only natter TCP connection between the subnets is the named one.
#
# Usage: sudo scripts/routed-test.sh [--timeout SECONDS] [--binary PATH]
# Namespaces are named ${NATTER_NETNS_PREFIX}r<pid>…; every process is stopped by PID and every namespace deleted on
# exit, even on failure; the whole run is bounded by --timeout (default 180 s). KEEP=1 keeps the work directory.
set -euo pipefail

timeout=180
binary=""
while [ $# -gt 0 ]; do
    case "$1" in
        --timeout) timeout="$2"; shift 2 ;;
        --binary) binary="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$(id -u)" -ne 0 ]; then echo "routed-test: needs root (ip netns)"; exit 2; fi
command -v tcpdump >/dev/null || { echo "routed-test: needs tcpdump (scripts/install-deps.sh)"; exit 2; }
cd "$(dirname "$0")/.."
[ -n "$binary" ] || binary="$(pwd)/.build/debug/natter"
[ -x "$binary" ] || { echo "routed-test: build first (swift build); no $binary"; exit 2; }

script=routed-test
tag="${NATTER_NETNS_PREFIX:-}r$$"
net="10.$(( $$ % 200 + 20 ))"   # subnet A is $net.1.0/24, B is $net.2.0/24
work="$(mktemp -d /tmp/natter-routed-XXXXXX)"
. scripts/lib/netns.sh
netns_begin "$timeout"

# Two switches, a router with a leg on each, two hosts per subnet (nodes 0 and 1 on A, 2 and 3 on B).
router="${tag}rt"
add_ns "$router"
ns "$router" sysctl -qw net.ipv4.ip_forward=1
for side in 1 2; do
    add_switch "${tag}s$side"
    plug "$router" "r$side" "${tag}s$side" "rt"
    ns "$router" ip addr add "$net.$side.1/24" dev "r$side"
done
subnet_of() { [ "$1" -lt 2 ] && echo 1 || echo 2; }
for i in 0 1 2 3; do
    side=$(subnet_of "$i")
    add_ns "${tag}h$i"
    plug "${tag}h$i" "e$i" "${tag}s$side" "p$i"
    ns "${tag}h$i" ip addr add "$net.$side.$((i + 10))/24" dev "e$i"
    ns "${tag}h$i" ip route add default via "$net.$side.1"
done
for side in 1 2; do
    # Beacons (UDP 7719) and natter links (TCP 7718) seen on each subnet's bridge.
    ip netns exec "${tag}s$side" tcpdump -i br0 -n -U -w "$work/subnet$side.pcap" "udp port 7719 or tcp port 7718" \
        2>/dev/null &
    pids+=($!)
done
sleep 1

for i in 0 1 2 3; do init_node "$i"; done
start_node 0 "${tag}h0" --listen "0.0.0.0:7718"
start_node 1 "${tag}h1" --listen "0.0.0.0:7718"
start_node 2 "${tag}h2" --listen "0.0.0.0:7718" --peer "$net.1.10:7718"
start_node 3 "${tag}h3" --listen "0.0.0.0:7718"
echo "routed-test: subnets $net.1.0/24 (node0, node1) and $net.2.0/24 (node2, node3) joined by a router;" \
    "node2 names node0"

for i in 1 2 3; do send 0 "/wait known node$i 60"; done
send 0 "/group create routed node1 node2 node3"
for i in 1 2 3; do wait_for "$i" "[routed]" 60 || fail "node$i never joined the group" 0 1 2 3; done
for i in 0 1 2 3; do send "$i" "/msg routed hello from node$i in subnet $(subnet_of "$i")"; done
converge 60 4 0 1 2 3 || fail "no convergence across the router" 0 1 2 3
echo "routed-test: converged across the router: $(latest_digest 0 | head -1)"

# The nodes stop (their beacon bursts at start and the rounds since were captured), then the captures.
for i in 0 1 2 3; do stop_node "$i"; done
sleep 1
for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
sleep 1
problems="$(check_no_bans)"
linklocal() { ns "${tag}h$1" ip -6 addr show dev "e$1" scope link | awk '/inet6/ {sub("/.*", "", $2); print $2}'; }
for side in 1 2; do
    other=$((3 - side))
    dump=$(tcpdump -n -r "$work/subnet$side.pcap" 2>/dev/null)
    # The source address of each beacon: "IP 10.x.y.z.PORT > ….7719: UDP" or "IP6 fe80::….PORT > ff02::….7719: UDP".
    sources=$(echo "$dump" | awk '$2 ~ /^IP6?$/ && $5 ~ /\.7719:$/ {sub(/\.[0-9]+$/, "", $3); print $3}')
    own=0 foreign=0
    for i in 0 1 2 3; do
        addresses=("$net.$(subnet_of "$i").$((i + 10))")
        ll=$(linklocal "$i")
        [ -z "$ll" ] || addresses+=("$ll")
        count=$(echo "$sources" | grep -cxF "${addresses[@]/#/-e}" || true)
        if [ "$(subnet_of "$i")" = "$side" ]; then own=$((own + count)); else foreign=$((foreign + count)); fi
    done
    echo "routed-test: subnet $side's bridge: $own beacons from its own nodes, $foreign from subnet $other's"
    [ "$own" -gt 0 ] || problems="$problems no beacon seen inside subnet $side (the capture saw nothing?);"
    [ "$foreign" -eq 0 ] || problems="$problems $foreign beacons of subnet $other crossed into subnet $side;"
    # Natter links opened across the router (SYN without ACK): only node2 → node0 may exist.
    crossing=$(echo "$dump" | awk -v a="$net.1." -v b="$net.2." '$2 == "IP" && $0 ~ /Flags \[S\]/ {
            src = $3; dst = $5; sub(/\.[0-9]+$/, "", src); sub(/\.[0-9]+:?$/, "", dst)
            if ((index(src, a) == 1 && index(dst, b) == 1) || (index(src, b) == 1 && index(dst, a) == 1)) print src " > " dst
        }' | sort -u)
    unexpected=$(echo "$crossing" | grep -v -x -F "$net.2.12 > $net.1.10" | grep . || true)
    [ -z "$unexpected" ] || problems="$problems links across the router that no one named: $(echo "$unexpected" | tr '\n' ' ');"
done
report "$problems"
