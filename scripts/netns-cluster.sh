#!/usr/bin/env bash
# A real-network twin of the lab: N natter nodes, each in its own network namespace, joined by a bridge that lives
# in a namespace of its own. Nodes find each other by discovery (or named peers in a ring), a group is formed and
# traffic flows; then nftables rules inside the namespaces drop a share of packets and split the nodes in two
# halves; after the heal every node's log digest and each conversation's digest among its members must be equal.
#
# Usage: sudo scripts/netns-cluster.sh [--nodes N] [--loss PERCENT] [--partition SECONDS] [--messages M]
#                                     [--named-peers] [--capture] [--stranger] [--offline-member] [--late-joiner]
#                                     [--timeout SECONDS] [--binary PATH] [--trace DIR]
# By default nodes find each other by UDP discovery alone; --named-peers links them in a ring of --peer instead.
# --capture records every packet on the bridge (tcpdump, natter's ports only) and checks that natter traffic was
# seen and that no packet holds what a passive observer must not see (SPEC F19): the canary message, the group's
# title, a node's name, or an identity key. All four travel on every link (records, profiles, handshakes), so a node
# that sent any of them in clear would be caught; with encryption disabled in a throwaway build the check fails on
# all four (docs/security.md).
# --stranger adds a node with another network key: nobody may link with it, and each node logs it at most once.
# --offline-member (after the heal): node0 and node1 share a second group, "away". node1 is stopped (SIGTERM),
# node0 writes to "away" until the non-members hold its records, then node0 is stopped too; node1 comes back and
# must receive every message from nodes that are not members and cannot read them (store-and-forward). Then node0
# returns and everyone converges.
# --late-joiner (at the end): a fresh node in a namespace of its own starts after all the talking and must catch up
# on the whole log (its log digest equal to everyone's; it is a member of nothing).
# --trace DIR: node0 records its trace (`natter run --trace DIR/node0.trace`); at the end node0 is stopped gracefully
# and the trace is replayed in the lab (`natter lab replay`, which also checks the digests node0 recorded as it
# stopped); the replay's digests must equal node0's last /digest. The trace stays in DIR (node0's data directory is
# copied there too, for replaying again: `natter lab replay DIR/node0.trace --data DIR/node0`).
# Everything it creates (namespaces, processes, temp files) is removed on exit, even on failure; it is bounded in
# time (every wait has a timeout, and the whole run is stopped after --timeout seconds, default 600), processes
# are stopped by PID, and it only ever sends traffic inside its own namespaces. It fails if any node banned another
# (penalties are for misbehaviour, never for loss, partitions or restarts). Namespace names start with
# $NATTER_NETNS_PREFIX (empty by default), so that several people on one machine never share a name.
set -euo pipefail

nodes=6
loss=10
partition=30
messages=5
binary=""
named=""
capture=""
stranger=""
offline=""
late=""
tracedir=""
timeout=600
while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) nodes="$2"; shift 2 ;;
        --loss) loss="$2"; shift 2 ;;
        --partition) partition="$2"; shift 2 ;;
        --messages) messages="$2"; shift 2 ;;
        --binary) binary="$2"; shift 2 ;;
        --named-peers) named=yes; shift ;;
        --capture) capture=yes; shift ;;
        --stranger) stranger=yes; shift ;;
        --offline-member) offline=yes; shift ;;
        --late-joiner) late=yes; shift ;;
        --timeout) timeout="$2"; shift 2 ;;
        --trace) tracedir="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

[ "$nodes" -ge 3 ] || { echo "netns-cluster: --nodes must be at least 3"; exit 2; }
if [ "$(id -u)" -ne 0 ]; then echo "netns-cluster: needs root (ip netns)"; exit 2; fi
command -v nft >/dev/null || { echo "netns-cluster: needs nft (apt-get install nftables)"; exit 2; }
cd "$(dirname "$0")/.."
[ -n "$binary" ] || binary="$(pwd)/.build/debug/natter"
[ -x "$binary" ] || { echo "netns-cluster: build first (swift build); no $binary"; exit 2; }
if [ -n "$tracedir" ]; then mkdir -p "$tracedir"; tracedir="$(cd "$tracedir" && pwd)"; fi
if [ -n "$capture" ]; then command -v tcpdump >/dev/null || { echo "netns-cluster: --capture needs tcpdump"; exit 2; }; fi

script=netns-cluster
# Four digits of the PID: interface names ("${tag}e$i") must fit Linux's 15 characters with an 8-character prefix.
tag="${NATTER_NETNS_PREFIX:-}n$(( $$ % 10000 ))"
subnet="10.213.$(( $$ % 200 + 20 ))"
work="$(mktemp -d /tmp/natter-netns-XXXXXX)"
switch="${tag}sw"
late_index=$nodes             # host and node number of the late joiner
stranger_index=$((nodes + 1)) # host number of the stranger
capture_pid=""
# Namespaces, nodes, the clean-up on exit, digests: shared with the routed and overlay tests.
. scripts/lib/netns.sh
netns_begin "$timeout"

