#!/usr/bin/env python3
"""libkaio's paged KV-cache write against PyTorch's index_copy_ (what a
pure-torch server does: k_cache.view(-1, W).index_copy_(0, slots, k)), on the
same tensors and stream, in one process.

    python3 bench/bench_kv_cache.py --lib build-gpu/src/libkaio.so [--iters 50]

Inputs: bf16, Hkv 8, D 128 (W 1024), random rows into random distinct slots
of a 64k-slot cache (128 MiB per cache, past the 50 MiB L2). Both K and V
are written. Bandwidth counts the bytes read and written (4 * T * W * 2)
and is also given as % of a device copy of the same bytes, timed here.
CUDA events around CUDA-graph replays (so host dispatch counts for neither
side), warm-up, median of --iters (>= 20); the copy is timed eagerly.
"""

import argparse
import ctypes as C

import torch
from kaio_torch import Kaio, graph_ms, time_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    kaio = Kaio(args.lib, stream)

    W, slots_n = 8 * 128, 65536
    kc = torch.empty(slots_n, W, dtype=torch.bfloat16, device="cuda")
    vc = torch.empty_like(kc)
    vkc, vvc = kaio.view(kc), kaio.view(vc)
    print("%6s %10s %10s %9s %9s %8s %8s" % ("T", "kaio us", "torch us", "kaio GB/s", "copy GB/s",
                                               "% copy", "vs torch"))
    for T in (1, 32, 256, 4096, 32768):
        k = torch.randn(T, W, device="cuda").to(torch.bfloat16)
        v = torch.randn(T, W, device="cuda").to(torch.bfloat16)
        slots = torch.randperm(slots_n, device="cuda")[:T].to(torch.int32)
        slots64 = slots.long()
        t = [kaio.view(k), kaio.view(v), kaio.view(slots), vkc, vvc]

        def run_kaio():
            kaio.check(kaio.lib.kaio_kv_cache_write(kaio.stream, *(C.byref(x) for x in t)),
                       "kaio_kv_cache_write")

        def run_torch():
            kc.index_copy_(0, slots64, k)
            vc.index_copy_(0, slots64, v)

        run_kaio()
        torch.cuda.synchronize()
        ok = torch.equal(kc[slots64], k) and torch.equal(vc[slots64], v)
        src = torch.empty(2 * T * W, dtype=torch.bfloat16, device="cuda")
        dst = torch.empty_like(src)
        tk = graph_ms([run_kaio], args.iters, stream)
        tt = graph_ms([run_torch], args.iters, stream)
        tc = time_ms(lambda: dst.copy_(src), args.iters)   # eager: see kaio_torch
        moved = 4 * T * W * 2
        print("%6d %10.1f %10.1f %9.0f %9.0f %7.0f%% %7.2fx %s" % (
            T, tk * 1e3, tt * 1e3, moved / tk / 1e6, moved / tc / 1e6, 100 * tc / tk, tt / tk,
            "" if ok else "MISMATCH"))
    kaio.check(kaio.lib.kaio_stream_synchronize(kaio.stream), "kaio_stream_synchronize")
    kaio.release()


if __name__ == "__main__":
    main()
