#!/usr/bin/env bash
# One GPU session, run on the device machine from the repository root with
# a release build carried in build-gpu/ (built here: meson setup build-gpu
# -Dtests=enabled && ninja -C build-gpu). Writes logs under $OUT.
#   $1: what to run: any of tests,sanitizer,bench,ncu (default tests,sanitizer,bench)
set -uo pipefail
what="${1:-tests,sanitizer,bench}"
out="${OUT:-/tmp/kaio-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

if [[ $what == *tests* ]]; then
  build-gpu/tests/kaio_tests --gtest_filter='*Gpu*' 2>&1 | tee "$out/gpu-tests.log" | tail -25
  LIBKAIO_CUDA_DRIVER="$PWD/build-gpu/tests/libkaio_fake_cuda.so" \
  KAIO_TEST_FAKE_PROC_ONLY="$PWD/build-gpu/tests/libkaio_fake_cuda_proc_only.so" \
    build-gpu/tests/kaio_tests --gtest_filter='-*Gpu*' > "$out/host-tests.log" 2>&1
  tail -3 "$out/host-tests.log"
  build-gpu/examples/silu_gate 2>&1 | tee "$out/examples.log"
  build-gpu/examples/user_ptx 2>&1 | tee -a "$out/examples.log"
fi
if [[ $what == *sanitizer* ]]; then
  # API errors the tests provoke on purpose (bad PTX, probing the parameter
  # count) are not memory errors: report memory access errors and leaks only.
  compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 9 \
    build-gpu/tests/kaio_tests --gtest_filter='*Gpu*' > "$out/memcheck.log" 2>&1
  echo "memcheck exit: $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck.log" | tail -5
fi
if [[ $what == *bench* ]]; then
  build-gpu/bench/bench_elementwise 2>&1 | tee "$out/bench.log"
fi
