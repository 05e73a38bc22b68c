#!/usr/bin/env bash
# One GPU session for the matmul work, run on the device machine from the
# repository root with the release build carried in build-gpu/.
set -uo pipefail
out="${OUT:-/tmp/kaio-out}"
mkdir -p "$out"
t=build-gpu/tests/kaio_tests
b=build-gpu/bench/bench_matmul
$t --gtest_filter='*Gpu*' > "$out/gpu-tests.log" 2>&1; echo "gpu tests exit $?"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests from .* ran' "$out/gpu-tests.log" | head -20
grep -A8 'Failure' "$out/gpu-tests.log" | head -40
small='GpuMatmul.EveryVariantDtypeLayoutAndOutput:GpuMatmul.KaioNamedEntryPoints:GpuMatmul.BackwardMatchesReference:GpuMatmul.DecodeShapesOnTheGemvPath:GpuMatmul.SplitKIsDeterministic'
compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $t --gtest_filter="$small" > "$out/memcheck-matmul.log" 2>&1
echo "memcheck exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck-matmul.log" | tail -3
compute-sanitizer --tool racecheck --error-exitcode 9 $t --gtest_filter='GpuMatmul.KaioNamedEntryPoints:GpuMatmul.EveryVariantDtypeLayoutAndOutput' > "$out/racecheck-matmul.log" 2>&1
echo "racecheck exit $?"; grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/racecheck-matmul.log" | tail -3
$b --json "$out/bench_matmul.json" > "$out/bench_matmul.log" 2>&1; echo "bench exit $?"
# Profiles: the sm_80 cp.async kernel's shared-memory bank conflicts at
# 4096^3, and what limits the Hopper kernel at M = 128 (split K) and 4096^3.
sections='--section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section Occupancy'
ncu --clock-control none $sections -k regex:kaio_matmul_sm80_async_f16_nn -c 1 \
  $b --shape 4096,4096,4096 --dtype f16 --variants async --iters 1 > "$out/ncu-sm80.txt" 2>&1
echo "ncu sm80 exit $?"
ncu --clock-control none $sections -k regex:'kaio_matmul_sm90|kaio_splitk' -c 2 \
  $b --shape 128,4096,4096 --layout nt --dtype f16 --variants auto --iters 1 > "$out/ncu-sm90-m128.txt" 2>&1
echo "ncu sm90 exit $?"
grep -E 'Shared.*(Bank|Conflict)|Bank Conflicts|bank' "$out/ncu-sm80.txt" | head -8
grep -E '^  kaio_|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput' "$out/ncu-sm90-m128.txt" | head -12
grep -E 'x .* (nn|nt) |geometric|cases|!!' "$out/bench_matmul.log" | tail -64
