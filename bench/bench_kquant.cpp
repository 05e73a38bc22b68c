// bench_kquant: libkaio's GGUF k-quant kernels on a 4096 x 14336 matrix.
//  * quantize (f32 and bf16 in, every format, GGML and CANDLE modes): GB/s of
//    bytes read + written, against the copy bandwidth measured here
//    (kaio_buffer_copy, read + write) and against the project's
//    single-threaded C++ reference (tests/support/kquant_ref) timed on this
//    machine's CPU;
//  * dequant-matvec at M = 1 (f16, bf16 and f32 activations, f32 out), W N x K
//    for (N, K) = (14336, 4096) and (4096, 14336) (an 8B model's FFN),
//    (28672, 8192) and (8192, 28672) (a 70B model's), (18944, 3584) and
//    (3584, 18944) (a 7B model's, K not a multiple of 2048 values): weight
//    bytes per second against the copy bandwidth, against a plain read of
//    the same weight bytes (support/plain_read.hpp: the ceiling at this
//    size) and against cuBLAS GemmEx f16 (A 1 x K, B the f16 weights N x K
//    transposed, f32 out) on the same logical shape.
// --matvec skips the quantize rows; --max-k K keeps the matvec shapes with
// K <= K (a quick before/after of the smaller models' shapes).
// --burst B adds, per matvec row, the time per launch of B back-to-back
// launches of the same shape (one event pair around the burst, operand sets
// rotated within it: what a decode step's chain of kernels sees, where
// programmatic dependent launch lets a kernel start in its predecessor's
// tail), and "decode layer" rows: the 7 matvecs of one Llama-3-8B layer
// (Q, K, V, O, gate, up, down) in order, one-by-one (the sum of their own
// medians) and as one burst.
// Timing: median of --iters launches after warm-ups, one event pair each
// (support/timing.hpp); operands rotated through copies covering 2 x L2
// (support/l2_rotation.hpp). Correctness is the GPU tests' job.
// Exit status: 0 success, 1 failure, 2 no usable GPU.
#include <kaio/kaio.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "support/command_line.hpp"
#include "support/cublas.hpp"
#include "support/device.hpp"
#include "support/errors.hpp"
#include "support/handles.hpp"
#include "support/host_data.hpp"
#include "support/l2_rotation.hpp"
#include "support/plain_read.hpp"
#include "support/timing.hpp"
#include "support/kquant_ref.hpp"

