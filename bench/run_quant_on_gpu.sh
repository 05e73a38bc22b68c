#!/usr/bin/env bash
# One GPU session for the quantized matmul work, run on the device machine
# from the repository root with the release build in $1 (default build-gpu).
set -uo pipefail
b="${1:-build-gpu}"
out="${OUT:-/tmp/kaio-out}"
mkdir -p "$out"
t=$b/tests/kaio_tests
timeout 70 $t --gtest_filter='*Quant*Gpu*:*GpuQuant*' > "$out/gpu-tests.log" 2>&1; echo "gpu tests exit $?"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests from .* ran|random seed' "$out/gpu-tests.log" | head -20
grep -B2 -A10 'Failure' "$out/gpu-tests.log" | head -60
timeout 80 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $t \
  --gtest_filter='GpuQuant*:-GpuQuantInt4.DecodeRowsDtypesAndStrides' > "$out/memcheck-quant.log" 2>&1
echo "memcheck exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck-quant.log" | tail -4
grep -m5 -A6 'Invalid' "$out/memcheck-quant.log"
timeout 85 $b/bench/bench_quant --iters 20 > "$out/bench_quant.log" 2>&1; echo "bench exit $?"
cat "$out/bench_quant.log" | tail -50
