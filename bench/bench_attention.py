#!/usr/bin/env python3
"""libkaio FlashAttention against PyTorch SDPA (FLASH_ATTENTION = FlashAttention-2,
and CUDNN_ATTENTION) on the same tensors, in the same process, on the same stream.

    python3 bench/bench_attention.py --lib build-gpu/src/libkaio.so [--iters 20] [--json out.json]

libkaio is loaded with ctypes; PyTorch's tensors are wrapped with
kaio_buffer_wrap and its current stream with kaio_stream_wrap, so both sides
read the very same memory. Timing: CUDA events around each call, warm-up
first, median of --iters runs (>= 20). TFLOP/s counts the forward as
4*B*Hq*Sq*Sk*D (halved when causal) and the backward as 2.5x that, the
convention of FlashAttention's benchmarks.
"O diff" is max |O_libkaio - O_reference| (the FA2 backend's O, or the math path's for f32).
Inputs: f16 (or --dtype bf16), N(0, 1), BSHD contiguous; SDPA gets the
(B, H, S, D) transposes of the same tensors.  Causal is bottom-right in
libkaio and top-left in SDPA: identical here since Sq == Sk.
"""

import argparse
import ctypes as C
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [  # (B, Hq, Hkv, S, D)
    (4, 32, 32, 1024, 64),
    (4, 32, 32, 1024, 128),
    (2, 32, 32, 4096, 128),
    (1, 16, 16, 16384, 128),
    (2, 32, 8, 4096, 128),   # GQA 32:8
]

F32_SHAPES = [(512, 64), (2048, 64), (4096, 128)]   # KAIO's f32 single-head flash: (S, D)

KAIO_DTYPE = {torch.float16: 2, torch.bfloat16: 3, torch.float32: 1}


class Tensor(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset_bytes", C.c_uint64), ("dtype", C.c_int32),
                ("reserved", C.c_uint32), ("rows", C.c_int64), ("cols", C.c_int64),
                ("row_stride", C.c_int64)]


class Desc(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("dtype", C.c_int32), ("out_dtype", C.c_int32),
                ("o_dtype", C.c_int32), ("mask", C.c_int32), ("variant", C.c_int32),
                ("deterministic", C.c_int32), ("reserved", C.c_uint32), ("batch", C.c_int64),
                ("seq_q", C.c_int64), ("seq_k", C.c_int64), ("heads_q", C.c_int64),
                ("heads_kv", C.c_int64), ("head_dim", C.c_int64), ("softmax_scale", C.c_float),
                ("reserved2", C.c_uint32)]


class Kaio:
    def __init__(self, path):
        self.lib = C.CDLL(path)
        self.lib.kaio_last_error.restype = C.c_char_p
        self.dev = C.c_void_p()
        self.check(self.lib.kaio_device_open(C.byref(self.dev), 0), "kaio_device_open")
        self.stream = C.c_void_p()
        self.check(self.lib.kaio_stream_wrap(C.byref(self.stream), self.dev,
                                             C.c_void_p(torch.cuda.current_stream().cuda_stream)),
                   "kaio_stream_wrap")
        self.buffers = []

    def check(self, status, what):
        if status != 0:
            raise RuntimeError("%s failed (%d): %s" % (what, status, self.lib.kaio_last_error().decode()))

    def view(self, t, rows, cols):
        """A rank-2 view [rows, cols] of a contiguous torch tensor (None: skipped)."""
        v = Tensor()
        if t is None:
            return v
        b = C.c_void_p()
        self.check(self.lib.kaio_buffer_wrap(C.byref(b), self.dev, C.c_uint64(t.data_ptr()),
                                             C.c_uint64(t.numel() * t.element_size())), "kaio_buffer_wrap")
        self.buffers.append(b)
        v.buffer, v.dtype, v.rows, v.cols, v.row_stride = b.value, KAIO_DTYPE[t.dtype], rows, cols, cols
        return v

    def desc(self, dtype, b, hq, hkv, s, d, causal):
        x = Desc()
        self.check(self.lib.kaio_attention_desc_init(C.byref(x), C.sizeof(Desc)), "desc_init")
        x.dtype = KAIO_DTYPE[dtype]
        x.mask = 1 if causal else 0
        x.batch, x.seq_q, x.seq_k, x.heads_q, x.heads_kv, x.head_dim = b, s, s, hq, hkv, d
        return x

    def op(self, desc, backward):
        o = C.c_void_p()
        fn = self.lib.kaio_op_create_attention_backward if backward else self.lib.kaio_op_create_attention
        self.check(fn(C.byref(o), self.dev, C.byref(desc)), "kaio_op_create_attention")
        return o

    def launch(self, op, views):
        arr = (Tensor * len(views))(*views)
        self.check(self.lib.kaio_op_launch(op, self.stream, arr, C.c_size_t(len(views))), "kaio_op_launch")

    def release(self):
        for b in self.buffers:
            self.lib.kaio_buffer_destroy(b)
        self.buffers = []


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