hosts=$(seq 0 $((nodes - 1)))
[ -z "$late" ] || hosts="$hosts $late_index"
[ -z "$stranger" ] || hosts="$hosts $stranger_index"
# The switch: a namespace holding only a bridge.
add_switch "$switch"
for i in $hosts; do
    add_ns "${tag}h$i"
    plug "${tag}h$i" "${tag}e$i" "$switch" "p$i"
    ns "${tag}h$i" ip addr add "$subnet.$((i + 10))/24" dev "${tag}e$i"
done

if [ -n "$capture" ]; then
    # Background processes start through `ip netns exec` itself (not the shell function), so that $! is their PID.
    ip netns exec "$switch" tcpdump -i br0 -U -s 0 -w "$work/bridge.pcap" "tcp port 7718 or udp port 7719" 2>/dev/null &
    capture_pid=$!
    pids+=($!)
    sleep 1
fi
# Each node runs in namespace h$i; by default nodes find each other by discovery, with --named-peers in a ring.
start_cluster_node() {  # node index
    local i=$1 linking=()
    if [ -n "$named" ]; then linking=(--no-discovery --peer "$subnet.$(( (i + nodes - 1) % nodes + 10 )):7718"); fi
    if [ -n "$tracedir" ] && [ "$i" -eq 0 ]; then linking+=(--trace "$tracedir/node0.trace"); fi
    start_node "$i" "${tag}h$i" --listen "0.0.0.0:7718" "${linking[@]}"
}
for i in $(seq 0 $((nodes - 1))); do
    init_node "$i"
    start_cluster_node "$i"
done
# The stranger starts after the nodes, so its first beacons reach every one of them.
if [ -n "$stranger" ]; then
    echo "another network's passphrase" > "$work/stranger.pass"
    "$binary" init --data "$work/stranger" --name stranger --network-file "$work/stranger.pass" >/dev/null
    ip netns exec "${tag}h$stranger_index" "$binary" run --data "$work/stranger" --listen "0.0.0.0:7718" --headless \
        > "$work/out-stranger" 2> "$work/err-stranger" &
    pids+=($!)
fi

echo "netns-cluster: $nodes nodes on $subnet.0/24 in namespaces ${tag}h*, linked by ${named:+named peers}${named:-discovery}"
# Everyone must know everyone's profile before the group is formed.
for i in $(seq 1 $((nodes - 1))); do send 0 "/wait known node$i 30"; done
members=""
for i in $(seq 1 $((nodes - 1))); do members="$members node$i"; done
# A title no packet can hold by chance (the capture check looks for it).
title="lab$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
send 0 "/group create $title$members"
canary="canary-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
send 0 "/msg $title hello from node0 $canary"
for i in $(seq 1 $((nodes - 1))); do wait_for "$i" "node0: hello from node0" 60; done
echo "netns-cluster: group formed, first message everywhere"
# Conversation lines every /digest must show: the group on every node, and "away" on node0 and node1.
memberships=$nodes
if [ -n "$offline" ]; then
    send 0 "/group create away node1"
    wait_for 1 "[away]" 30
    memberships=$((nodes + 2))
    echo "netns-cluster: group \"away\" of node0 and node1 formed"
fi

# Faults: random loss on every node, and the two halves cannot reach each other.
half=$((nodes / 2))
for i in $(seq 0 $((nodes - 1))); do
    ns "${tag}h$i" nft add table inet natterlab
    ns "${tag}h$i" nft add chain inet natterlab in "{ type filter hook input priority 0; }"
    ns "${tag}h$i" nft add rule inet natterlab in numgen random mod 100 "<" "$loss" drop
    for j in $(seq 0 $((nodes - 1))); do
        if { [ "$i" -lt "$half" ] && [ "$j" -ge "$half" ]; } || { [ "$i" -ge "$half" ] && [ "$j" -lt "$half" ]; }; then
            ns "${tag}h$i" nft add rule inet natterlab in ip saddr "$subnet.$((j + 10))" drop
        fi
    done
done
echo "netns-cluster: $loss % loss and a $half/$((nodes - half)) partition for $partition s"
for round in $(seq 1 "$messages"); do
    for i in $(seq 0 $((nodes - 1))); do send "$i" "/msg $title round $round from node$i"; done
    sleep $(( partition / messages > 0 ? partition / messages : 1 ))
done

# Heal: rules go, traffic stays lossy-free; everyone must converge.
for i in $(seq 0 $((nodes - 1))); do ns "${tag}h$i" nft delete table inet natterlab; done
healed=$SECONDS
echo "netns-cluster: healed; waiting for convergence"
converge 30 "$memberships" "${running[@]}" || fail "no convergence within 30 s of the heal" "${running[@]}"
echo "netns-cluster: converged $((SECONDS - healed)) s after the heal: $(latest_digest 0 | head -1)"