namespace {

using kaio_bench::Buffer;
using kaio_bench::Op;
using kaio_bench::Timer;

constexpr int64_t kRows = 4096, kCols = 14336;
constexpr kaio_quant_format kFormats[] = {KAIO_QUANT_Q8_0, KAIO_QUANT_Q4_K, KAIO_QUANT_Q5_K,
                                          KAIO_QUANT_Q6_K};
const char *kFormatNames[] = {"Q8_0", "Q4_K", "Q5_K", "Q6_K"};

Buffer make_buffer(kaio_device *d, uint64_t bytes) {
  kaio_buffer *b = nullptr;
  CHECK(kaio_buffer_create(&b, d, bytes));
  return Buffer(b);
}

// Single-thread CPU reference: ns per value, from enough rows for ~0.3 s.
double cpu_ns_per_value(kaio_quant_format f, kaio_quant_mode mode, const std::vector<float> &x) {
  const auto fmt = static_cast<kqref::Format>(f - 1);
  const auto m = mode == KAIO_QUANT_MODE_GGML ? kqref::Mode::ggml : kqref::Mode::candle;
  std::vector<uint8_t> out(static_cast<size_t>(kaio_quant_row_bytes(f, kCols)));
  int64_t rows = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < 0.3 && rows < kRows) {
    kqref::quantize_row(fmt, m, &x[static_cast<size_t>(rows * kCols)], kCols, out.data());
    ++rows;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return elapsed * 1e9 / static_cast<double>(rows * kCols);
}

// The 7 matvec shapes (N x K) of one Llama-3-8B layer, in the order a decode step runs them.
struct Shape { int64_t n, k; };
constexpr Shape kLayer[] = {{4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096},
                            {14336, 4096}, {14336, 4096}, {4096, 14336}};

// Per format (f16 A, f32 C): the layer's matvecs timed one by one and as one
// burst; W random valid blocks (quantized on the GPU), every operand in its
// own 256-byte aligned slot of one arena, copies of the layer rotated so that
// even K's and V's matvecs, timed alone, read past L2.
void decode_layer(kaio_device *device, kaio_stream *stream, Timer &timer, const kaio_device_info &info,
                  double copy_gbs) {
  std::printf("\n== decode layer: the 7 matvecs of one Llama-3-8B layer (Q K V O gate up down), M = 1, f16 A, f32 C ==\n");
  std::printf("format | weights MB | one-by-one sum us  %%copy | burst us  %%copy | burst / one-by-one\n");
  // One set of random weights, as large as the largest matrix; each matrix quantizes a prefix.
  const std::vector<float> w = kaio_bench::random_floats(14336 * 4096, -1.0f, 1.0f, 21);
  Buffer wf = make_buffer(device, w.size() * 4);
  CHECK(kaio_buffer_write(wf.get(), 0, w.data(), w.size() * 4));
  const std::vector<uint16_t> a = kaio_bench::to_half(kaio_bench::random_floats(14336, -1.0f, 1.0f, 23), KAIO_DTYPE_F16);
  for (int fi = 0; fi < 4; ++fi) {
    const kaio_quant_format f = kFormats[fi];
    std::vector<uint64_t> sizes;
    uint64_t wbytes = 0;
    for (const Shape &s : kLayer) {
      const uint64_t wb = static_cast<uint64_t>(s.n * kaio_quant_row_bytes(f, s.k));
      sizes.insert(sizes.end(), {static_cast<uint64_t>(s.k) * 2, wb + 16, static_cast<uint64_t>(s.n) * 4});
      wbytes += wb;
    }
    kaio_bench::SetLayout lay = kaio_bench::plan_sets(sizes, info.l2_cache_bytes);
    // Enough sets that the smallest matvec (K, V), timed alone, also reads past L2.
    const uint64_t smallest = static_cast<uint64_t>(1024 * kaio_quant_row_bytes(f, 4096));
    lay.sets = std::max<uint64_t>(lay.sets, (2 * static_cast<uint64_t>(info.l2_cache_bytes) + smallest - 1) / smallest + 1);
    Buffer arena = make_buffer(device, lay.set_stride * lay.sets);
    CHECK(kaio_buffer_memset(arena.get(), stream, 0, 0, lay.set_stride * lay.sets));
    std::vector<Op> ops;
    for (size_t i = 0; i < std::size(kLayer); ++i) {
      const Shape s = kLayer[i];
      kaio_tensor wt = kaio_tensor_2d(wf.get(), KAIO_DTYPE_F32, s.n, s.k);
      kaio_tensor qt = kaio_tensor_2d(arena.get(), KAIO_DTYPE_U8, s.n, kaio_quant_row_bytes(f, s.k));
      qt.offset_bytes = lay.offsets[3 * i + 1];
      CHECK(kaio_quantize(stream, &wt, &qt, f, KAIO_QUANT_MODE_GGML));
      CHECK(kaio_stream_synchronize(stream));
      CHECK(kaio_buffer_write(arena.get(), lay.offsets[3 * i], a.data(), static_cast<size_t>(s.k) * 2));
      kaio_op *raw = nullptr;
      CHECK(kaio_op_create_quant_matmul(&raw, device, f, KAIO_DTYPE_F16, KAIO_DTYPE_F32, 1, s.n, s.k));
      ops.emplace_back(raw);
    }
    kaio_bench::replicate_first_set(arena.get(), lay, stream);
    auto launch = [&](size_t i, uint64_t set) {
      const Shape s = kLayer[i];
      kaio_tensor t[] = {kaio_tensor_2d(arena.get(), KAIO_DTYPE_F16, 1, s.k),
                         kaio_tensor_2d(arena.get(), KAIO_DTYPE_U8, s.n, kaio_quant_row_bytes(f, s.k)),
                         kaio_tensor_2d(arena.get(), KAIO_DTYPE_F32, 1, s.n)};
      for (size_t j = 0; j < 3; ++j) t[j].offset_bytes = lay.offset(set, 3 * i + j);
      CHECK(kaio_op_launch(ops[i].get(), stream, t, 3));
    };
    double sum_us = 0;
    for (size_t i = 0; i < std::size(kLayer); ++i)
      sum_us += timer.median_us([&](uint64_t set) { launch(i, set); }, lay.sets);
    const double burst_us = timer.median_us([&](uint64_t set) {
      for (size_t i = 0; i < std::size(kLayer); ++i) launch(i, set);
    }, lay.sets);
    const double mb = static_cast<double>(wbytes) / 1e6;
    std::printf("%-6s | %10.1f | %17.1f %5.1f%% | %8.1f %5.1f%% | %.3f\n", kFormatNames[fi], mb, sum_us,
                100.0 * mb / sum_us * 1e3 / copy_gbs, burst_us, 100.0 * mb / burst_us * 1e3 / copy_gbs,
                burst_us / sum_us);
    std::fflush(stdout);
  }
}

int run(int iters, bool matvec_only, int64_t max_k, int burst) {
  kaio_bench::Device device;
  const kaio_device_info info =
      kaio_bench::open_device(&device, "the k-quant kernels need compute capability 8.0+");
  const kaio_bench::Stream stream = kaio_bench::create_stream(device);
  kaio_bench::print_banner("bench_kquant", info);
  Timer timer(device.get(), stream.get(), iters);

  // Copy bandwidth: one 1 GiB device-to-device copy, read + written.
  const uint64_t copy_bytes = uint64_t{1} << 30;
  Buffer src = make_buffer(device.get(), copy_bytes), dst = make_buffer(device.get(), copy_bytes);
  CHECK(kaio_buffer_memset(src.get(), stream.get(), 0, 1, copy_bytes));
  const double copy_us = timer.median_us(
      [&](uint64_t) { CHECK(kaio_buffer_copy(dst.get(), 0, src.get(), 0, copy_bytes, stream.get())); }, 1);
  const double copy_gbs = 2.0 * static_cast<double>(copy_bytes) / copy_us / 1e3;
  std::printf("copy: %.1f GB/s (kaio_buffer_copy of 1 GiB, bytes read + written)\n\n", copy_gbs);
  src.reset();
  dst.reset();

  // ---- quantize ----
  if (!matvec_only) {
    std::printf("== quantize %lld x %lld ==\n", static_cast<long long>(kRows), static_cast<long long>(kCols));
    std::printf("format mode   in   | GPU us    GB/s  %%copy | CPU 1-thread ns/value  est. s | speedup\n");
    const std::vector<float> xf = kaio_bench::random_floats(static_cast<uint64_t>(kRows * kCols), -1.0f, 1.0f, 7);
    for (kaio_dtype in : {KAIO_DTYPE_F32, KAIO_DTYPE_BF16}) {
      const uint64_t x_bytes = static_cast<uint64_t>(kRows * kCols) * kaio_dtype_size(in);
      Buffer x = make_buffer(device.get(), x_bytes);
      if (in == KAIO_DTYPE_F32) {
        CHECK(kaio_buffer_write(x.get(), 0, xf.data(), x_bytes));
      } else {
        const std::vector<uint16_t> h = kaio_bench::to_half(xf, KAIO_DTYPE_BF16);
        CHECK(kaio_buffer_write(x.get(), 0, h.data(), x_bytes));
      }
      for (int fi = 0; fi < 4; ++fi) {
        const kaio_quant_format f = kFormats[fi];
        const int64_t row_bytes = kaio_quant_row_bytes(f, kCols);
        Buffer q = make_buffer(device.get(), static_cast<uint64_t>(kRows * row_bytes));
        for (kaio_quant_mode mode : {KAIO_QUANT_MODE_GGML, KAIO_QUANT_MODE_CANDLE}) {
          if (f == KAIO_QUANT_Q8_0 && mode == KAIO_QUANT_MODE_CANDLE) continue;  // same kernel math
          kaio_op *raw = nullptr;
          CHECK(kaio_op_create_quantize(&raw, device.get(), f, mode, in, kRows, kCols));
          Op op(raw);
          const kaio_tensor t[] = {kaio_tensor_2d(x.get(), in, kRows, kCols),
                                   kaio_tensor_2d(q.get(), KAIO_DTYPE_U8, kRows, row_bytes)};
          const double us = timer.median_us([&](uint64_t) { CHECK(kaio_op_launch(op.get(), stream.get(), t, 2)); }, 1);
          const double bytes = static_cast<double>(x_bytes) + static_cast<double>(kRows * row_bytes);
          const double gbs = bytes / us / 1e3;
          const double ns = cpu_ns_per_value(f, mode, xf);  // f32 values; bf16 costs the same
          const double cpu_s = ns * 1e-9 * static_cast<double>(kRows * kCols);
          std::printf("%-6s %-6s %-4s | %7.1f %7.1f %5.1f%% | %21.1f %7.1f | %7.0fx\n", kFormatNames[fi],
                      mode == KAIO_QUANT_MODE_GGML ? "GGML" : "CANDLE", kaio_dtype_name(in), us, gbs,
                      100.0 * gbs / copy_gbs, ns, cpu_s, cpu_s * 1e6 / us);
          std::fflush(stdout);
        }
      }
    }

  }  // quantize

  // ---- dequant-matvec, M = 1 ----
  std::string why;
  const std::unique_ptr<kaio_bench::Cublas> cublas = kaio_bench::Cublas::open(stream.get(), &why);
  if (!cublas) std::printf("\ncuBLAS not available: %s\n", why.c_str());
  std::printf("\n== dequant-matvec M = 1: A 1 x K (tensor-core kernels streamed on sm_90 where A fits in shared memory), W N x K quantized, C f32 ==\n");
  std::printf("format A     N x K        | kaio us  weight GB/s  %%copy | read us  %%read | cuBLAS f16 us  speedup%s\n",
              burst > 0 ? " | burst us/launch  %copy" : "");
  if (burst > 0) std::printf("(burst: %d back-to-back launches of the row's shape, one event pair; median of %d bursts)\n", burst, iters);
  const kaio_bench::PlainRead plain_read(device.get(), info.sm_count);
  for (const Shape s : {Shape{14336, 4096}, Shape{4096, 14336}, Shape{28672, 8192}, Shape{8192, 28672},
                        Shape{18944, 3584}, Shape{3584, 18944}}) {
    if (s.k > max_k) continue;
    double cublas_us = -1;
    if (cublas) {
      const uint64_t wb = static_cast<uint64_t>(s.n * s.k) * 2;
      const kaio_bench::SetLayout lay = kaio_bench::plan_sets({static_cast<uint64_t>(s.k) * 2, wb, static_cast<uint64_t>(s.n) * 4}, info.l2_cache_bytes);
      Buffer arena = make_buffer(device.get(), lay.set_stride * lay.sets);
      CHECK(kaio_buffer_memset(arena.get(), stream.get(), 0, 0x11, lay.set_stride * lay.sets));
      const uint64_t base = kaio_buffer_device_ptr(arena.get());
      cublas_us = timer.median_us([&](uint64_t set) {
        cublas->gemm_ex(false, true, 1, s.n, s.k, kaio_bench::CUDA_R_16F, base + lay.offset(set, 0), s.k,
                        base + lay.offset(set, 1), s.k, base + lay.offset(set, 2), s.n);
      }, lay.sets);
    }
    for (int fi = 0; fi < 4; ++fi) {
      const kaio_quant_format f = kFormats[fi];
      const int64_t row_bytes = kaio_quant_row_bytes(f, s.k);
      const uint64_t wb = static_cast<uint64_t>(s.n * row_bytes);
      const kaio_bench::SetLayout lay = kaio_bench::plan_sets({static_cast<uint64_t>(s.k) * 4, wb, static_cast<uint64_t>(s.n) * 4}, info.l2_cache_bytes);
      Buffer arena = make_buffer(device.get(), lay.set_stride * lay.sets);
      // Valid blocks: quantize random weights on the GPU into set 0.
      {
        const std::vector<float> w = kaio_bench::random_floats(static_cast<uint64_t>(s.n * s.k), -1.0f, 1.0f, 11);
        Buffer wf = make_buffer(device.get(), w.size() * 4);
        CHECK(kaio_buffer_write(wf.get(), 0, w.data(), w.size() * 4));
        kaio_tensor wt = kaio_tensor_2d(wf.get(), KAIO_DTYPE_F32, s.n, s.k);
        kaio_tensor qt = kaio_tensor_2d(arena.get(), KAIO_DTYPE_U8, s.n, row_bytes);
        qt.offset_bytes = lay.offsets[1];
        CHECK(kaio_quantize(stream.get(), &wt, &qt, f, KAIO_QUANT_MODE_GGML));
        const std::vector<uint16_t> a = kaio_bench::to_half(kaio_bench::random_floats(static_cast<uint64_t>(s.k), -1.0f, 1.0f, 13), KAIO_DTYPE_F16);
        CHECK(kaio_stream_synchronize(stream.get()));
        CHECK(kaio_buffer_write(arena.get(), lay.offsets[0], a.data(), a.size() * 2));
        CHECK(kaio_buffer_write(arena.get(), lay.offsets[0] + a.size() * 2, a.data(), a.size() * 2));
        kaio_bench::replicate_first_set(arena.get(), lay, stream.get());
      }
      const double read_us = timer.median_us([&](uint64_t set) {
        plain_read.enqueue(stream.get(), kaio_buffer_device_ptr(arena.get()) + lay.offset(set, 1), wb);
      }, lay.sets);
      // A's f16 bits reread as bf16 or f32 for the other dtypes: finite
      // values. Which kernel runs is the library's choice (on sm_90 the
      // streaming matvec for every format and dtype here).
      for (kaio_dtype adt : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16, KAIO_DTYPE_F32}) {
        kaio_op *raw = nullptr;
        CHECK(kaio_op_create_quant_matmul(&raw, device.get(), f, adt, KAIO_DTYPE_F32, 1, s.n, s.k));
        Op op(raw);
        auto launch = [&](uint64_t set) {
          kaio_tensor t[] = {kaio_tensor_2d(arena.get(), adt, 1, s.k),
                             kaio_tensor_2d(arena.get(), KAIO_DTYPE_U8, s.n, row_bytes),
                             kaio_tensor_2d(arena.get(), KAIO_DTYPE_F32, 1, s.n)};
          for (int i = 0; i < 3; ++i) t[i].offset_bytes = lay.offset(set, static_cast<size_t>(i));
          CHECK(kaio_op_launch(op.get(), stream.get(), t, 3));
        };
        const double us = timer.median_us(launch, lay.sets);
        const double gbs = static_cast<double>(wb) / us / 1e3;
        std::printf("%-6s %-4s %6lld x %6lld | %7.1f %12.1f %5.1f%% | %7.1f %5.1f%% | %13.1f %7.2fx",
                    kFormatNames[fi], kaio_dtype_name(adt), static_cast<long long>(s.n),
                    static_cast<long long>(s.k), us, gbs, 100.0 * gbs / copy_gbs, read_us,
                    100.0 * read_us / us, cublas_us, cublas_us > 0 ? cublas_us / us : 0.0);
        if (burst > 0) {
          // consecutive launches of a burst never share a set
          const double burst_us = timer.burst_us(launch, lay.sets, burst);
          const double burst_gbs = static_cast<double>(wb) / burst_us / 1e3;
          std::printf(" | %15.1f %5.1f%%", burst_us, 100.0 * burst_gbs / copy_gbs);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  if (burst > 0) decode_layer(device.get(), stream.get(), timer, info, copy_gbs);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  int iters = 20;
  bool matvec_only = false;
  int64_t max_k = INT64_MAX;
  int burst = 0;
  for (int i = 1; i < argc; ++i) {
    const char *usage = "usage: bench_kquant [--iters N] [--matvec] [--max-k K] [--burst B]   (--matvec: the dequant-matvec rows only;\n"
                        "       --max-k: the matvec shapes with K <= K only; --burst: also B back-to-back launches\n"
                        "       per row and the decode-layer rows)\n";
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("%s", usage);
      return 0;
    }
    if (std::strcmp(argv[i], "--matvec") == 0) {
      matvec_only = true;
    } else if (std::strcmp(argv[i], "--max-k") == 0 && i + 1 < argc) {
      auto v = kaio_bench::parse_positive(argv[++i]);
      if (!v) {
        std::fprintf(stderr, "%s", usage);
        return 1;
      }
      max_k = *v;
    } else if (std::strcmp(argv[i], "--burst") == 0 && i + 1 < argc) {
      auto v = kaio_bench::parse_positive(argv[++i]);
      if (!v || *v > 1000) {
        std::fprintf(stderr, "%s", usage);
        return 1;
      }
      burst = static_cast<int>(*v);
    } else if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      auto v = kaio_bench::parse_positive(argv[++i]);
      if (!v) {
        std::fprintf(stderr, "%s", usage);
        return 1;
      }
      iters = static_cast<int>(*v);
    } else {
      std::fprintf(stderr, "%s", usage);
      return 1;
    }
  }
  return kaio_bench::exit_status_of("bench_kquant", [&] { return run(iters, matvec_only, max_k, burst); });
}
