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
swift test --skip-build