if [ -n "$offline" ]; then
    stop_node 1
    for k in 1 2 3; do send 0 "/msg away while you were away $k"; done
    # The non-members must hold node0's new records before node0 leaves: then they alone can hand them on. (With
    # node1 away: the group on the others, "away" on node0 alone.)
    converge 30 "$nodes" "${running[@]}" \
        || fail "the non-members did not get node0's records for \"away\"" "${running[@]}"
    stop_node 0
    echo "netns-cluster: node1 and node0 (the members of \"away\") stopped; non-members hold the records"
    start_node 1
    for k in 1 2 3; do
        wait_for 1 "node0: while you were away $k" 60 || fail "node1 did not get the message through non-members" 1
    done
    echo "netns-cluster: node1 received all of \"away\" from non-members only (store-and-forward)"
    start_node 0
    converge 30 "$memberships" "${running[@]}" || fail "no convergence after node0 and node1 returned" "${running[@]}"
    echo "netns-cluster: node0 and node1 back; converged: $(latest_digest 0 | head -1)"
fi
if [ -n "$late" ]; then
    init_node "$late_index"
    joined=$SECONDS
    start_cluster_node "$late_index"
    converge 60 "$memberships" "${running[@]}" || fail "the late joiner did not catch up" "${running[@]}"
    echo "netns-cluster: late joiner node$late_index caught up on the whole log in $((SECONDS - joined)) s"
fi

# Loss, partitions and restarts are the network's doing: no honest node may be banned for them.
problems="$(check_no_bans)"
if [ -n "$stranger" ]; then
    for i in $(seq 0 $((nodes - 1))); do
        if grep -q "stranger" "$work/out$i"; then problems="$problems node$i saw the stranger;"; fi
        count=$(grep -c "another network key" "$work/err$i" || true)
        # Once per source address: the stranger has one IPv4 and one IPv6 link-local address.
        if [ "$count" -lt 1 ] || [ "$count" -gt 2 ]; then
            problems="$problems node$i logged the stranger $count times, not once per source;"
        fi
    done
    echo "netns-cluster: the stranger with another network key linked with nobody"
fi
if [ -n "$capture" ]; then
    sleep 1
    kill -INT "$capture_pid" 2>/dev/null; sleep 1
    size=$(stat -c %s "$work/bridge.pcap")
    packets=$(tcpdump -r "$work/bridge.pcap" 2>/dev/null | wc -l)
    [ "$packets" -gt 50 ] || problems="$problems the capture holds only $packets packets;"
    # The raw capture is searched: each of these crosses many links many times, so even one copy split across two
    # TCP segments leaves others whole.
    grep -qaF "$canary" "$work/bridge.pcap" && problems="$problems the canary message crossed the wire in clear;"
    grep -qaF "$title" "$work/bridge.pcap" && problems="$problems the group title crossed the wire in clear;"
    hexdump=$(od -An -tx1 -v "$work/bridge.pcap" | tr -d ' \n')
    for i in $(seq 0 $((nodes - 1))); do
        grep -qaF "node$i" "$work/bridge.pcap" && problems="$problems node$i's name crossed the wire in clear;"
        key=$(cat "$work/key$i")
        if [ -n "$key" ] && grep -qF "$key" <<<"$hexdump"; then
            problems="$problems node$i's identity key is visible on the wire;"
        fi
    done
    echo "netns-cluster: captured $packets natter packets ($size bytes): looked for the canary, the title, $nodes names and $nodes identity keys"
fi
if [ -n "$tracedir" ]; then
    # node0's last /digest was taken at the last convergence; ask again so nothing written since is missed.
    send 0 "/digest"; sleep 1
    expected="$(latest_digest 0 | sort)"
    stop_node 0
    rm -rf "$tracedir/node0"; cp -a "$work/node0" "$tracedir/node0"
    if "$binary" lab replay "$tracedir/node0.trace" --data "$tracedir/node0" > "$tracedir/replay.out" 2>&1; then
        replayed="$(grep -E '^(log|conversation) ' "$tracedir/replay.out" | sort)"
        if [ "$replayed" = "$expected" ]; then
            size=$(stat -c %s "$tracedir/node0.trace")
            echo "netns-cluster: node0's trace ($size bytes) replays to its last /digest: $(head -1 "$tracedir/replay.out")"
        else
            problems="$problems the replay of node0's trace reached other digests than node0's last /digest;"
        fi
    else
        why=$(grep -v '^conversation' "$tracedir/replay.out" | tr '\n' ' ')
        problems="$problems the replay of node0's trace failed: $why;"
    fi
fi
if [ -z "$problems" ]; then
    echo "netns-cluster: passed: $(latest_digest 0 | head -1)"
    echo "1 passed, 0 failed"
else
    fail "$problems" "${running[@]}"
fi
