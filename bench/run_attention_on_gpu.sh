#!/usr/bin/env bash
# One GPU session for the attention work, run on the device machine from the
# directory that holds the release build (build-gpu/) and bench/bench_attention.py.
# Writes logs under $OUT; prints a short summary.
set -uo pipefail
out="${OUT:-/tmp/kaio-out}"
mkdir -p "$out"
t=build-gpu/tests/kaio_tests
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 90 $t --gtest_filter='*GpuAttention*' > "$out/gpu-attention-tests.log" 2>&1
echo "gpu attention tests exit $?"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests from .* ran|^\[       OK|^\[  FAILED' "$out/gpu-attention-tests.log" | head -20
grep -B2 -A6 'Failure' "$out/gpu-attention-tests.log" | head -60
timeout 35 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $t \
  --gtest_filter='GpuAttention*.SanitizerSmall' > "$out/memcheck-attention.log" 2>&1
echo "memcheck exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck-attention.log" | tail -3
timeout 45 compute-sanitizer --tool racecheck --error-exitcode 9 $t \
  --gtest_filter='GpuAttention*.SanitizerSmall' > "$out/racecheck-attention.log" 2>&1
echo "racecheck exit $?"; grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/racecheck-attention.log" | tail -3
timeout "${BENCH_TIMEOUT:-70}" python3 bench/bench_attention.py --lib build-gpu/src/libkaio.so \
  --json "$out/bench_attention.json" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench_attention.log"
echo "bench exit ${PIPESTATUS[0]}"
