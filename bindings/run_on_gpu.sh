#!/usr/bin/env bash
# The bindings' GPU tests: build the test binaries here (no cargo or go on
# the GPU machine), then run this script there from the repository root.
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
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "gpu" and m.get("executable"):
        print(m["executable"])' | xargs -I{} cp {} .bind_gpu/rust_gpu
    (cd bindings/go/kaio && PKG_CONFIG_PATH="$PWD/../../../build/meson-uninstalled" \
      go test -c -o ../../../.bind_gpu/go_kaio.test .)
    ls -l .bind_gpu ;;
  run)
    export LD_LIBRARY_PATH="$PWD/build-gpu/src"
    unset LIBKAIO_CUDA_DRIVER
    .bind_gpu/rust_gpu --nocapture --test-threads 1
    (cd bindings/go/kaio && ../../../.bind_gpu/go_kaio.test -test.run GPU -test.v) ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
