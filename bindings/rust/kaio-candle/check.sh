#!/usr/bin/env bash
# Builds kaio-candle with candle's CUDA backend and runs its tests on the CPU,
# against the libkaio of a Meson build dir and that build's fake CUDA driver
# (GPU tests skip there, saying why).
#
# Usage: bindings/rust/kaio-candle/check.sh BUILDDIR [RESULTS_FILE]
#   RESULTS_FILE  if given, one "PASSED FAILED SKIPPED kaio-candle" line is
#                 appended, as bindings/check_bindings.sh does, for
#                 .ci/summarize_tests.py
#
# Needs Rust >= 1.87 (rustup's; Debian 12's 1.63 is too old for candle) and
# crates.io. The CUDA 13.0 toolkit comes from .ci/cuda_toolkit.sh into
# $KAIO_CUDA_PREFIX (default ~/.cache/kaio-cuda-13.0; installed if missing).
# CARGO_TARGET_DIR is honoured; unset, it is BUILDDIR/kaio-candle-target. The
# first build compiles candle's CUDA kernels with nvcc (sm_90 only): ~8 min
# on an idle 2-core machine, ~30 min on a loaded one; later builds take seconds.
# Exit status: 0 when the crate built and no test failed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
build=$(cd "${1:?usage: check.sh BUILDDIR [RESULTS_FILE]}" && pwd) || exit 1
results=${2:-}
fake=$build/tests/libkaio_fake_cuda.so
label=kaio-candle
status=0

record() { # passed failed skipped
  echo "$label: $1 passed, $2 failed, $3 skipped"
  if [ -n "$results" ]; then echo "$1 $2 $3 $label" >>"$results"; fi
  if [ "$2" -ne 0 ]; then status=1; fi
}

if [ ! -f "$fake" ] || [ ! -f "$build/meson-uninstalled/kaio-uninstalled.pc" ]; then
  echo "kaio-candle: $build is not a built libkaio build dir with tests (meson setup $build -Dtests=enabled && ninja -C $build)" >&2
  record 0 1 0
  exit 1
fi

if ! command -v cargo >/dev/null; then
  echo "kaio-candle: no cargo" >&2
  record 0 1 0
  exit 1
fi
rustc_minor=$(rustc --version | sed -n 's/^rustc 1\.\([0-9]*\).*/\1/p')
if [ "${rustc_minor:-0}" -lt 87 ]; then
  echo "kaio-candle: candle 0.11 needs Rust >= 1.87, this is $(rustc --version) (install rustup's stable)" >&2
  record 0 1 0
  exit 1
fi

prefix=${KAIO_CUDA_PREFIX:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/kaio-cuda-13.0}
if ! bash "$repo/.ci/cuda_toolkit.sh" "$prefix"; then
  echo "kaio-candle: the CUDA toolkit could not be installed into $prefix" >&2
  record 0 1 0
  exit 1
fi
# shellcheck source=/dev/null
. "$prefix/env.sh"

# The test binaries link libcuda.so.1 (candle's cudarc links the driver); with
# no driver installed, the toolkit's stub answers CUDA_ERROR_NO_DEVICE instead.
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  export LD_LIBRARY_PATH=$KAIO_CUDA_STUB_DIR:$LD_LIBRARY_PATH
fi

# libkaio: the kaio crate's rpath covers only its own tests, not dependents'.
export LD_LIBRARY_PATH=$build/src:$LD_LIBRARY_PATH
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$build/kaio-candle-target}
export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LIBKAIO_CUDA_DRIVER=$fake
log=$(mktemp "${TMPDIR:-/tmp}/kaio-candle.XXXXXX")
skips=$log.skips
trap 'rm -f "$log" "$skips"' EXIT
: >"$skips"
export KAIO_TEST_SKIP_LOG=$skips

start=$(date +%s)
(cd "$here" && cargo test --locked --features cuda) >"$log" 2>&1
rc=$?
# The candle bench and the Llama-block example build against the crate (same
# target dir, so only their own code compiles); they run on a GPU only.
for dir in "$repo/bench/candle" "$repo/examples/candle_llama_block"; do
  if ! (cd "$dir" && cargo build --locked) >>"$log" 2>&1; then
    echo "error: $dir does not build" >>"$log"
    rc=1
  fi
done
echo "kaio-candle: cargo test --features cuda took $(($(date +%s) - start)) s (target dir $CARGO_TARGET_DIR)"
grep -E '^(test result|SKIPPED|error)|FAILED|panicked' "$log"
if [ "$rc" -ne 0 ]; then tail -n 80 "$log"; fi

# As check_bindings.sh: libtest's "test result" lines; self-skipped tests (no
# GPU) are moved from passed to skipped, ignored ones count as skipped.
sum() { sed -n "s/^test result: .* \([0-9]*\) $1.*/\1/p" "$log" | awk '{n += $1} END {print n + 0}'; }
p=$(sum passed)
f=$(sum failed)
i=$(sum ignored)
s=$(wc -l <"$skips")
if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # did not build, or crashed
record $((p - s)) "$f" $((s + i))
exit $status
