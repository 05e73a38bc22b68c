#!/usr/bin/env bash
# One GPU session for the matmul work, run on the device machine from the
# repository root with the release build carried in build-gpu/.
set -uo pipefail
out="${OUT:-/tmp/kaio-out}"
mkdir -p "$out"
t=build-gpu/tests/kaio_tests
$t --gtest_filter='*Gpu*' > "$out/gpu-tests.log" 2>&1; echo "gpu tests exit $?"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests from .* ran' "$out/gpu-tests.log" | head -20
grep -A8 'Failure' "$out/gpu-tests.log" | head -40
small='GpuMatmul.EveryVariantDtypeLayoutAndOutput:GpuMatmul.KaioNamedEntryPoints:GpuMatmul.BackwardMatchesReference:GpuMatmul.DecodeShapesOnTheGemvPath'
compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $t --gtest_filter="$small" > "$out/memcheck-matmul.log" 2>&1
echo "memcheck exit $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck-matmul.log" | tail -3
compute-sanitizer --tool racecheck --error-exitcode 9 $t --gtest_filter='GpuMatmul.KaioNamedEntryPoints' > "$out/racecheck-matmul.log" 2>&1
echo "racecheck exit $?"; grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/racecheck-matmul.log" | tail -3
build-gpu/bench/bench_matmul --json "$out/bench_matmul.json" > "$out/bench_matmul.log" 2>&1; echo "bench exit $?"
grep -E 'x .* (nn|nt) |geometric|cases|!!' "$out/bench_matmul.log" | tail -64
