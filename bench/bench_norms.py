"""libkaio's fused residual add + RMSNorm, LayerNorm and RMSNorm against PyTorch
(residual.add_(x) then F.rms_norm; F.layer_norm; F.rms_norm) on the same tensors,
in the same process, and against a device copy of the same byte count.

    python3 bench/bench_norms.py --lib build-gpu/src/libkaio.so [--iters 20]

libkaio is loaded with ctypes; torch tensors are wrapped with kaio_buffer_wrap.
Each measurement is a CUDA graph of one call per buffer set, the sets rotated
so that their footprint passes 4x the 50 MiB L2 (every call reads DRAM); the
time per call is the graph's replay time (CUDA events, median of --iters after
warm-up) divided by the number of calls, so Python and launch overheads are
not counted for either side. Bytes moved: add+RMSNorm reads x and the
residual and writes the residual and out (4 x the tensor), the others read x
and write out (2 x); weights are not counted. "% copy" is (bytes / time) over
the bandwidth of dst.copy_(src) of the same total bytes (half read, half
written), timed the same way in the same run.
"""

import argparse
import ctypes as C

import torch
import torch.nn.functional as F
from kaio_torch import KAIO_DTYPE, Kaio, graph_ms

SHAPES = [(8192, 8192), (1, 4096), (32, 4096), (4096, 4096), (1, 8192), (32, 8192), (4096, 8192)]
DTYPES = [torch.bfloat16, torch.float32]
L2_BYTES = 50 << 20


class NormsKaio(Kaio):
    def op(self, name, dtype, rows, cols, eps):
        o = C.c_void_p()
        fn = getattr(self.lib, "kaio_op_create_" + name)
        self.check(fn(C.byref(o), self.dev, KAIO_DTYPE[dtype], C.c_int64(rows), C.c_int64(cols),
                      C.c_float(eps)), "kaio_op_create_" + name)
        return o


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    stream = torch.cuda.Stream()
    kaio = NormsKaio(args.lib, stream)
    print("device: %s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    hdr = "| shape | dtype | op | kaio us | torch us | kaio/torch | kaio GB/s | kaio % copy | torch % copy |"
    print(hdr)
    print("|" + "---|" * 9)
    for dtype in DTYPES:
        for rows, cols in SHAPES:
            es = torch.tensor([], dtype=dtype).element_size()
            tensor_bytes = rows * cols * es
            nsets = max(1, min(64, -(-4 * L2_BYTES // (3 * tensor_bytes))))
            mk = lambda: torch.randn(rows, cols, device="cuda", dtype=dtype)
            sets = [dict(x=mk(), res=mk(), out=mk()) for _ in range(nsets)]
            w = torch.randn(cols, device="cuda", dtype=dtype)
            b = torch.randn(cols, device="cuda", dtype=dtype)
            wv, bv = kaio.view(w), kaio.view(b)
            for s in sets:
                s.update(vx=kaio.view(s["x"]), vres=kaio.view(s["res"]), vout=kaio.view(s["out"]))
            # copy of the same total bytes: 2 x tensor (read + write) and 4 x
            srcs = [torch.empty(2 * tensor_bytes, device="cuda", dtype=torch.uint8) for _ in range(nsets)]
            dsts = [torch.empty_like(t) for t in srcs]
            copy_ms = {}
            for k in (1, 2):
                calls = [(lambda s=s_, d=d_, n=k * tensor_bytes: d[:n].copy_(s[:n])) for s_, d_ in zip(srcs, dsts)]
                copy_ms[2 * k] = graph_ms(calls, args.iters, stream)
            ops = [
                ("add_rmsnorm", 4, 1e-6,
                 lambda o, s: kaio.launcher(o, [s["vx"], s["vres"], wv, s["vout"]]),
                 lambda s: (s["res"].add_(s["x"]), F.rms_norm(s["res"], (cols,), w, 1e-6))),
                ("layernorm", 2, 1e-5,
                 lambda o, s: kaio.launcher(o, [s["vx"], wv, bv, s["vout"]]),
                 lambda s: F.layer_norm(s["x"], (cols,), w, b, 1e-5)),
                ("rmsnorm", 2, 1e-6,
                 lambda o, s: kaio.launcher(o, [s["vx"], wv, s["vout"]]),
                 lambda s: F.rms_norm(s["x"], (cols,), w, 1e-6)),
            ]
            for name, factor, eps, kaio_call, torch_call in ops:
                op = kaio.op(name, dtype, rows, cols, eps)
                try:
                    k_ms = graph_ms([kaio_call(op, s) for s in sets], args.iters, stream)
                    t_ms = graph_ms([(lambda s=s: torch_call(s)) for s in sets], args.iters, stream)
                finally:
                    kaio.lib.kaio_op_destroy(op)
                moved = factor * tensor_bytes
                copy_bw = moved / copy_ms[factor]
                print("| %d x %d | %s | %s | %.2f | %.2f | %.2f | %.0f | %.1f%% | %.1f%% |" % (
                    rows, cols, str(dtype).replace("torch.", ""), name, k_ms * 1e3, t_ms * 1e3,
                    k_ms / t_ms, moved / k_ms / 1e6, 100 * (moved / k_ms) / copy_bw,
                    100 * (moved / t_ms) / copy_bw), flush=True)
            kaio.release()
            del sets, srcs, dsts
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
