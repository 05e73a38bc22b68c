#!/usr/bin/env bash
# Installs a CUDA 13.0 toolkit from NVIDIA's PyPI wheels into PREFIX, for what
# needs one at build time: ptxas (tests/ptxas_check.py) and the kaio-candle
# crate (candle's `cuda` feature compiles .cu files with nvcc and links cuBLAS,
# cuRAND, NVRTC, cudart and libcuda). libkaio itself needs none of it.
#
#   .ci/cuda_toolkit.sh [PREFIX]      then:  . PREFIX/env.sh
#
# PREFIX defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kaio-cuda-13.0, outside
# any clone, so developers download it once (~1 GiB installed). Idempotent:
# a stamp with the pinned versions skips pip, and the links, the stub and
# env.sh are remade only when missing or different.
set -euo pipefail

prefix=${1:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/kaio-cuda-13.0}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)

# CUDA 13.0 exactly: the GPU machine's driver (r580, CUDA 13.0) cannot JIT PTX
# from a newer nvcc (newer PTX ISA). cublas 13.1.0.3 is the one shipped with
# CUDA 13.0 update 2. --no-deps keeps the set exactly this list.
wheels=(
  nvidia-cuda-nvcc==13.0.88    # nvcc, ptxas, fatbinary, nvlink, cudafe++
  nvidia-cuda-crt==13.0.88     # nvcc's crt/ headers
  nvidia-nvvm==13.0.88         # cicc and libdevice
  nvidia-cuda-cccl==13.0.85    # cub/thrust/libcu++ (include/cccl)
  nvidia-cuda-runtime==13.0.96 # cudart, cuda_runtime.h, cuda.h
  nvidia-cublas==13.1.0.3      # linked by candle (cudarc dynamic-linking)
  nvidia-curand==10.4.0.35
  nvidia-cuda-nvrtc==13.0.88
)

site=$prefix/site
stamp=$site/.kaio-wheels
if [ "$(cat "$stamp" 2>/dev/null)" != "${wheels[*]}" ]; then
  rm -rf "$site"
  start=$(date +%s)
  python3 -m pip install --disable-pip-version-check --no-input --quiet --no-deps \
    --no-warn-script-location --root-user-action=ignore --target "$site" "${wheels[@]}"
  echo "${wheels[*]}" >"$stamp"
  echo "cuda_toolkit: installed the CUDA 13.0 wheels into $site in $(($(date +%s) - start)) s"
fi

cuda=$site/nvidia/cu13
[ -x "$cuda/bin/nvcc" ] || { echo "cuda_toolkit: no nvcc under $cuda" >&2; exit 1; }

# ln -sfn only where the link is missing or points elsewhere (idempotent).
link() { # target name
  if [ "$(readlink "$2" 2>/dev/null)" != "$1" ]; then ln -sfn "$1" "$2"; fi
}

# The layout of a runfile install, which nvcc.profile (targets/x86_64-linux/
# {include,lib}), cudaforge (lib64) and cudarc (lib, lib64, lib/stubs) expect.
mkdir -p "$cuda/targets/x86_64-linux" "$cuda/lib/stubs"
link ../../include "$cuda/targets/x86_64-linux/include"
link ../../lib "$cuda/targets/x86_64-linux/lib"
link lib "$cuda/lib64"
link nvidia/cu13 "$site/cuda"   # a short, stable CUDA_HOME
# Wheels ship only the sonames; the linker's -lNAME wants libNAME.so.
link libcudart.so.13 "$cuda/lib/libcudart.so"
link libcublas.so.13 "$cuda/lib/libcublas.so"
link libcublasLt.so.13 "$cuda/lib/libcublasLt.so"
link libcurand.so.10 "$cuda/lib/libcurand.so"
link libnvrtc.so.13 "$cuda/lib/libnvrtc.so"

# libcuda.so comes with the driver, not with any wheel. Linking needs only its
# symbols: a stub with one function per driver API name in this cuda.h (the
# plain names and the _v2/_v3/_ptds... ones the macros map them to), built with
# the real soname, so binaries load the real driver on a GPU machine. Every
# stub returns CUDA_ERROR_NO_DEVICE (100), so a program that ends up calling
# it here (see runtime-stub below) fails cleanly instead of crashing.
stub=$cuda/lib/stubs/libcuda.so
if [ ! -f "$stub" ] || [ "$cuda/include/cuda.h" -nt "$stub" ] || [ "$0" -nt "$stub" ]; then
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/kaio-cuda-stub.XXXXXX")
  {
    grep -ohE '\bcu[A-Z][A-Za-z0-9_]*\s*\(' "$cuda/include/cuda.h"
    # After the preprocessor: the versioned names, including the per-thread
    # default-stream ones (nvcc's --default-stream per-thread).
    for d in "" -DCUDA_API_PER_THREAD_DEFAULT_STREAM; do
      echo '#include <cuda.h>' | cc $d -E -P -I"$cuda/include" -x c - | grep -ohE '\bcu[A-Z][A-Za-z0-9_]*\s*\('
    done
  } | sed 's/[[:space:]]*($//' | sort -u |
    awk '{print "int " $1 "(void) { return 100; }"}' >"$tmp/cuda_stub.c"
  cc -shared -fPIC -O0 -Wl,-soname,libcuda.so.1 -o "$tmp/libcuda.so" "$tmp/cuda_stub.c"
  mv "$tmp/libcuda.so" "$stub"
  rm -rf "$tmp"
  echo "cuda_toolkit: libcuda link stub with $(nm -D --defined-only "$stub" | grep -c ' T cu') symbols"
fi
# The same stub under the soname, to *run* (not only link) CPU tests of
# binaries linked against libcuda on a machine with no driver. Never on the
# default LD_LIBRARY_PATH: where a real driver exists it must win.
mkdir -p "$prefix/runtime-stub"
link "$stub" "$prefix/runtime-stub/libcuda.so.1"

# env.sh: what a shell or CI sources. LIBRARY_PATH lets plain `-lcuda` etc.
# resolve; LD_LIBRARY_PATH lets the built test binaries find cudart, cuBLAS,
# cuRAND and NVRTC (not libcuda: that is the driver's).
cat >"$prefix/env.sh.new" <<EOF
# Written by .ci/cuda_toolkit.sh: the CUDA 13.0 toolkit from PyPI wheels.
export CUDA_HOME=$site/cuda
export CUDA_PATH=$site/cuda
export PATH=$site/cuda/bin\${PATH:+:\$PATH}
export LIBRARY_PATH=$site/cuda/lib:$site/cuda/lib/stubs\${LIBRARY_PATH:+:\$LIBRARY_PATH}
export LD_LIBRARY_PATH=$site/cuda/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
# cudarc: the CUDA version without running nvcc --version.
export CUDARC_CUDA_VERSION=13000
# candle-kernels (cudaforge): no GPU here to ask, so the H100/H200's sm_90.
export CUDA_COMPUTE_CAP=90
# A libcuda.so.1 that answers CUDA_ERROR_NO_DEVICE, for running CPU tests
# where no driver is installed (put it on LD_LIBRARY_PATH only then).
export KAIO_CUDA_STUB_DIR=$prefix/runtime-stub
EOF
if cmp -s "$prefix/env.sh.new" "$prefix/env.sh"; then rm "$prefix/env.sh.new"; else mv "$prefix/env.sh.new" "$prefix/env.sh"; fi
echo "cuda_toolkit: $("$cuda/bin/ptxas" --version | tail -n 1); . $prefix/env.sh"
