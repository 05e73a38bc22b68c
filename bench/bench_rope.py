#!/usr/bin/env python3
"""libkaio RoPE (kaio_op_create_rope, in place) against PyTorch running Hugging
Face transformers' formula on the same tensors, in the same process, on the same
stream, and against a device copy of the same bytes.

    python3 bench/bench_rope.py --lib build-gpu/src/libkaio.so [--iters 30]
        [--other NAME=LIB ...]   # more libkaio builds, timed on the same data

Torch side (what a HF Llama layer runs): cos / sin from the positions
(freqs = inv_freq ⊗ pos.float(), emb = cat(freqs, freqs), cos / sin cast to
the dtype) then apply_rotary_pos_emb (q·cos + rotate_half(q)·sin, out of
place), for Q and K.  libkaio rotates Q and K in place from the positions.
Bytes moved: Q and K read and written once.  "copy %": the time of
dst.copy_(src) over the same byte count (Q and K's bytes) divided by
libkaio's time: 100% means RoPE runs at device-copy bandwidth.
Timing: CUDA events around `reps` back-to-back calls (so small shapes
measure launch throughput), median of --iters after warm-up; shapes under
200 MiB rotate through several buffer sets so L2 holds none of them.
"max diff": libkaio's Q against an f64 evaluation of the formula from
torch's CUDA inv_freq (its pow is not correctly rounded: some entries are an
ulp off libkaio's, which at positions up to 1e6 moves the angle by up to
~0.06 rad), so it bounds gross errors only; tests/gpu_rope_test.cpp holds
the precise checks.
"""

import argparse
import ctypes as C
import math

import torch
from kaio_torch import KAIO_DTYPE, Kaio, time_ms

SHAPES = [  # (T, Hq, Hk, D): Llama-3-8B heads, then 8192 x 8192 elements of Q
    (1, 32, 8, 128), (32, 32, 8, 128), (8192, 32, 8, 128), (65536, 32, 8, 128),
    (8192, 64, 0, 128),
]


class Desc(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("style", C.c_int32), ("dtype", C.c_int32),
                ("scaling", C.c_int32), ("heads_q", C.c_int64), ("heads_k", C.c_int64),
                ("head_dim", C.c_int64), ("rotary_dim", C.c_int64), ("theta", C.c_double),
                ("factor", C.c_double), ("low_freq_factor", C.c_double),
                ("high_freq_factor", C.c_double), ("original_max_position_embeddings", C.c_int64),
                ("beta_fast", C.c_double), ("beta_slow", C.c_double),
                ("attention_factor", C.c_double), ("mscale", C.c_double),
                ("mscale_all_dim", C.c_double), ("truncate", C.c_int32), ("reserved", C.c_uint32),
                ("reserved2", C.c_uint64 * 4)]


