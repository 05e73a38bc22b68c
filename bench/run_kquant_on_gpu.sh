#!/usr/bin/env bash
# One GPU session for the k-quant work, run on the device machine from the
# repository root with the release build carried in build-gpu/ (or the
# folder given as $1): the GPU tests, bench_kquant, then compute-sanitizer
# memcheck on the tests with the odd shapes, racecheck and synccheck on the
# matmul test, whose sm_90 stream kernels synchronise through mbarriers
# (last, so a time limit costs only them). MEMCHECK_S, RACECHECK_S,
# SYNCCHECK_S (seconds) and RACECHECK_FILTER (a gtest filter) override the
# sanitizer steps' defaults.
set -uo pipefail
out="${OUT:-/tmp/kaio-out}"
b="${1:-build-gpu}"
mkdir -p "$out"
t=$b/tests/kaio_tests
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
$t --gtest_filter='*Kquant*' > "$out/gpu-tests.log" 2>&1; echo "gpu tests exit $?"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests from .* ran|^\[       OK|^\[  FAILED' "$out/gpu-tests.log" | head -30
grep -B2 -A12 'Failure' "$out/gpu-tests.log" | head -150
$b/bench/bench_kquant > "$out/bench_kquant.log" 2>&1; echo "bench exit $?"
cat "$out/bench_kquant.log"
timeout "${MEMCHECK_S:-90}" compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $t \
  --gtest_filter='GpuKquant.QuantizeOddShapesAndPaddedStrides:GpuKquant.DequantizeMatchesTheReference:GpuKquant.QuantMatmulMatchesTheF64Reference' \
  > "$out/memcheck.log" 2>&1
echo "memcheck exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck.log" | tail -3
timeout "${RACECHECK_S:-200}" compute-sanitizer --tool racecheck --error-exitcode 9 $t \
  --gtest_filter="${RACECHECK_FILTER:-GpuKquant.QuantMatmulMatchesTheF64Reference}" > "$out/racecheck.log" 2>&1
echo "racecheck exit $?"; grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/racecheck.log" | tail -3
timeout "${SYNCCHECK_S:-200}" compute-sanitizer --tool synccheck --error-exitcode 9 $t \
  --gtest_filter=GpuKquant.QuantMatmulMatchesTheF64Reference > "$out/synccheck.log" 2>&1
echo "synccheck exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/synccheck.log" | tail -3
