"""What the Python benches share: libkaio through ctypes on PyTorch's memory
and stream, and the timers.

    from kaio_torch import Kaio, Tensor, time_ms, graph_ms
    kaio = Kaio("build-gpu/src/libkaio.so")      # device 0, torch's current stream
    v = kaio.view(t, rows, cols)                  # a kaio_tensor over torch's memory
    kaio.launch(op, [v, ...])                     # kaio_op_launch, checked

Timing rules (bench/README.md): CUDA events, warm-up first, the median of
>= 20 runs. time_ms times eager calls (host dispatch included, so tiny ops
measure the launch path); graph_ms replays a CUDA graph of the calls, so
dispatch costs count for no one. Time a device copy eagerly: captured in a
graph it becomes a slower copy-engine transfer.
"""

import ctypes as C
import statistics

import torch

KAIO_DTYPE = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3, torch.int8: 4,
              torch.uint8: 5, torch.int32: 6}


class Tensor(C.Structure):
    """kaio_tensor."""
    _fields_ = [("buffer", C.c_void_p), ("offset_bytes", C.c_uint64), ("dtype", C.c_int32),
                ("reserved", C.c_uint32), ("rows", C.c_int64), ("cols", C.c_int64),
                ("row_stride", C.c_int64)]


class Kaio:
    """libkaio's device 0 and a wrapper of a torch stream (the current one by
    default), plus the buffers wrapped so far (release() frees them)."""

    def __init__(self, path, stream=None):
        self.lib = C.CDLL(path)
        self.lib.kaio_last_error.restype = C.c_char_p
        self.dev = C.c_void_p()
        self.check(self.lib.kaio_device_open(C.byref(self.dev), 0), "kaio_device_open")
        stream = stream or torch.cuda.current_stream()
        self.stream = C.c_void_p()
        self.check(self.lib.kaio_stream_wrap(C.byref(self.stream), self.dev,
                                             C.c_void_p(stream.cuda_stream)), "kaio_stream_wrap")
        self.buffers = []

    def check(self, status, what):
        if status != 0:
            raise RuntimeError("%s failed (%d): %s" % (what, status,
                                                       self.lib.kaio_last_error().decode()))

    def view(self, t, rows=None, cols=None, row_stride=None):
        """A rank-2 view [rows, cols] of a torch tensor's memory (default: t
        as a matrix, a 1-D t as one row); an absent view for None."""
        v = Tensor()
        if t is None:
            return v
        if rows is None:
            rows, cols = (1, t.shape[0]) if t.dim() == 1 else (t.shape[0], t.numel() // t.shape[0])
        b = C.c_void_p()
        self.check(self.lib.kaio_buffer_wrap(C.byref(b), self.dev, C.c_uint64(t.data_ptr()),
                                             C.c_uint64(t.numel() * t.element_size())),
                   "kaio_buffer_wrap")
        self.buffers.append(b)
        v.buffer, v.dtype, v.rows, v.cols = b.value, KAIO_DTYPE[t.dtype], rows, cols
        v.row_stride = row_stride or cols
        return v

    def launch(self, op, views):
        arr = (Tensor * len(views))(*views)
        self.check(self.lib.kaio_op_launch(op, self.stream, arr, C.c_size_t(len(views))),
                   "kaio_op_launch")

    def launcher(self, op, views):
        """launch(op, views) as a closure, for the timers."""
        return lambda: self.launch(op, views)

    def release(self):
        for b in self.buffers:
            self.lib.kaio_buffer_destroy(b)
        self.buffers = []


def time_ms(fn, iters, warmup=3, reps=1):
    """Median over iters of eager calls (reps back to back each), per call."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return statistics.median(times)


def graph_ms(calls, iters, stream=None):
    """Per-call median time of a CUDA graph that runs every call once."""
    stream = stream or torch.cuda.current_stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        for c in calls:   # warm-up outside the capture (module loads, torch's caches)
            c()
    stream.synchronize()
    with torch.cuda.graph(g, stream=stream):
        for c in calls:
            c()
    for _ in range(3):
        g.replay()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(stream)
        g.replay()
        b.record(stream)
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times) / len(calls)
