#!/usr/bin/env bash
# Builds libkaio and its tests with AddressSanitizer and
# UndefinedBehaviorSanitizer in BUILDDIR and runs the host suite there (on the
# fake CUDA driver). A memory error, a leak or any undefined behaviour stops
# the test binary with an error, so the run fails.
#
# Usage: .ci/sanitize.sh [BUILDDIR] [RESULTS_FILE]
#   RESULTS_FILE  if given, one "PASSED FAILED SKIPPED LABEL" line is appended,
#                 for .ci/summarize_tests.py
# Exit status: 0 when the build succeeded and every test passed.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
results=${2:-}

# A fresh clone has none; elsewhere it is reconfigured, not reused as is.
if [ "${CI:-}" = true ]; then rm -rf "$build"; fi
reconfigure=()
if [ -f "$build/build.ninja" ]; then reconfigure=(--reconfigure); fi

rm -f "$build/meson-logs/testlog.json"  # a stale log must not count
start=$(date +%s)
status=0
# b_lundef=false: libkaio.so leaves the sanitizer runtime to the executable.
meson setup "${reconfigure[@]}" "$build" -Dbuildtype=debugoptimized \
  -Db_sanitize=address,undefined -Db_lundef=false -Dtests=enabled -Dexamples=disabled \
  -Dbench=disabled ||
  status=$?
if [ "$status" -eq 0 ]; then
  # halt_on_error: a UBSan report is fatal, as ASan's are; meson test would
  # set its own defaults only where these are unset.
  ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1:print_summary=1 \
    UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1 \
    meson test -C "$build" --suite host --print-errorlogs || status=$?
fi
echo "sanitize: build and host suite in $(( $(date +%s) - start )) s, exit status $status"

if [ -n "$results" ]; then
  counts=$(python3 .ci/summarize_tests.py "$build/meson-logs/testlog.json" | tail -n 1)
  read -r p _ f _ s _ <<<"$counts"
  if [ "$status" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then f=1; fi  # did not build
  echo "${p:-0} ${f:-1} ${s:-0} meson test --suite host under ASan+UBSan ($build)" >>"$results"
fi
exit "$status"
