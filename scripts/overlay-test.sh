#!/usr/bin/env bash
# natter over an overlay it did not invent ("Beyond one LAN", docs/beyond-lan.md): Yggdrasil joins two to four sites.
#
# Each site is a LAN (a bridge in a namespace of its own) of natter nodes with discovery on, and a router namespace
# that runs `yggdrasil` (multicast peering off) with a TUN interface. The routers meet on a backbone bridge, and
# only there: their Yggdrasil instances peer over `tcp://` (full mesh), nothing else is routed between sites (no
# IPv4 forwarding, no route to another site's LAN). Each site's LAN holds the router's Yggdrasil /64 (`300:…`, inside
# 200::/7), so its hosts reach the other sites through their router's Yggdrasil; host 0 of each site names host 0 of
# the previous site (a ring) by its `300:…` address with `--peer`.
#
# Checks: a group spanning every site converges (equal log and conversation digests); one site's backbone link drops
# (a message written there meanwhile reaches its own site's nodes and no other site's) and returns, and everything
# converges again; a capture on the backbone sees Yggdrasil's traffic and not one natter packet (no beacon, no natter
# TCP: the sites are joined only through Yggdrasil).
#
# Usage: sudo scripts/overlay-test.sh [--sites N (2-4, default 3)] [--hosts H (1-4 per site, default 2)]
#                                     [--drop SECONDS (default 15)] [--timeout SECONDS (default 420)] [--binary PATH]
# Namespaces are named ${NATTER_NETNS_PREFIX}o<pid>…; every process (natter, yggdrasil, tcpdump) is stopped by PID and
# every namespace deleted on exit, even on failure; the whole run is bounded by --timeout. KEEP=1 keeps the work
# directory (configurations, logs, captures).
set -euo pipefail

sites=3
hosts=2
drop=15
timeout=420
binary=""
while [ $# -gt 0 ]; do
    case "$1" in
        --sites) sites="$2"; shift 2 ;;
        --hosts) hosts="$2"; shift 2 ;;
        --drop) drop="$2"; shift 2 ;;
        --timeout) timeout="$2"; shift 2 ;;
        --binary) binary="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$sites" -ge 2 ] && [ "$sites" -le 4 ] || { echo "overlay-test: --sites must be 2 to 4"; exit 2; }
[ "$hosts" -ge 1 ] && [ "$hosts" -le 4 ] || { echo "overlay-test: --hosts must be 1 to 4"; exit 2; }
if [ "$(id -u)" -ne 0 ]; then echo "overlay-test: needs root (ip netns, TUN)"; exit 2; fi
yggdrasil=$(command -v yggdrasil || echo /usr/sbin/yggdrasil)
[ -x "$yggdrasil" ] || { echo "overlay-test: needs yggdrasil (scripts/install-deps.sh installs it)"; exit 2; }
command -v tcpdump >/dev/null || { echo "overlay-test: needs tcpdump (scripts/install-deps.sh)"; exit 2; }
[ -c /dev/net/tun ] || { echo "overlay-test: needs /dev/net/tun for Yggdrasil's interface"; exit 2; }
cd "$(dirname "$0")/.."
[ -n "$binary" ] || binary="$(pwd)/.build/debug/natter"
[ -x "$binary" ] || { echo "overlay-test: build first (swift build); no $binary"; exit 2; }

script=overlay-test
tag="${NATTER_NETNS_PREFIX:-}o$$"
net="10.$(( $$ % 200 + 20 ))"   # the backbone is $net.0.0/24; site s's LAN is $net.(s+1).0/24
work="$(mktemp -d /tmp/natter-overlay-XXXXXX)"
. scripts/lib/netns.sh
netns_begin "$timeout"
nodes=$((sites * hosts))
site_of() { echo $(($1 / hosts)); }
all_nodes=$(seq 0 $((nodes - 1)))

# The backbone: the only place where sites meet.
add_switch "${tag}bb"
ip netns exec "${tag}bb" tcpdump -i br0 -n -U -w "$work/backbone.pcap" 2>/dev/null &
pids+=($!)

declare -A prefix  # site -> its Yggdrasil /64 prefix, e.g. 302:43ef:d01e:7344:
for s in $(seq 0 $((sites - 1))); do
    router="${tag}r$s"
    add_ns "$router"
    plug "$router" wan "${tag}bb" "site$s"
    ns "$router" ip addr add "$net.0.$((s + 1))/24" dev wan
    # Yggdrasil: a fresh key, a listener on the backbone, peers with every site before it, no multicast peering,
    # no admin socket (several instances share one file system).
    key=$("$yggdrasil" -genconf -json | grep -o '"PrivateKey": *"[0-9a-f]*"' | grep -o '[0-9a-f]\{128\}')
    peers=""
    for t in $(seq 0 $((s - 1))); do peers="$peers${peers:+,}\"tcp://$net.0.$((t + 1)):12345\""; done
    cat > "$work/ygg$s.json" <<EOF
{"PrivateKey": "$key", "Listen": ["tcp://$net.0.$((s + 1)):12345"], "Peers": [$peers],
 "MulticastInterfaces": [], "AdminListen": "none", "IfName": "auto", "IfMTU": 65535, "NodeInfoPrivacy": true}
