#!/usr/bin/env bash
# A real-network twin of the lab: N natter nodes, each in its own network namespace, joined by a bridge that lives
# in a namespace of its own. Nodes link up (named peers in a ring until discovery lands), a group is formed and
# traffic flows; then nftables rules inside the namespaces drop a share of packets and split the nodes in two
# halves; after the heal every node's log digest and the group's digest must be equal.
#
# Usage: sudo scripts/netns-cluster.sh [--nodes N] [--loss PERCENT] [--partition SECONDS] [--messages M]
#                                     [--named-peers] [--capture] [--stranger] [--binary PATH]
# By default nodes find each other by UDP discovery alone; --named-peers links them in a ring of --peer instead.
# --capture records every packet on the bridge (tcpdump, natter's ports only) and checks that natter traffic was
# seen and that no packet holds the canary message, an identity key or the group title.
# --stranger adds a node with another network key: nobody may link with it, and each node logs it at most once.
# Everything it creates (namespaces, processes, temp files) is removed on exit, even on failure; it is bounded in
# time (every wait has a timeout) and only ever sends traffic inside its own namespaces.
set -euo pipefail

nodes=6
loss=10
partition=30
messages=5
binary=""
named=""
capture=""
stranger=""
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
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

if [ "$(id -u)" -ne 0 ]; then echo "netns-cluster: needs root (ip netns)"; exit 2; fi
command -v nft >/dev/null || { echo "netns-cluster: needs nft (apt-get install nftables)"; exit 2; }
cd "$(dirname "$0")/.."
[ -n "$binary" ] || binary="$(pwd)/.build/debug/natter"
[ -x "$binary" ] || { echo "netns-cluster: build first (swift build); no $binary"; exit 2; }
if [ -n "$capture" ]; then command -v tcpdump >/dev/null || { echo "netns-cluster: --capture needs tcpdump"; exit 2; }; fi

tag="n$$"
subnet="10.213.$(( $$ % 200 + 20 ))"
work="$(mktemp -d /tmp/natter-netns-XXXXXX)"
switch="${tag}sw"
pids=()

