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
compute-sanitizer --tool racecheck --error-exitcode 9 $t --gtest_filter='GpuMatmul.KaioNamedEntryPoints:GpuMatmul.EveryVariantDtypeLayoutAndOutput:GpuMatmul.SplitKIsDeterministic' > "$out/racecheck-matmul.log" 2>&1
echo "racecheck exit $?"; grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/racecheck-matmul.log" | tail -3
$b --json "$out/bench_matmul.json" > "$out/bench_matmul.log" 2>&1; echo "bench exit $?"
# Profiles: the sm_80 kernels' shared-memory bank conflicts at 4096^3 (ldmatrix
# and cp.async traffic: conflicts are wavefronts beyond the minimum), and what
# bounds the Hopper kernels at M = 128 (narrow tiles, split K) and 4096^3.
bank='l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed_op_ldsm.sum,gpu__time_duration.sum'
for v in sync async; do
  ncu --clock-control none --metrics "$bank" -k regex:kaio_matmul_sm80_${v}_f16_nn -c 1 \
    $b --shape 4096,4096,4096 --dtype f16 --variants $v --iters 1 > "$out/ncu-sm80-$v.txt" 2>&1
  echo "ncu sm80 $v exit $?"; grep -E '^  kaio_|bank_conflicts|wavefronts|ldsm|duration' "$out/ncu-sm80-$v.txt"
done
ncu --clock-control none --section SpeedOfLight -k regex:'kaio_matmul_sm90|kaio_splitk' -c 3 \
  $b --shape 128,4096,4096 --shape 4096,4096,4096 --layout nt --dtype f16 --variants auto --iters 1 > "$out/ncu-sm90.txt" 2>&1
echo "ncu sm90 exit $?"
grep -E '^  kaio_|Duration|Compute \(SM\) Throughput|DRAM Throughput' "$out/ncu-sm90.txt" | head -16
grep -E 'x .* (nn|nt) |geometric|cases|!!' "$out/bench_matmul.log" | tail -64
