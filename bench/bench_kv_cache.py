#!/usr/bin/env python3
"""libkaio's paged KV-cache write against PyTorch's index_copy_ (what a
pure-torch server does: k_cache.view(-1, W).index_copy_(0, slots, k)), on the
same tensors and stream, in one process.

    python3 bench/bench_kv_cache.py --lib build-gpu/src/libkaio.so [--iters 50]

Inputs: bf16, Hkv 8, D 128 (W 1024), random rows into random distinct slots
of a 64k-slot cache (128 MiB per cache, past the 50 MiB L2). Both K and V
are written. Bandwidth counts the bytes read and written (4 * T * W * 2)
and is also given as % of a device copy of the same bytes, timed here.
CUDA events, warm-up, median of --iters (>= 20).
"""

import argparse
import ctypes as C
import statistics

import torch

I32, BF16 = 6, 3


class Tensor(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset_bytes", C.c_uint64), ("dtype", C.c_int32),
                ("reserved", C.c_uint32), ("rows", C.c_int64), ("cols", C.c_int64),
                ("row_stride", C.c_int64)]


def time_ms(fn, iters, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    lib = C.CDLL(args.lib)
    lib.kaio_last_error.restype = C.c_char_p

    def check(s, what):
        if s != 0:
            raise RuntimeError("%s: %s" % (what, lib.kaio_last_error().decode()))

    dev, stream = C.c_void_p(), C.c_void_p()
    check(lib.kaio_device_open(C.byref(dev), 0), "open")
    check(lib.kaio_stream_wrap(C.byref(stream), dev,
                               C.c_void_p(torch.cuda.current_stream().cuda_stream)), "wrap")
    bufs = []

    def view(t, dtype, rows, cols):
        b = C.c_void_p()
        check(lib.kaio_buffer_wrap(C.byref(b), dev, C.c_uint64(t.data_ptr()),
                                   C.c_uint64(t.numel() * t.element_size())), "buffer_wrap")
        bufs.append(b)
        return Tensor(b.value, 0, dtype, 0, rows, cols, cols)

    W, slots_n = 8 * 128, 65536
    kc = torch.empty(slots_n, W, dtype=torch.bfloat16, device="cuda")
    vc = torch.empty_like(kc)
    vkc, vvc = view(kc, BF16, slots_n, W), view(vc, BF16, slots_n, W)
    print("%6s %10s %10s %9s %9s %8s %8s" % ("T", "kaio us", "torch us", "kaio GB/s", "copy GB/s",
                                               "% copy", "vs torch"))
    for T in (1, 32, 256, 4096, 32768):
        k = torch.randn(T, W, device="cuda").to(torch.bfloat16)
        v = torch.randn(T, W, device="cuda").to(torch.bfloat16)
        slots = torch.randperm(slots_n, device="cuda")[:T].to(torch.int32)
        slots64 = slots.long()
        t = (Tensor * 5)(view(k, BF16, T, W), view(v, BF16, T, W), view(slots, I32, 1, T), vkc, vvc)

        def run_kaio():
            check(lib.kaio_kv_cache_write(stream, C.byref(t[0]), C.byref(t[1]), C.byref(t[2]),
                                          C.byref(t[3]), C.byref(t[4])), "kaio_kv_cache_write")

        def run_torch():
            kc.index_copy_(0, slots64, k)
            vc.index_copy_(0, slots64, v)

        run_kaio()
        torch.cuda.synchronize()
        ok = torch.equal(kc[slots64], k) and torch.equal(vc[slots64], v)
        src = torch.empty(2 * T * W, dtype=torch.bfloat16, device="cuda")
        dst = torch.empty_like(src)
        tk = time_ms(run_kaio, args.iters)
        tt = time_ms(run_torch, args.iters)
        tc = time_ms(lambda: dst.copy_(src), args.iters)
        moved = 4 * T * W * 2
        print("%6d %10.1f %10.1f %9.0f %9.0f %7.0f%% %7.2fx %s" % (
            T, tk * 1e3, tt * 1e3, moved / tk / 1e6, moved / tc / 1e6, 100 * tc / tk, tt / tk,
            "" if ok else "MISMATCH"))
    check(lib.kaio_stream_synchronize(stream), "sync")
    for b in bufs:
        lib.kaio_buffer_destroy(b)


if __name__ == "__main__":
    main()
