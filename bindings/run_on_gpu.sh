#!/usr/bin/env bash
# The bindings' GPU tests: build the test binaries here (no cargo or go on
# the GPU machine), then run this script there from the repository root.
# Every Rust test target named gpu* (tests/gpu.rs, tests/gpu_new_ops.rs) is
# copied as .bind_gpu/rust_<target>.
#   here:  bash bindings/run_on_gpu.sh build    (needs build/ and build-gpu/)
#   there: bash bindings/run_on_gpu.sh run      (carry build-gpu and .bind_gpu)
set -euo pipefail
case "${1:-}" in
  build)
    mkdir -p .bind_gpu
    (cd bindings/rust && cargo test --offline --no-run --message-format=json 2>/dev/null) |
      python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    name = m.get("target", {}).get("name", "")
    if m.get("reason") == "compiler-artifact" and name.startswith("gpu") and m.get("executable"):
        print(m["executable"], name)' | while read -r exe name; do cp "$exe" ".bind_gpu/rust_$name"; done
    (cd bindings/go/kaio && PKG_CONFIG_PATH="$PWD/../../../build/meson-uninstalled" \
      go test -c -o ../../../.bind_gpu/go_kaio.test .)
    ls -l .bind_gpu ;;
  run)
    export LD_LIBRARY_PATH="$PWD/build-gpu/src"
    unset LIBKAIO_CUDA_DRIVER
    for t in .bind_gpu/rust_gpu*; do "$t" --nocapture --test-threads 1; done
    (cd bindings/go/kaio && ../../../.bind_gpu/go_kaio.test -test.run GPU -test.v) ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
