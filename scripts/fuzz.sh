#!/usr/bin/env bash
# Fuzzes every decoder of bytes that arrive from the network (natter-fuzz: record, content-operation, commit, profile,
# sync, file-frame, typing-frame, beacon, handshake, channel), and of trace files (trace), with libFuzzer, SECONDS
# seconds each (default 60), one target after another; or only the targets named after the seconds.
# Usage: scripts/fuzz.sh [SECONDS [TARGET…]]   Set FUZZ_ASAN=1 to add AddressSanitizer (slower).
# Run it under `nice -n 10` on a shared machine. New inputs go to .build-fuzz/corpus/TARGET (kept between runs, never
# committed); the seeds in Tests/Fuzz/TARGET stay untouched. A crash leaves its input in fuzz-artifacts/TARGET/:
# replay it with `.build/debug/natter-fuzz TARGET fuzz-artifacts/TARGET/crash-…`, fix it, and add it to
# Tests/Fuzz/TARGET (CI replays every seed corpus: `natter-fuzz --all Tests/Fuzz`). Each target's last lines
# (executions, coverage, crashes) are collected in fuzz-artifacts/summary.txt.
set -euo pipefail

seconds="${1:-60}"
shift || true
cd "$(dirname "$0")/.."

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    targets=(record content-operation commit profile sync file-frame typing-frame beacon handshake channel trace)
fi

sanitize=(--sanitize=fuzzer)
if [ "${FUZZ_ASAN:-0}" = 1 ]; then
    # `--sanitize=fuzzer --sanitize=address` would build without coverage (the last flag wins): pass both to swiftc.
    sanitize+=(-Xswiftc -sanitize=fuzzer,address)
fi
swift build --product natter-fuzz "${sanitize[@]}" -Xswiftc -DFUZZING --scratch-path .build-fuzz

mkdir -p fuzz-artifacts
: >fuzz-artifacts/summary.txt
status=0
for target in "${targets[@]}"; do
    [ -d "Tests/Fuzz/$target" ] || { echo "no seed corpus Tests/Fuzz/$target" >&2; exit 2; }
    mkdir -p ".build-fuzz/corpus/$target" "fuzz-artifacts/$target"
    log="fuzz-artifacts/$target.log"
    stamp="fuzz-artifacts/$target/.started"
    touch "$stamp"
    echo "fuzzing $target for $seconds s (log: $log)"
    # SWIFT_BACKTRACE=enable=no: otherwise Swift's backtracer swallows the crash and libFuzzer writes no artifact.
    # -max_len above the 65,536-byte record cap, so size checks are fuzzed too (lengths grow gradually).
    if ! NATTER_FUZZ_TARGET="$target" SWIFT_BACKTRACE=enable=no ./.build-fuzz/debug/natter-fuzz \
        -max_total_time="$seconds" -max_len=65600 -print_final_stats=1 -artifact_prefix="fuzz-artifacts/$target/" \
        ".build-fuzz/corpus/$target" "Tests/Fuzz/$target" >"$log" 2>&1; then
        status=1
        echo "$target: CRASH (see $log and fuzz-artifacts/$target/)" | tee -a fuzz-artifacts/summary.txt
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
    features=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
    # Only this run's artifacts: earlier ones stay until their fix is in the seed corpus.
    crashes=$(find "fuzz-artifacts/$target" -newer "$stamp" \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' \) | wc -l)
    echo "$target: $seconds s, $runs executions, coverage $coverage edges, $features features, $crashes crashes" \
        | tee -a fuzz-artifacts/summary.txt
done
exit "$status"
