#!/usr/bin/env bash
# One GPU session for the bandwidth-bound decode kernels (int4 W4A16 decode,
# fused QKV int4, GGUF dequant-matvec), run on the device machine from the
# repository root with the release build in $1 (default build-gpu): the
# quantized and k-quant GPU tests, compute-sanitizer memcheck on the decode
# tests (MEMCHECK=0 skips it), then the decode rows of bench_quant and the
# matvec rows of bench_kquant. A summary is printed last.
set -uo pipefail
b="${1:-build-gpu}" out="${OUT:-/tmp/kaio-out}"
t=$b/tests/kaio_tests
mkdir -p "$out" && nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
timeout 100 $t --gtest_filter='GpuQuant*:GpuKquant*' > "$out/gpu-tests.log" 2>&1
echo "gpu tests exit $?" | tee "$out/summary.txt"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests from .* ran' "$out/gpu-tests.log" | tee -a "$out/summary.txt"
grep -B2 -A10 'Failure' "$out/gpu-tests.log" | head -60
if [ "${MEMCHECK:-1}" != 0 ]; then
  timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $t \
    --gtest_filter='GpuQuantInt4.ContiguousKKernelsOfEveryWarpCount:GpuQuantInt4.EveryGroupSizeWithAndWithoutZeros:GpuQuantInt4.FusedQkvMatchesThreeSeparateProducts:GpuKquant.QuantMatmulMatchesTheF64Reference' \
    > "$out/memcheck.log" 2>&1
  echo "memcheck exit $?" | tee -a "$out/summary.txt"
  grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck.log" | tail -3 | tee -a "$out/summary.txt"
  grep -m5 -A6 'Invalid' "$out/memcheck.log"
fi
timeout 60 $b/bench/bench_quant --iters 20 --decode > "$out/bench_quant.log" 2>&1
echo "bench_quant exit $?" | tee -a "$out/summary.txt"
timeout 60 $b/bench/bench_kquant --matvec > "$out/bench_kquant.log" 2>&1
echo "bench_kquant exit $?" | tee -a "$out/summary.txt"
cat "$out/bench_quant.log" "$out/bench_kquant.log"
echo "== summary"; cat "$out/summary.txt"
