#!/usr/bin/env python3
"""libkaio's attention forward, two builds side by side, against cuDNN (SDPA's
CUDNN_ATTENTION backend) on the same tensors, in the same process, on the same
stream: bench_attention.py's shapes, forward only.

    python3 bench/bench_attention_fwd.py --lib new/libkaio.so --baseline main/libkaio.so \\
        [--other NAME=LIB ...] [--dtype f16|bf16] [--iters 30] [--rounds 3]

Each (shape, mask) is timed in --rounds interleaved rounds (baseline, new,
cuDNN; CUDA events around each call, median of --iters after warm-up) and the
median over rounds is reported, so clock drift falls on all three alike.
"f/cuD" is cuDNN's time over libkaio's (> 1: libkaio is faster); "new/base"
the baseline's time over the new build's.  "bits": whether the new build's O
and LSE equal the baseline's bit for bit.  Each --other build adds a line
"NAME: ms, /cuD, bits" under the row.

--prof: for Nsight Compute, S 1024 D 128 only, each of base, new and cuDNN
launched twice, the second inside an NVTX range "prof", no timing:

    ncu --clock-control none --nvtx --nvtx-include "prof/" --metrics ... \
        python3 bench/bench_attention_fwd.py --lib ... --baseline ... --prof
"""

import argparse
import os
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_attention import SHAPES, Kaio, sdpa_runner, time_ms  # noqa: E402
from prof_attention_serving import ranged  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--other", action="append", default=[], metavar="NAME=LIB")
    ap.add_argument("--dtype", default="f16", choices=["f16", "bf16"])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prof", action="store_true", help="S 1024 D 128, one launch each in an NVTX range")
    ap.add_argument("--quick", action="store_true", help="the S 1024 shapes only")
    args = ap.parse_args()
    dtype = torch.float16 if args.dtype == "f16" else torch.bfloat16
    torch.manual_seed(0)
    libs = {"base": Kaio(args.baseline), "new": Kaio(args.lib)}
    for spec in args.other:
        name, path = spec.split("=", 1)
        libs[name] = Kaio(path)
    print("device: %s, torch %s, dtype %s, median of %d, median over %d rounds" % (
        torch.cuda.get_device_name(), torch.__version__, args.dtype, max(args.iters, 20), args.rounds))
    print("%-22s %-6s | %8s %8s %8s | %6s %6s %8s | %-4s %s" % (
        "B Hq:Hkv S D", "causal", "base ms", "new ms", "cuDNN ms", "base/c", "new/c", "new/base", "bits",
        "O diff vs cuDNN"))
    shapes = [x for x in SHAPES if x[3] == 1024 and (x[4] == 128 or not args.prof)] if args.prof or args.quick else SHAPES
    for (b, hq, hkv, s, d) in shapes:
        for causal in (False, True):
            q = torch.randn(b, s, hq, d, device="cuda", dtype=dtype)
            k = torch.randn(b, s, hkv, d, device="cuda", dtype=dtype)
            v = torch.randn(b, s, hkv, d, device="cuda", dtype=dtype)
            do = torch.randn(b, s, hq, d, device="cuda", dtype=dtype)
            outs, calls = {}, {}
            for name, kaio in libs.items():
                o = torch.empty_like(q)
                lse = torch.empty(b * hq, s, device="cuda", dtype=torch.float32)
                views = [kaio.view(q, b * s, hq * d), kaio.view(k, b * s, hkv * d), kaio.view(v, b * s, hkv * d),
                         kaio.view(o, b * s, hq * d), kaio.view(lse, b * hq, s)]
                desc = kaio.desc(dtype, b, hq, hkv, s, d, causal)
                op = kaio.op(desc, False)
                calls[name] = (lambda kaio=kaio, op=op, views=views: kaio.launch(op, views), kaio, op)
                outs[name] = (o, lse)
            run, why = sdpa_runner(SDPBackend.CUDNN_ATTENTION, q, k, v, do, causal, hkv != hq)
            fns = {name: c[0] for name, c in calls.items()}
            if run is not None:
                fns["cudnn"] = run[0]
            if args.prof:
                for fn in fns.values():
                    ranged(fn)
                for _, kaio, op in calls.values():
                    kaio.lib.kaio_op_destroy(op)
                    kaio.release()
                print("prof: %d %d:%d %d %d causal %s: %s" % (b, hq, hkv, s, d, causal, " ".join(fns)), flush=True)
                continue
            times = {name: [] for name in fns}
            for _ in range(args.rounds):
                for name, fn in fns.items():
                    times[name].append(time_ms(fn, max(args.iters, 20)))
            t = {name: statistics.median(x) for name, x in times.items()}
            torch.cuda.synchronize()
            same = all(torch.equal(x, y) for x, y in zip(outs["base"], outs["new"]))
            diff = (outs["new"][0].float() - run[2].float()).abs().max().item() if run else float("nan")
            ratio = lambda a: "%6.3f" % (t["cudnn"] / t[a]) if "cudnn" in t else "%6s" % "n/a"
            print("%-22s %-6s | %8.4f %8.4f %8s | %s %s %8.3f | %-4s %.3g" % (
                "%d %d:%d %d %d" % (b, hq, hkv, s, d), "yes" if causal else "no", t["base"], t["new"],
                "%8.4f" % t["cudnn"] if "cudnn" in t else "n/a", ratio("base"), ratio("new"),
                t["base"] / t["new"], "same" if same else "DIFF", diff), flush=True)
            for name in list(libs)[2:]:
                same_o = all(torch.equal(x, y) for x, y in zip(outs["base"], outs[name]))
                print("    %-8s %8.4f ms  /cuD %s  /base %6.3f  %s" % (
                    name, t[name], ratio(name), t["base"] / t[name], "same" if same_o else "DIFF"), flush=True)
            if why:
                print("    cudnn: %s" % why)
            for _, kaio, op in calls.values():
                kaio.lib.kaio_op_destroy(op)
                kaio.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
