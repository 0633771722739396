#!/usr/bin/env bash
# Fuzzes the record decoder, the content-operation decoder, and the file- and typing-frame decoders (target
# natter-fuzz) with libFuzzer for SECONDS seconds (default 60).
# Usage: scripts/fuzz.sh [SECONDS]   Set FUZZ_ASAN=1 to add AddressSanitizer (slower).
# New inputs go to .build-fuzz/record-corpus (kept between runs, never committed); the seeds in
# Tests/Fuzz/record-corpus stay untouched. A crash leaves its input in fuzz-artifacts/: replay it with
# `swift run natter-fuzz fuzz-artifacts/crash-…` and add it to the seed corpus once fixed.
set -euo pipefail

seconds="${1:-60}"
cd "$(dirname "$0")/.."

sanitize=(--sanitize=fuzzer)
if [ "${FUZZ_ASAN:-0}" = 1 ]; then
    # `--sanitize=fuzzer --sanitize=address` would build without coverage (the last flag wins): pass both to swiftc.
    sanitize+=(-Xswiftc -sanitize=fuzzer,address)
fi
swift build --product natter-fuzz "${sanitize[@]}" -Xswiftc -DFUZZING --scratch-path .build-fuzz

mkdir -p .build-fuzz/record-corpus fuzz-artifacts
# SWIFT_BACKTRACE=enable=no: otherwise Swift's backtracer swallows the crash and libFuzzer writes no artifact.
# -max_len above the 65,536-byte record cap, so the size check is fuzzed too (lengths grow gradually).
SWIFT_BACKTRACE=enable=no ./.build-fuzz/debug/natter-fuzz \
    -max_total_time="$seconds" -max_len=65600 -print_final_stats=1 -artifact_prefix=fuzz-artifacts/ \
    .build-fuzz/record-corpus Tests/Fuzz/record-corpus