cleanup() {
    set +e
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
    for i in $(seq 0 "$nodes"); do ip netns del "${tag}h$i" 2>/dev/null; done
    ip netns del "$switch" 2>/dev/null
    if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

ns() { ip netns exec "$1" "${@:2}"; }

hosts=$nodes
[ -z "$stranger" ] || hosts=$((nodes + 1))  # the stranger is host number $nodes
# The switch: a namespace holding only a bridge.
ip netns add "$switch"
ns "$switch" ip link add br0 type bridge
ns "$switch" ip link set br0 up
for i in $(seq 0 $((hosts - 1))); do
    host="${tag}h$i"
    ip netns add "$host"
    ip link add "${tag}e$i" netns "$host" type veth peer name "p$i" netns "$switch"
    ns "$switch" ip link set "p$i" master br0 up
    ns "$host" ip addr add "$subnet.$((i + 10))/24" dev "${tag}e$i"
    ns "$host" ip link set "${tag}e$i" up
    ns "$host" ip link set lo up
done

if [ -n "$capture" ]; then
    # Background processes start through `ip netns exec` itself (not the shell function), so that $! is their PID.
    ip netns exec "$switch" tcpdump -i br0 -U -s 0 -w "$work/bridge.pcap" "tcp port 7718 or udp port 7719" 2>/dev/null &
    pids+=($!)
    sleep 1
fi
# Start the nodes; each reads commands from a FIFO and writes what it prints to a log.
for i in $(seq 0 $((nodes - 1))); do
    host="${tag}h$i"
    "$binary" init --data "$work/node$i" --name "node$i" >/dev/null
    "$binary" id --data "$work/node$i" | awk '/^identity/ {print $2}' > "$work/key$i"
    mkfifo "$work/in$i"
    previous=$(( (i + nodes - 1) % nodes ))
    if [ -n "$named" ]; then
        linking=(--no-discovery --peer "$subnet.$((previous + 10)):7718")
    else
        linking=()
    fi
    ip netns exec "$host" "$binary" run --data "$work/node$i" --listen "0.0.0.0:7718" \
        "${linking[@]}" < "$work/in$i" > "$work/out$i" 2> "$work/err$i" &
    pids+=($!)
    exec {fd}> "$work/in$i"
    eval "fd$i=$fd"
done
# The stranger starts after the nodes, so its first beacons reach every one of them.
if [ -n "$stranger" ]; then
    echo "another network's passphrase" > "$work/stranger.pass"
    "$binary" init --data "$work/stranger" --name stranger --network-file "$work/stranger.pass" >/dev/null
    ip netns exec "${tag}h$nodes" "$binary" run --data "$work/stranger" --listen "0.0.0.0:7718" --headless \
        > "$work/out-stranger" 2> "$work/err-stranger" &
    pids+=($!)
fi
send() { local fd; eval "fd=\$fd$1"; echo "$2" >&"$fd"; }
wait_for() {  # node, text, seconds
    local deadline=$((SECONDS + $3))
    until grep -qF -- "$2" "$work/out$1"; do
        [ $SECONDS -lt $deadline ] || { echo "timeout: node$1 never printed '$2'"; tail -5 "$work/err$1"; return 1; }
        sleep 0.2
    done
}

echo "netns-cluster: $nodes nodes on $subnet.0/24 in namespaces ${tag}h*, linked by ${named:+named peers}${named:-discovery}"
# Everyone must know everyone's profile before the group is formed.
for i in $(seq 1 $((nodes - 1))); do send 0 "/wait known node$i 30"; done
members=""
for i in $(seq 1 $((nodes - 1))); do members="$members node$i"; done
send 0 "/group create lab$members"
canary="canary-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
send 0 "/msg lab hello from node0 $canary"
for i in $(seq 1 $((nodes - 1))); do wait_for "$i" "node0: hello from node0" 60; done
echo "netns-cluster: group formed, first message everywhere"

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
    for i in $(seq 0 $((nodes - 1))); do send "$i" "/msg lab round $round from node$i"; done
    sleep $(( partition / messages > 0 ? partition / messages : 1 ))
done

# Heal: rules go, traffic stays lossy-free; everyone must converge.
for i in $(seq 0 $((nodes - 1))); do ns "${tag}h$i" nft delete table inet natterlab; done
healed=$SECONDS
echo "netns-cluster: healed; waiting for convergence"
converged=""
for attempt in $(seq 1 60); do
    for i in $(seq 0 $((nodes - 1))); do send "$i" "/digest"; done
    sleep 0.5
    digests=$(for i in $(seq 0 $((nodes - 1))); do grep -E '^(log|conversation) ' "$work/out$i" | tail -2 | tr '\n' ' '; echo; done | sort -u)
    if [ "$(echo "$digests" | wc -l)" -eq 1 ] && echo "$digests" | grep -q conversation; then
        converged=yes
        break
    fi
done
problems=""
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
    kill -INT "${pids[0]}" 2>/dev/null; sleep 1
    size=$(stat -c %s "$work/bridge.pcap")
    packets=$(tcpdump -r "$work/bridge.pcap" 2>/dev/null | wc -l)
    [ "$packets" -gt 50 ] || problems="$problems the capture holds only $packets packets;"
    grep -qa "$canary" "$work/bridge.pcap" && problems="$problems the canary crossed the wire in clear;"
    grep -qa "lab" <(tcpdump -r "$work/bridge.pcap" -A 2>/dev/null | grep -a "lab$members") && problems="$problems the title crossed the wire;"
    for i in $(seq 0 $((nodes - 1))); do
        key=$(cat "$work/key$i")
        if [ -n "$key" ] && od -An -tx1 -v "$work/bridge.pcap" | tr -d ' \n' | grep -q "$key"; then
            problems="$problems node$i's identity key is visible on the wire;"
        fi
    done
    echo "netns-cluster: captured $packets natter packets ($size bytes): no canary, identity key or title in clear"
fi
if [ -n "$converged" ] && [ -z "$problems" ]; then
    echo "netns-cluster: converged $((SECONDS - healed)) s after the heal: $digests"
    echo "1 passed, 0 failed"
elif [ -n "$converged" ]; then
    echo "netns-cluster: FAILED:$problems"
    echo "0 passed, 1 failed"
    exit 1
else
    echo "netns-cluster: DIVERGED after 30 s:"
    echo "$digests"
    for i in $(seq 0 $((nodes - 1))); do
        echo "--- node$i: last lines of its output and errors"
        tail -3 "$work/out$i"; tail -5 "$work/err$i"
    done
    echo "0 passed, 1 failed"
    exit 1
fi
