#!/usr/bin/env bash
# Fetches ggml's reference quantizers (libggml-base.so from the npm package
# @node-llama-cpp/linux-x64, MIT) into .oracle/ at the repository root, where
# tests/meson.build points the k-quant oracle test (KAIO_GGML_ORACLE).
# Checks the package's and the library's sha256. This build is the strict-IEEE
# reference: its quantizers contain no FMA instructions, so every f32 operation
# rounds on its own, as ours do.
# Idempotent: does nothing when the verified library is already there.
set -euo pipefail
cd "$(dirname "$0")/../.."

version=3.22.1
tgz_sha=0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0
lib_sha=6c342c8aeb20cb31a18099d6f79de4de6703814d1cfd5c4d754a8643087e486e
dest=.oracle
lib=$dest/libggml-base.so

if [ -f "$lib" ] && echo "$lib_sha  $lib" | sha256sum -c --status; then
  echo "ggml oracle: $lib present and verified"
  exit 0
fi
command -v npm >/dev/null || { echo "ggml oracle: npm is missing (apt-get install npm)" >&2; exit 1; }
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@node-llama-cpp/linux-x64@$version" >/dev/null)
tgz=$tmp/node-llama-cpp-linux-x64-$version.tgz
echo "$tgz_sha  $tgz" | sha256sum -c --status || { echo "ggml oracle: package checksum mismatch" >&2; exit 1; }
tar xzf "$tgz" -C "$tmp" package/bins/linux-x64/libggml-base.so
echo "$lib_sha  $tmp/package/bins/linux-x64/libggml-base.so" | sha256sum -c --status ||
  { echo "ggml oracle: library checksum mismatch" >&2; exit 1; }
cp "$tmp/package/bins/linux-x64/libggml-base.so" "$lib"
echo "ggml oracle: fetched $lib (@node-llama-cpp/linux-x64@$version)"
