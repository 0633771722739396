#!/usr/bin/env bash
# The whole test suite: installs missing system packages, then builds and runs every test.
# `.ci/run` runs exactly this. Long simulations, soak and fuzz runs have their own scripts.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
swift build --build-tests
swift test --skip-build
