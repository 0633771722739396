#!/usr/bin/env bash
# The whole test suite: installs missing system packages, then builds and runs every test.
# `.ci/run` runs exactly this. Long simulations, soak and fuzz runs have their own scripts.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

# An independent implementation (Python, written from docs/protocol.md alone) must rebuild every record vector.
if python3 -c "import cryptography" 2>/dev/null; then
    python3 scripts/crosscheck_record_vectors.py docs/protocol.md
else
    echo "skipping the Python record-vector cross-check: python3 with the cryptography package is not installed"
fi

swift build --build-tests

# Real processes in network namespaces, with packet loss and a partition (needs root; CI runs as root).
if [ "$(id -u)" -eq 0 ]; then
    scripts/netns-cluster.sh --nodes 5 --loss 10 --partition 6 --messages 3 --capture --stranger \
        --offline-member --late-joiner --timeout 300
else
    echo "skipping the network-namespace cluster test: it needs root"
fi

swift test --skip-build