def sdpa_runner(backend, q, k, v, do, causal, gqa):
    """(forward, backward) closures for one SDPA backend, or None if it refuses."""
    qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_(True) for x in (q, k, v))
    dot = do.transpose(1, 2)
    kw = {"is_causal": causal}
    if gqa:
        kw["enable_gqa"] = True

    def fwd():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, **kw)

    try:
        out = fwd()
        torch.autograd.grad(out, (qt, kt, vt), dot, retain_graph=True)
    except Exception as e:  # noqa: BLE001 - a backend that cannot run this shape is reported
        return None, str(e).split("\n")[0][:120]

    def bwd():
        torch.autograd.grad(out, (qt, kt, vt), dot, retain_graph=True)

    def fwd_only():
        with torch.no_grad():
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(qt, kt, vt, **kw)

    return (fwd_only, bwd, out.transpose(1, 2)), None


def bench_f32(kaio, iters):
    """KAIO's f32 flash ops against PyTorch's f32 math SDPA on [S, D]."""
    print("\nf32 single-head flash (kaio_attention_flash / _backward) vs torch SDPA MATH, f32")
    print("%-12s | %9s %9s %7s | %9s %9s %7s | %-8s %s" % ("S D", "kaio f ms", "math f ms", "f x", "kaio b ms",
                                                         "math b ms", "b x", "O diff", "grad rel err (f64 ref)"))
    rows = []
    for (s, d) in F32_SHAPES:
        q, k, v, do = (torch.randn(s, d, device="cuda", dtype=torch.float32) for _ in range(4))
        o, dq, dk, dv = (torch.empty(s, d, device="cuda", dtype=torch.float32) for _ in range(4))
        lse = torch.empty(1, s, device="cuda", dtype=torch.float32)
        vq, vk, vv, vo, vdo = (kaio.view(t, s, d) for t in (q, k, v, o, do))
        vdq, vdk, vdv = (kaio.view(t, s, d) for t in (dq, dk, dv))
        vl = kaio.view(lse, 1, s)
        B = C.byref
        fwd = lambda: kaio.check(kaio.lib.kaio_attention_flash_with_stats(kaio.stream, B(vq), B(vk), B(vv), B(vo), B(vl)), "flash")
        bwd = lambda: kaio.check(kaio.lib.kaio_attention_flash_backward(
            kaio.stream, B(vdo), B(vq), B(vk), B(vv), B(vo), B(vl), B(vdq), B(vdk), B(vdv)), "flash bwd")
        res = {"S": s, "D": d, "kaio_fwd_ms": time_ms(fwd, iters), "kaio_bwd_ms": time_ms(bwd, iters)}
        run, why = sdpa_runner(SDPBackend.MATH, q[None, :, None], k[None, :, None], v[None, :, None],
                               do[None, :, None], False, False)
        if run is not None:
            mf, mb, ref = run
            res["math_fwd_ms"], res["math_bwd_ms"] = time_ms(mf, iters), time_ms(mb, iters)
            res["max_abs_diff_o"] = (o - ref[0, :, 0]).abs().max().item()
        # the gradients left by the timed runs against an f64 autograd reference
        qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
        od = torch.softmax((qd @ kd.T) / math.sqrt(d), dim=-1) @ vd
        refs = torch.autograd.grad(od, (qd, kd, vd), do.double())
        errs = [((g.double() - r).norm() / r.norm()).item() for g, r in zip((dq, dk, dv), refs)]
        res["grad_rel_err"] = max(errs)
        res["dq_dk_dv_rel_err"] = errs
        res["o_rel_err_f64"] = ((o.double() - od.detach()).norm() / od.detach().norm()).item()
        # the same products in torch f32 (cuBLAS SGEMM, no TF32), for scale
        qf, kf, vf = (t.clone().requires_grad_() for t in (q, k, v))
        of = torch.softmax((qf @ kf.T) / math.sqrt(d), dim=-1) @ vf
        gf = torch.autograd.grad(of, (qf, kf, vf), do)
        res["torch_f32_rel_err"] = [((of.detach().double() - od.detach()).norm() / od.detach().norm()).item()] + [
            ((g.double() - r).norm() / r.norm()).item() for g, r in zip(gf, refs)]
        del qf, kf, vf, of, gf
        del qd, kd, vd, od, refs
        flops = 4.0 * s * s * d
        res["kaio_fwd_tflops"] = flops / res["kaio_fwd_ms"] / 1e9
        print("%-12s | %9.3f %9s %7s | %9.3f %9s %7s | %-8.3g %.3g" % (
            "%d %d" % (s, d), res["kaio_fwd_ms"], "%.3f" % res["math_fwd_ms"] if "math_fwd_ms" in res else "n/a",
            "%.2f" % (res["math_fwd_ms"] / res["kaio_fwd_ms"]) if "math_fwd_ms" in res else "n/a",
            res["kaio_bwd_ms"], "%.3f" % res["math_bwd_ms"] if "math_bwd_ms" in res else "n/a",
            "%.2f" % (res["math_bwd_ms"] / res["kaio_bwd_ms"]) if "math_bwd_ms" in res else "n/a",
            res.get("max_abs_diff_o", float("nan")), res["grad_rel_err"]), flush=True)
        print("    vs f64 (relative Frobenius): kaio O %.3g, dq %.3g, dk %.3g, dv %.3g;"
              " torch f32 O %.3g, dq %.3g, dk %.3g, dv %.3g" % (
                  res["o_rel_err_f64"], *res["dq_dk_dv_rel_err"], *res["torch_f32_rel_err"]), flush=True)
        torch.cuda.synchronize()
        kaio.release()
        rows.append(res)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dtype", default="f16", choices=["f16", "bf16"])
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="first two shapes only")
    ap.add_argument("--variant", type=int, default=0, help="kaio_attention_variant (0 AUTO, 1 SM80, 2 SM80_M128, 3 SM90)")
    ap.add_argument("--no-f32", action="store_true", help="skip the f32 single-head section")
    ap.add_argument("--base", help="a second libkaio (e.g. main's): its fwd and bwd times on the same tensors, "
                                   "as ratios new/base")
    ap.add_argument("--nondet", action="store_true",
                    help="also time the backward with deterministic = 0 (column b nd/d: its speed-up)")
    ap.add_argument("--f32-only", action="store_true", help="only the f32 single-head section")
    ap.add_argument("--shape", action="append", default=[],
                    help="B,Hq,Hkv,S,D instead of the table (repeatable; e.g. under ncu)")
    ap.add_argument("--causal", choices=["both", "no", "yes"], default="both")
    args = ap.parse_args()
    iters = max(args.iters, 20)
    dtype = torch.float16 if args.dtype == "f16" else torch.bfloat16
    torch.manual_seed(0)
    kaio = Kaio(args.lib)
    base = Kaio(args.base) if args.base else None
    print("device: %s, torch %s, dtype %s, variant %d, median of %d" % (
        torch.cuda.get_device_name(), torch.__version__, args.dtype, args.variant, iters))
    hdr = "%-26s %-6s | %8s %8s %8s | %8s %8s %8s | %6s %6s %6s %6s | %s" % (
        "B Hq:Hkv S D", "causal", "kaio f", "FA2 f", "cuDNN f", "kaio b", "FA2 b", "cuDNN b",
        "f/FA2", "f/cuD", "b/FA2", "b/cuD", "O diff")
    if base:
        hdr += " | f/base b/base fb/cuD base fb/cuD"
    if args.nondet:
        hdr += " | b nd/d"
    rows = []
    shapes = [] if args.f32_only else SHAPES[:2] if args.quick else SHAPES
    if args.shape:
        shapes = [tuple(int(x) for x in sh.split(",")) for sh in args.shape]
    if shapes:
        print(hdr)
    for (b, hq, hkv, s, d) in shapes:
        for causal in {"both": (False, True), "no": (False,), "yes": (True,)}[args.causal]:
            q = torch.randn(b, s, hq, d, device="cuda", dtype=dtype)
            k = torch.randn(b, s, hkv, d, device="cuda", dtype=dtype)
            v = torch.randn(b, s, hkv, d, device="cuda", dtype=dtype)
            do = torch.randn(b, s, hq, d, device="cuda", dtype=dtype)
            o = torch.empty_like(q)
            lse = torch.empty(b * hq, s, device="cuda", dtype=torch.float32)
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            vq, vk, vv = kaio.view(q, b * s, hq * d), kaio.view(k, b * s, hkv * d), kaio.view(v, b * s, hkv * d)
            vo, vl, vdo = kaio.view(o, b * s, hq * d), kaio.view(lse, b * hq, s), kaio.view(do, b * s, hq * d)
            vdq, vdk, vdv = kaio.view(dq, b * s, hq * d), kaio.view(dk, b * s, hkv * d), kaio.view(dv, b * s, hkv * d)
            desc = kaio.desc(dtype, b, hq, hkv, s, d, causal)
            desc.variant = args.variant
            fop, bop = kaio.op(desc, False), kaio.op(desc, True)
            flops = 4.0 * b * hq * s * s * d * (0.5 if causal else 1.0)
            res = {"B": b, "Hq": hq, "Hkv": hkv, "S": s, "D": d, "causal": causal}
            res["kaio_fwd_ms"] = time_ms(lambda: kaio.launch(fop, [vq, vk, vv, vo, vl]), iters)
            res["kaio_bwd_ms"] = time_ms(lambda: kaio.launch(bop, [vdo, vq, vk, vv, vo, vl, vdq, vdk, vdv]), iters)
            if args.nondet:
                desc.deterministic = 0
                ndop = kaio.op(desc, True)
                res["kaio_bwd_nondet_ms"] = time_ms(
                    lambda: kaio.launch(ndop, [vdo, vq, vk, vv, vo, vl, vdq, vdk, vdv]), iters)
                kaio.lib.kaio_op_destroy(ndop)
                desc.deterministic = 1
            if base:
                views = [base.view(t, r, c) for t, r, c in ((q, b * s, hq * d), (k, b * s, hkv * d),
                                                           (v, b * s, hkv * d), (o, b * s, hq * d),
                                                           (lse, b * hq, s), (do, b * s, hq * d),
                                                           (dq, b * s, hq * d), (dk, b * s, hkv * d),
                                                           (dv, b * s, hkv * d))]
                bq, bk, bv, bo, bl, bdo, bdq, bdk, bdv = views
                bdesc = base.desc(dtype, b, hq, hkv, s, d, causal)
                bdesc.variant = args.variant
                bf, bb = base.op(bdesc, False), base.op(bdesc, True)
                res["base_fwd_ms"] = time_ms(lambda: base.launch(bf, [bq, bk, bv, bo, bl]), iters)
                res["base_bwd_ms"] = time_ms(lambda: base.launch(bb, [bdo, bq, bk, bv, bo, bl, bdq, bdk, bdv]), iters)
                base.lib.kaio_op_destroy(bf)
                base.lib.kaio_op_destroy(bb)
            for name, backend in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                run, why = sdpa_runner(backend, q, k, v, do, causal, hkv != hq)
                if run is None:
                    res[name + "_error"] = why
                    continue
                fwd, bwd, ref = run
                res[name + "_fwd_ms"] = time_ms(fwd, iters)
                res[name + "_bwd_ms"] = time_ms(bwd, iters)
                if name == "fa2" or "max_abs_diff_o" not in res:
                    res["max_abs_diff_o"] = (o.float() - ref.float()).abs().max().item()
            for key in ("kaio", "fa2", "cudnn"):
                if key + "_fwd_ms" in res:
                    res[key + "_fwd_tflops"] = flops / res[key + "_fwd_ms"] / 1e9
                    res[key + "_bwd_tflops"] = 2.5 * flops / res[key + "_bwd_ms"] / 1e9
            rows.append(res)

            def tf(key):
                return "%8.1f" % res[key] if key in res else "%8s" % "n/a"

            def ratio(a, bkey):
                return "%6.2f" % (res[a] / res[bkey]) if a in res and bkey in res else "%6s" % "n/a"

            print("%-26s %-6s | %s %s %s | %s %s %s | %s %s %s %s | %.3g" % (
                "%d %d:%d %d %d" % (b, hq, hkv, s, d), "yes" if causal else "no",
                tf("kaio_fwd_tflops"), tf("fa2_fwd_tflops"), tf("cudnn_fwd_tflops"),
                tf("kaio_bwd_tflops"), tf("fa2_bwd_tflops"), tf("cudnn_bwd_tflops"),
                ratio("kaio_fwd_tflops", "fa2_fwd_tflops"), ratio("kaio_fwd_tflops", "cudnn_fwd_tflops"),
                ratio("kaio_bwd_tflops", "fa2_bwd_tflops"), ratio("kaio_bwd_tflops", "cudnn_bwd_tflops"),
                res.get("max_abs_diff_o", float("nan"))), end="")
            if base:
                tot = res["kaio_fwd_ms"] + res["kaio_bwd_ms"]
                btot = res["base_fwd_ms"] + res["base_bwd_ms"]
                ctot = res.get("cudnn_fwd_ms", float("nan")) + res.get("cudnn_bwd_ms", float("nan"))
                print(" | %6.2f %6.2f %8.2f %8.2f" % (res["base_fwd_ms"] / res["kaio_fwd_ms"],
                                                     res["base_bwd_ms"] / res["kaio_bwd_ms"],
                                                     ctot / tot, ctot / btot), end="")
            if args.nondet:
                print(" | %6.2f" % (res["kaio_bwd_ms"] / res["kaio_bwd_nondet_ms"]), end="")
            print("", flush=True)
            for key in ("fa2_error", "cudnn_error"):
                if key in res:
                    print("    %s: %s" % (key, res[key]))
            kaio.lib.kaio_op_destroy(fop)
            kaio.lib.kaio_op_destroy(bop)
            torch.cuda.synchronize()
            kaio.release()
            if base:
                base.release()
    f32_rows = [] if args.no_f32 else bench_f32(kaio, iters)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"half": rows, "f32": f32_rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