EOF
    subnet=$("$yggdrasil" -useconffile "$work/ygg$s.json" -subnet)   # 302:43ef:d01e:7344::/64
    prefix[$s]=${subnet%::/64}:
    ip netns exec "$router" "$yggdrasil" -useconffile "$work/ygg$s.json" > "$work/ygg$s.log" 2>&1 &
    pids+=($!)
    # The site's LAN: IPv4 for discovery among its hosts, the Yggdrasil /64 routed to the overlay by the router.
    add_switch "${tag}s$s"
    plug "$router" lan "${tag}s$s" "router"
    ns "$router" ip addr add "$net.$((s + 1)).1/24" dev lan
    ns "$router" ip -6 addr add "${prefix[$s]}:1/64" dev lan nodad
    ns "$router" sysctl -qw net.ipv6.conf.all.forwarding=1
    for j in $(seq 0 $((hosts - 1))); do
        i=$((s * hosts + j))
        add_ns "${tag}h$i"
        plug "${tag}h$i" "e$i" "${tag}s$s" "p$i"
        ns "${tag}h$i" ip addr add "$net.$((s + 1)).$((j + 10))/24" dev "e$i"
        ns "${tag}h$i" ip -6 addr add "${prefix[$s]}:$((j + 10))/64" dev "e$i" nodad
        ns "${tag}h$i" ip -6 route add 200::/7 via "${prefix[$s]}:1"
    done
done
echo "overlay-test: $sites sites of $hosts nodes, joined only by Yggdrasil over the backbone $net.0.0/24"

for i in $all_nodes; do init_node "$i"; done
for i in $all_nodes; do
    s=$(site_of "$i")
    named=()
    if [ $((i % hosts)) -eq 0 ]; then
        previous=$(( (s + sites - 1) % sites ))
        named=(--peer "[${prefix[$previous]}:10]:7718")
    fi
    start_node "$i" "${tag}h$i" --listen "[::]:7718" "${named[@]}"
done

for i in $(seq 1 $((nodes - 1))); do send 0 "/wait known node$i 90"; done
members=""
for i in $(seq 1 $((nodes - 1))); do members="$members node$i"; done
started=$SECONDS
send 0 "/group create overlay$members"
for i in $(seq 1 $((nodes - 1))); do wait_for "$i" "[overlay]" 120 || fail "node$i never joined the group" $all_nodes; done
for i in $all_nodes; do send "$i" "/msg overlay hello from node$i at site $(site_of "$i")"; done
converge 90 "$nodes" $all_nodes || fail "no convergence across the sites" $all_nodes
echo "overlay-test: converged across $sites sites $((SECONDS - started)) s after the group was created:" \
    "$(latest_digest 0 | head -1)"

# One site's backbone link drops: its nodes keep talking among themselves, nobody else hears them until it returns.
cut=$((sites - 1))
ns "${tag}r$cut" ip link set wan down
echo "overlay-test: site $cut's backbone link is down for $drop s"
writer=$((cut * hosts))
send "$writer" "/msg overlay while site $cut was cut off"
send 0 "/msg overlay while site $cut was away"
if [ "$hosts" -gt 1 ]; then
    wait_for $((writer + 1)) "node$writer: while site $cut was cut off" 30 \
        || fail "site $cut's own LAN did not carry its message" $all_nodes
fi
sleep "$drop"
for i in $all_nodes; do
    if [ "$(site_of "$i")" != "$cut" ] && grep -qF "while site $cut was cut off" "$work/out$i"; then
        fail "node$i (site $(site_of "$i")) got site $cut's message while its link was down" $all_nodes
    fi
done
ns "${tag}r$cut" ip link set wan up
returned=$SECONDS
echo "overlay-test: site $cut's link is back"
converge 150 "$nodes" $all_nodes || fail "no convergence after site $cut's link returned" $all_nodes
echo "overlay-test: converged again $((SECONDS - returned)) s after the link returned: $(latest_digest 0 | head -1)"

for i in $all_nodes; do stop_node "$i"; done
for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
sleep 1
problems="$(check_no_bans)"
dump=$(tcpdump -n -r "$work/backbone.pcap" 2>/dev/null)
overlay=$(echo "$dump" | grep -c '\.12345[ :]' || true)
natter=$(echo "$dump" | grep -cE '\.(7718|7719)[ :]' || true)
echo "overlay-test: backbone capture: $overlay Yggdrasil packets, $natter natter packets (beacons or links)"
[ "$overlay" -gt 0 ] || problems="$problems no Yggdrasil traffic on the backbone (the capture saw nothing?);"
[ "$natter" -eq 0 ] || problems="$problems natter packets on the backbone outside Yggdrasil;"
report "$problems"
