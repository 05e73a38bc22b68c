#!/usr/bin/env bash
# Builds candle's reference quantizer: tests/oracle/candle_quantize, a small
# program around candle-core 0.11's QTensor::quantize (CPU, no cuda feature;
# Cargo.lock committed, so the same crates every time), and copies it to
# .oracle/candle_quantize at the repository root, where tests/meson.build
# points the k-quant candle test (KAIO_CANDLE_ORACLE).
#
# Needs cargo >= 1.87 (candle-core 0.11's floor) and crates.io. Cargo's
# target folder is $CARGO_TARGET_DIR when set, else .oracle/candle-target.
# Takes about 5 minutes from scratch on 2 cores; a rebuild with nothing
# changed, a second.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

cargo=${CARGO:-cargo}
# A machine's Debian cargo (1.63) may come first on PATH; rustup's is newer.
version_ok() {
  local v
  v=$("$1" --version 2>/dev/null | awk '{print $2}') || return 1
  [ -n "$v" ] && [ "$(printf '%s\n1.87.0\n' "${v%%-*}" | sort -V | head -1)" = 1.87.0 ]
}
if ! version_ok "$cargo"; then
  if [ -x "$HOME/.cargo/bin/cargo" ] && version_ok "$HOME/.cargo/bin/cargo"; then
    cargo=$HOME/.cargo/bin/cargo
  else
    echo "candle oracle: needs cargo >= 1.87 (found: $("$cargo" --version 2>/dev/null || echo none))" >&2
    exit 1
  fi
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/.oracle/candle-target}
mkdir -p .oracle
start=$(date +%s)
"$cargo" build --release --locked --quiet --manifest-path tests/oracle/candle_quantize/Cargo.toml
cp "$CARGO_TARGET_DIR/release/candle_quantize" .oracle/candle_quantize.tmp
mv .oracle/candle_quantize.tmp .oracle/candle_quantize
echo "candle oracle: built .oracle/candle_quantize (candle-core 0.11.1, $("$cargo" --version | awk '{print $2}')) in $(( $(date +%s) - start )) s"
