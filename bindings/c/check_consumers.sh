#!/usr/bin/env bash
# The C consumers of libkaio, each built and run on the fake CUDA driver:
#   1. pkg-config, shared: `meson install --destdir` of the build dir, then
#      consumer/app.c built with `pkg-config --cflags --libs kaio`;
#   2. pkg-config, static: a static libkaio installed to a temporary prefix,
#      app.c built with `pkg-config --static --libs kaio` (no libkaio.so needed);
#   3. Meson subproject: subproject/ with this checkout as subprojects/kaio.
#
# Usage: bindings/c/check_consumers.sh [BUILDDIR] [RESULTS_FILE]
#   BUILDDIR      a configured and built Meson build dir (default: build)
#   RESULTS_FILE  if given, "PASSED FAILED SKIPPED c-consumers" is appended
# Exit status: 0 when every consumer passed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
results=${2:-}
fake=$build/tests/libkaio_fake_cuda.so
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kaio-consumers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

if [ ! -f "$fake" ]; then
  echo "check_consumers: $fake is missing: build libkaio with tests enabled (meson setup $build -Dtests=enabled)" >&2
  exit 1
fi

# Runs "$@" in a subshell that stops at the first failing command (errexit
# is ignored inside `if`, hence the separate status), with its output in a
# log shown only on failure.
step() {
  local name=$1 rc
  shift
  (set -e; "$@") >"$tmp/log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "PASS c-consumer: $name"
    passed=$((passed + 1))
  else
    echo "FAIL c-consumer: $name"
    sed 's/^/    /' "$tmp/log"
    failed=$((failed + 1))
  fi
}

# Only the given .pc directory, never the system's or the caller's.
pc() { PKG_CONFIG_PATH='' PKG_CONFIG_LIBDIR=$1 PKG_CONFIG_SYSROOT_DIR=${2:-} pkg-config "${@:3}"; }

shared_consumer() {
  meson install -C "$build" --destdir "$tmp/dest" --no-rebuild --quiet
  local pcfile pcdir libdir
  pcfile=$(find "$tmp/dest" -name kaio.pc | head -n 1)
  pcdir=$(dirname "$pcfile")
  libdir=$(dirname "$pcdir")
  test "$(pc "$pcdir" "$tmp/dest" --modversion kaio)" = "$(meson introspect --projectinfo "$build" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')"
  # shellcheck disable=SC2046 # word splitting of the flags is intended
  "$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror $(pc "$pcdir" "$tmp/dest" --cflags kaio) \
    "$here/consumer/app.c" -o "$tmp/app_shared" $(pc "$pcdir" "$tmp/dest" --libs kaio)
  readelf -d "$tmp/app_shared" | grep -q 'NEEDED.*libkaio\.so'
  LD_LIBRARY_PATH="$libdir" LIBKAIO_CUDA_DRIVER="$fake" "$tmp/app_shared"
}

static_consumer() {
  meson setup "$tmp/build-static" "$repo" --prefix="$tmp/static" -Ddefault_library=static \
    -Dtests=disabled -Dexamples=disabled -Dbench=disabled
  ninja -C "$tmp/build-static"
  meson install -C "$tmp/build-static" --quiet
  local pcdir
  pcdir=$(dirname "$(find "$tmp/static" -name kaio.pc | head -n 1)")
  echo "pkg-config --static --libs kaio: $(pc "$pcdir" "" --static --libs kaio)"
  # shellcheck disable=SC2046
  "$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror $(pc "$pcdir" "" --cflags kaio) \
    "$here/consumer/app.c" -o "$tmp/app_static" $(pc "$pcdir" "" --static --libs kaio)
  if readelf -d "$tmp/app_static" | grep -q 'NEEDED.*libkaio'; then
    echo "app_static still needs a shared libkaio" >&2
    return 1
  fi
  LIBKAIO_CUDA_DRIVER="$fake" "$tmp/app_static"
}

subproject_consumer() {
  cp -r "$here/subproject" "$tmp/sp"
  mkdir -p "$tmp/sp/subprojects"
  ln -s "$repo" "$tmp/sp/subprojects/kaio"
  # --force-fallback-for: use the subproject even if a libkaio is installed.
  meson setup "$tmp/sp/build" "$tmp/sp" --force-fallback-for=kaio
  ninja -C "$tmp/sp/build"
  LIBKAIO_CUDA_DRIVER="$fake" "$tmp/sp/build/use_kaio"
  LIBKAIO_CUDA_DRIVER="$fake" meson test -C "$tmp/sp/build" --print-errorlogs
}

step "pkg-config shared (meson install --destdir)" shared_consumer
step "pkg-config --static (static libkaio in a temp prefix)" static_consumer
step "Meson subproject" subproject_consumer

echo "c-consumers: $passed passed, $failed failed"
if [ -n "$results" ]; then
  echo "$passed $failed 0 c-consumers" >>"$results"
fi
[ "$failed" -eq 0 ]