class RopeKaio(Kaio):
    def op(self, dtype, hq, hk, d, theta):
        x = Desc()
        self.check(self.lib.kaio_rope_desc_init(C.byref(x), C.sizeof(Desc)), "desc_init")
        x.dtype, x.heads_q, x.heads_k, x.head_dim, x.theta = KAIO_DTYPE[dtype], hq, hk, d, theta
        o = C.c_void_p()
        self.check(self.lib.kaio_op_create_rope(C.byref(o), self.dev, C.byref(x)), "kaio_op_create_rope")
        return o


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def hf_rope(q, k, pos, inv_freq):
    """HF: LlamaRotaryEmbedding.forward + apply_rotary_pos_emb, [1, T, H, D]."""
    freqs = (inv_freq[None, :, None].float() @ pos[None, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(q.dtype).unsqueeze(2), emb.sin().to(q.dtype).unsqueeze(2)
    qe = q * cos + rotate_half(q) * sin
    ke = k * cos + rotate_half(k) * sin if k is not None else None
    return qe, ke


def f64_rope(x, pos, inv_freq):
    """The exact formula in f64 from the same f32 angle, [T, H, D]."""
    ang = (pos.float()[:, None] * inv_freq[None, :]).double()   # f32 product, as HF
    c, s = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x = x.double()
    h = x.shape[-1] // 2
    x0, x1 = x[..., :h], x[..., h:]
    return torch.cat((x0 * c - x1 * s, x1 * c + x0 * s), dim=-1)


def bench(kaio, T, hq, hk, D, dtype, iters, others=()):
    theta = 500000.0
    es = torch.empty((), dtype=dtype).element_size()
    qk_bytes = T * (hq + hk) * D * es
    sets = max(1, min(8, math.ceil(200 * 2**20 / qk_bytes)))
    dev = "cuda"
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64, device=dev).float() / D))
    data = []
    for _ in range(sets):
        q = torch.randn(T, hq, D, device=dev, dtype=dtype)
        k = torch.randn(T, hk, D, device=dev, dtype=dtype) if hk else None
        pos = torch.randint(0, 1000000, (T,), device=dev, dtype=torch.int32)
        data.append((q, k, pos))
    op = kaio.op(dtype, hq, hk, D, theta)
    views = [[kaio.view(q, T, hq * D), kaio.view(k, T, hk * D), kaio.view(pos, 1, T)]
             for q, k, pos in data]
    q0 = data[0][0].clone()
    kaio.launch(op, views[0])
    torch.cuda.synchronize()
    diff = (data[0][0].double() - f64_rope(q0, data[0][2], inv_freq)).abs().max().item()
    reps = 20 if qk_bytes < 2**24 else 1
    it = [0]

    def run_kaio():
        kaio.launch(op, views[it[0] % sets])
        it[0] += 1

    def run_torch():
        q, k, pos = data[it[0] % sets]
        it[0] += 1
        hf_rope(q.unsqueeze(0), k.unsqueeze(0) if k is not None else None, pos, inv_freq)

    src = [torch.empty(qk_bytes, dtype=torch.uint8, device=dev) for _ in range(2 if sets > 1 else 1)]
    dst = [torch.empty_like(s) for s in src]

    def run_copy():
        i = it[0] % len(src)
        it[0] += 1
        dst[i].copy_(src[i])

    t_kaio = time_ms(run_kaio, iters, reps=reps)
    t_others = []
    for _, lib in others:
        o = lib.op(dtype, hq, hk, D, theta)
        ov = [[lib.view(q, T, hq * D), lib.view(k, T, hk * D), lib.view(pos, 1, T)]
              for q, k, pos in data]

        def run_other():
            lib.launch(o, ov[it[0] % sets])
            it[0] += 1
        t_others.append(time_ms(run_other, iters, reps=reps))
        lib.lib.kaio_op_destroy(o)
        lib.release()
    t_torch = time_ms(run_torch, iters, reps=reps)
    t_copy = time_ms(run_copy, iters, reps=reps)
    kaio.lib.kaio_op_destroy(op)
    kaio.release()
    gbs = 2 * qk_bytes / (t_kaio * 1e-3) / 1e9
    return {"T": T, "hq": hq, "hk": hk, "D": D, "dtype": str(dtype).replace("torch.", ""),
            "kaio_us": t_kaio * 1e3, "torch_us": t_torch * 1e3, "copy_us": t_copy * 1e3,
            "speedup": t_torch / t_kaio, "gbs": gbs, "copy_pct": 100 * t_copy / t_kaio,
            "diff": diff, "others_us": [t * 1e3 for t in t_others]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--other", action="append", default=[], metavar="NAME=LIB",
                    help="another libkaio build to time on the same data (repeatable)")
    args = ap.parse_args()
    kaio = RopeKaio(args.lib)
    others = [(o.split("=", 1)[0], RopeKaio(o.split("=", 1)[1])) for o in args.other]
    extra = "".join(" %s µs | %s copy %% |" % (n, n) for n, _ in others)
    print("| T | Hq | Hk | D | dtype | libkaio µs | torch (HF) µs | speedup | GB/s | copy µs | copy % |"
          + extra + " max diff |")
    print("|---" * (12 + 2 * len(others)) + "|")
    for dtype in (torch.bfloat16, torch.float32):
        for T, hq, hk, D in SHAPES:
            r = bench(kaio, T, hq, hk, D, dtype, args.iters, others)
            cols = "".join(" %.2f | %.0f%% |" % (t, 100 * r["copy_us"] / t) for t in r["others_us"])
            print("| %d | %d | %d | %d | %s | %.2f | %.2f | %.2fx | %.0f | %.2f | %.0f%% |%s %.2e |" % (
                r["T"], r["hq"], r["hk"], r["D"], r["dtype"], r["kaio_us"], r["torch_us"],
                r["speedup"], r["gbs"], r["copy_us"], r["copy_pct"], cols, r["diff"]), flush=True)


if __name__ == "__main__":
    main()
