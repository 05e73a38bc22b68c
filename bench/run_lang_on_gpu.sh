#!/bin/bash
# One device run for the kernel language: the GPU lang tests, bench_lang (f32, f16, bf16) at
# 4096x8192 and 32768x1024, then compute-sanitizer memcheck on the GPU lang tests with fewer
# random programs. Copy a release build-gpu/ and examples/lang/ into $D (default .gpu_langfin)
# of the device's checkout and run this from its root. Each step has its own time limit.
D=${D:-.gpu_langfin}
export KAIO_LANG_EXAMPLES=$PWD/$D/examples/lang
T=$D/build-gpu/tests/kaio_tests
B=$D/build-gpu/bench/bench_lang
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== tests"
timeout ${TEST_S:-120} $T --gtest_filter='*Lang*Gpu*' 2>&1 | tail -25; echo "tests rc=${PIPESTATUS[0]}"
echo "== bench 4096x8192"
timeout ${BENCH_S:-60} $B --rows 4096 --cols 8192 --iters 25 --examples $KAIO_LANG_EXAMPLES; echo "bench1 rc=$?"
echo "== bench 32768x1024"
timeout ${BENCH_S:-60} $B --rows 32768 --cols 1024 --iters 25 --examples $KAIO_LANG_EXAMPLES; echo "bench2 rc=$?"
echo "== sanitizer"
KAIO_LANG_RANDOM_PROGRAMS=${SAN_PROGRAMS:-24} timeout ${SAN_S:-60} compute-sanitizer --tool memcheck \
  --report-api-errors no $T --gtest_filter='*Lang*Gpu*' 2>&1 | tail -12; echo "sanitizer rc=${PIPESTATUS[0]}"
