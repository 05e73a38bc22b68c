#!/usr/bin/env bash
# Runs every binding's tests against a built libkaio, on the fake CUDA driver
# of that build (GPU tests skip there, saying why):
#   - Rust: `cargo test --offline` for kaio-sys and kaio (bindings/rust), with
#     the `cargo` on PATH; if Debian's /usr/bin/cargo is a different version
#     (the 1.63 floor), the workspace is tested with it too;
#   - Go: `go test` for kaio.dev/kaio (bindings/go/kaio);
#   - C: the pkg-config (shared and static) and Meson-subproject consumers
#     (bindings/c/check_consumers.sh).
#
# Usage: bindings/check_bindings.sh [BUILDDIR] [RESULTS_FILE]
#   RESULTS_FILE  if given, one "PASSED FAILED SKIPPED LABEL" line per part is
#                 appended, for .ci/summarize_tests.py
# Exit status: 0 when every part passed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
results=${2:-}
fake=$build/tests/libkaio_fake_cuda.so
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kaio-bindings.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0

record() {
  echo "$4: $1 passed, $2 failed, $3 skipped"
  if [ -n "$results" ]; then echo "$1 $2 $3 $4" >>"$results"; fi
  if [ "$2" -ne 0 ]; then status=1; fi
}

if [ ! -f "$fake" ] || [ ! -f "$build/meson-uninstalled/kaio-uninstalled.pc" ]; then
  echo "check_bindings: $build is not a built libkaio build dir with tests (meson setup $build -Dtests=enabled && ninja -C $build)" >&2
  record 0 1 0 bindings
  exit 1
fi

# Both Rust's build script and cgo find libkaio through pkg-config here: the
# uninstalled .pc that Meson writes into every build dir.
export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

# ---- Rust ------------------------------------------------------------------
# Counts libtest's "test result" lines; tests that skipped themselves (no GPU)
# are logged to KAIO_TEST_SKIP_LOG and moved from passed to skipped; ignored
# tests count as skipped.
cargo_test() { # cargo-binary target-dir log skip-log
  (cd "$here/rust" && CARGO_TARGET_DIR=$2 LIBKAIO_CUDA_DRIVER=$fake KAIO_TEST_SKIP_LOG=$4 \
    "$1" test --offline --workspace) >"$3" 2>&1
}

rust_counts() { # log skip-log rc label
  local p f i s
  p=$(sed -n 's/^test result: .* \([0-9]*\) passed.*/\1/p' "$1" | awk '{n += $1} END {print n + 0}')
  f=$(sed -n 's/^test result: .* \([0-9]*\) failed.*/\1/p' "$1" | awk '{n += $1} END {print n + 0}')
  i=$(sed -n 's/^test result: .* \([0-9]*\) ignored.*/\1/p' "$1" | awk '{n += $1} END {print n + 0}')
  s=$(wc -l <"$2")
  if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # did not build, or crashed
  record $((p - s)) "$f" $((s + i)) "$4"
}

if command -v cargo >/dev/null; then
  : >"$tmp/skips"
  cargo_test cargo "$here/rust/target" "$tmp/cargo.log" "$tmp/skips"
  rc=$?
  grep -E '^(test result|SKIPPED|error|warning: unused)|FAILED|panicked' "$tmp/cargo.log"
  if [ "$rc" -ne 0 ]; then tail -n 80 "$tmp/cargo.log"; fi
  rust_counts "$tmp/cargo.log" "$tmp/skips" "$rc" "rust ($(cargo --version))"

  # The oldest toolchain the crates support is Debian 12's (rustc 1.63).
  if [ -x /usr/bin/cargo ] && [ "$(/usr/bin/cargo --version)" != "$(cargo --version)" ]; then
    : >"$tmp/skips-old"
    if cargo_test /usr/bin/cargo "$here/rust/target/debian-cargo" "$tmp/cargo-old.log" "$tmp/skips-old"; then
      record 1 0 0 "rust: the same tests with $(/usr/bin/cargo --version)"
    else
      tail -n 80 "$tmp/cargo-old.log"
      record 0 1 0 "rust: the same tests with $(/usr/bin/cargo --version)"
    fi
  fi
else
  echo "check_bindings: no cargo" >&2
  record 0 1 0 rust
fi

# ---- Go --------------------------------------------------------------------
if command -v go >/dev/null; then
  export GOPROXY=off GOFLAGS=-mod=readonly
  if [ -z "${HOME:-}" ] && [ -z "${GOCACHE:-}" ]; then export GOCACHE="$build/go-cache"; fi
  if [ -z "${HOME:-}" ] && [ -z "${GOPATH:-}" ]; then export GOPATH="$build/go-path"; fi
  (cd "$here/go/kaio" && LD_LIBRARY_PATH="$build/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    LIBKAIO_CUDA_DRIVER=$fake KAIO_EXAMPLES_DIR="$repo/examples" go test -count=1 -v ./...) \
    >"$tmp/go.log" 2>&1
  rc=$?
  grep -E '^(--- |ok|FAIL|PASS)' "$tmp/go.log"
  if [ "$rc" -ne 0 ]; then tail -n 80 "$tmp/go.log"; fi
  p=$(grep -c '^--- PASS' "$tmp/go.log")
  f=$(grep -c '^--- FAIL' "$tmp/go.log")
  s=$(grep -c '^--- SKIP' "$tmp/go.log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  record "$p" "$f" "$s" "go ($(go version | cut -d' ' -f3))"
else
  echo "check_bindings: no go" >&2
  record 0 1 0 go
fi

# ---- C -----------------------------------------------------------------------
if ! bash "$here/c/check_consumers.sh" "$build" "$tmp/c-results"; then status=1; fi
if [ -f "$tmp/c-results" ] && [ -n "$results" ]; then cat "$tmp/c-results" >>"$results"; fi
if [ ! -f "$tmp/c-results" ]; then record 0 1 0 c-consumers; fi

exit $status
