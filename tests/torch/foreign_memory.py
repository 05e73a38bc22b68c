"""kaio_buffer_wrap on memory from PyTorch's three allocators, on a GPU.

    python3 tests/torch/foreign_memory.py path/to/libkaio.so

Runs itself once per PYTORCH_CUDA_ALLOC_CONF (the caching allocator's plain
segments, expandable_segments:True, which maps memory with cuMemMap, and
backend:cudaMallocAsync, the stream-ordered pool): wraps PyTorch tensors of
odd and large sizes, runs kaio_silu_gate on PyTorch's current stream, and
compares with torch.nn.functional.silu(x) * g. Exit 77 (skipped) without
PyTorch or a GPU.
"""
import ctypes
import os
import subprocess
import sys

CONFS = ["", "expandable_segments:True", "backend:cudaMallocAsync"]
DTYPES = {"float32": 1, "float16": 2, "bfloat16": 3}


class Tensor(ctypes.Structure):
    _fields_ = [("buffer", ctypes.c_void_p), ("offset_bytes", ctypes.c_uint64),
                ("dtype", ctypes.c_int32), ("reserved", ctypes.c_uint32),
                ("rows", ctypes.c_int64), ("cols", ctypes.c_int64), ("row_stride", ctypes.c_int64)]


def run_one(lib_path):
    import torch
    kaio = ctypes.CDLL(lib_path)
    kaio.kaio_last_error.restype = ctypes.c_char_p
    kaio.kaio_buffer_wrap.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                      ctypes.c_uint64, ctypes.c_uint64]
    kaio.kaio_stream_wrap.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                      ctypes.c_void_p]
    kaio.kaio_buffer_destroy.argtypes = [ctypes.c_void_p]
    kaio.kaio_silu_gate.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(Tensor)] * 3

    def ok(status, what):
        if status != 0:
            raise SystemExit("%s: status %d: %s" % (what, status, kaio.kaio_last_error().decode()))

    dev = ctypes.c_void_p()
    ok(kaio.kaio_device_open(ctypes.byref(dev), 0), "kaio_device_open")
    stream = ctypes.c_void_p()
    ok(kaio.kaio_stream_wrap(ctypes.byref(stream), dev,
                             ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)),
       "kaio_stream_wrap")

    def view(t):
        buf = ctypes.c_void_p()
        nbytes = t.numel() * t.element_size()
        ok(kaio.kaio_buffer_wrap(ctypes.byref(buf), dev, t.data_ptr(), nbytes),
           "kaio_buffer_wrap(%d bytes)" % nbytes)
        rows, cols = t.shape
        return buf, Tensor(buf, 0, DTYPES[str(t.dtype).split(".")[1]], 0, rows, cols, 0)

    torch.manual_seed(7)
    keep = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (1, 4097, 3 << 20)]
    checked = 0
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for rows, cols in ((1, 1), (1, 4097), (333, 129), (4096, 8191)):
            x = torch.randn(rows, cols, device="cuda", dtype=dtype)
            g = torch.randn(rows, cols, device="cuda", dtype=dtype)
            out = torch.full((rows, cols), float("nan"), device="cuda", dtype=dtype)
            views = [view(t) for t in (x, g, out)]
            ok(kaio.kaio_silu_gate(stream, *[ctypes.byref(v[1]) for v in views]), "kaio_silu_gate")
            want = (torch.nn.functional.silu(x.double()) * g.double())
            tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
            err = ((out.double() - want).abs() / (1 + want.abs())).max().item()
            if not err <= tol:
                raise SystemExit("silu_gate %s %dx%d: relative error %g > %g"
                                 % (dtype, rows, cols, err, tol))
            for buf, _ in views:
                kaio.kaio_buffer_destroy(buf)
            checked += 1
    del keep
    print("PYTORCH_CUDA_ALLOC_CONF=%r: %d silu_gate cases on wrapped PyTorch memory match"
          % (os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), checked))


def main():
    lib = os.path.abspath(sys.argv[1])
    if len(sys.argv) > 2:
        run_one(lib)
        return 0
    try:
        import torch
        if not torch.cuda.is_available():
            print("SKIP: no CUDA device for PyTorch")
            return 77
    except ImportError:
        print("SKIP: PyTorch is not installed")
        return 77
    failed = 0
    for conf in CONFS:
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
        r = subprocess.run([sys.executable, __file__, lib, "--one"], env=env)
        failed += r.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
