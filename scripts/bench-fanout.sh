#!/usr/bin/env bash
# The fan-out benchmark (docs/performance.md, "Groups at the size of a room"): N real natter processes in one private
# network namespace (loopback, discovery on), one group of all N, every member viewing it, K messages from rotating
# senders one every half second. Prints per-delivery and reached-all latency, messages lost, per-node CPU share and
# RSS, and the chat's records per message beyond the messages (the receipts).
#
# Usage: sudo scripts/bench-fanout.sh [--nodes N] [--messages K] [--interval SECONDS] [--binary PATH]
# (default: 25 nodes, 40 messages, 0.5 s, .build/release/natter). Everything it makes (the namespace, the processes,
# the data directories) is removed on exit, even on failure; the run is bounded in time; processes are stopped by PID.
# With FANOUT_SLOW=1 in the environment it also lists every delivery slower than 200 ms (message, member, ms), with
# when its sender showed the message as written (a delay there is the sender's, not the network's).
set -euo pipefail

nodes=25
messages=40
interval=0.5
binary=""
while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) nodes="$2"; shift 2 ;;
        --messages) messages="$2"; shift 2 ;;
        --interval) interval="$2"; shift 2 ;;
        --binary) binary="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$(id -u)" -ne 0 ]; then echo "bench-fanout: needs root (ip netns)"; exit 2; fi
cd "$(dirname "$0")/.."
[ -n "$binary" ] || binary="$(pwd)/.build/release/natter"
[ -x "$binary" ] || { echo "bench-fanout: build first (swift build -c release); no $binary"; exit 2; }

script=bench-fanout
work="$(mktemp -d /tmp/natter-fanout-XXXXXX)"
source scripts/lib/netns.sh
# Setup (about a second a node on a loaded 2-core machine), the message phase, and the stops.
netns_begin $((120 + nodes * 6 + messages * 2))

namespace="${NATTER_NETNS_PREFIX:-}fanout$$"
add_ns "$namespace"
ns "$namespace" ip link set lo multicast on
# The driver starts every node inside the namespace and stops each by PID before it returns.
ns "$namespace" python3 scripts/lib/fanout.py --binary "$binary" --work "$work" --nodes "$nodes" \
    --messages "$messages" --interval "$interval" &
pids+=($!)
driver=$!
status=0
wait "$driver" || status=$?
exit $status
