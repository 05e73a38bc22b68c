// bench_quant: libkaio's quantized matmuls against their cuBLAS baselines, in
// one process on one stream:
//   int4 W4A16 (GPTQ, group 128, with qzeros, f16 activations (--bf16: bf16), f32 out)
//        against cuBLAS f16 GemmEx (f32 out) on the same logical shape;
//   fused QKV int4 (one launch) against three int4 matmuls;
//   int8 W8A8 (i32 out) against cuBLASLt i8 -> i32 "TN" (first heuristic).
// Decode shapes M in {1, 4, 16} with N = K in {4096, 8192} and (N, K) =
// (14336, 4096); prefill M in {512, 4096}; int8 also at 4096^3. Weight bytes
// per second are reported at decode, beside a device-to-device copy of
// 256 MiB measured in the same run (bytes read + written), and beside a plain
// read of the same weight bytes in one launch (support/plain_read.hpp): the
// ceiling of one launch of that size.
//
// cuBLAS and cuBLASLt are opened with dlopen (libcublas.so.13/.12/.11 and the
// libcublasLt of the same version, through the loader's path or
// /usr/local/cuda*/lib64), so building needs no CUDA toolkit. Each kaio
// output is checked against its baseline: int8 exactly, int4 within 1e-2
// relative Frobenius error (f16 weights dequantized on the host for cuBLAS).
//
// usage: bench_quant [--iters N] [--quick] [--decode] [--prefill] [--bf16]
//                    [--out f32|f16|bf16] [--shape M,N,K]... [--burst B]
//        (--quick: N = K = 4096 only;
//        --decode: the int4 and fused QKV rows at M <= 16 only;
//        --burst B: with --decode, also the time per launch of B back-to-back launches of each
//        row's shape (operand sets rotated within the burst, one event pair, median of --iters
//        bursts) and a "decode layer" row: the 7 int4 matmuls of a Llama-3-8B layer (Q K V O
//        gate up down) at M 1 and 16, timed one by one and as one burst;
//        --prefill: the int4 rows at M 512, 2048, 4096 only, also timing the one-shot call;
//        --bf16: the int4 rows with bf16 activations and scales, against cuBLAS bf16;
//        --out: the int4 rows' output dtype, cuBLAS's too (default f32);
//        --shape: with --prefill, only these int4 rows)
// Exit status: 0 on success, 1 on a failure or mismatch, 2 without a GPU.
#include <dlfcn.h>
#include <glob.h>
#include <kaio/kaio.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "support/command_line.hpp"
#include "support/device.hpp"
#include "support/errors.hpp"
#include "support/handles.hpp"
#include "support/host_data.hpp"
#include "support/l2_rotation.hpp"
#include "support/plain_read.hpp"
#include "support/timing.hpp"

namespace {

using kaio_bench::Buffer;
using kaio_bench::Device;
using kaio_bench::Op;
using kaio_bench::SetLayout;
using kaio_bench::Stream;
using kaio_bench::Timer;

constexpr int64_t kGroup = 128;

// ---------------------------------------------------------------------------
// cuBLAS / cuBLASLt, opened at run time. Only the prototypes used.

using Handle = void *;
using GemmExFn = int (*)(Handle, int, int, int, int, int, const void *, const void *, int, int,
                         const void *, int, int, const void *, void *, int, int, int, int);
using CreateFn = int (*)(Handle *);
using SetStreamFn = int (*)(Handle, void *);
using LtCreateFn = int (*)(Handle *);
using LtDescCreateFn = int (*)(Handle *, int, int);
using LtDescSetFn = int (*)(Handle, int, const void *, size_t);
using LtLayoutCreateFn = int (*)(Handle *, int, uint64_t, uint64_t, int64_t);
using LtPrefCreateFn = int (*)(Handle *);
using LtPrefSetFn = int (*)(Handle, int, const void *, size_t);
struct LtHeuristic {
  uint64_t algo[8];
  size_t workspace;
  int state;
  float waves;
  int reserved[4];
};
using LtHeuristicFn = int (*)(Handle, Handle, Handle, Handle, Handle, Handle, Handle, int,
                              LtHeuristic *, int *);
using LtMatmulFn = int (*)(Handle, Handle, const void *, const void *, Handle, const void *,
                           Handle, const void *, const void *, Handle, void *, Handle,
                           const void *, void *, size_t, void *);

constexpr int kR16F = 2, kR16BF = 14, kR32F = 0, kR8I = 3, kR32I = 10;  // cudaDataType
constexpr int kCompute32F = 68, kCompute32I = 72;          // cublasComputeType_t
constexpr int kOpN = 0, kOpT = 1;
constexpr int kDescTransA = 3, kPrefMaxWorkspace = 1;

void *open_any(const char *stem) {
  for (const char *v : {".so.13", ".so.12", ".so.11"}) {
    const std::string name = std::string(stem) + v;
    if (void *h = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL)) return h;
    glob_t g;
    if (glob(("/usr/local/cuda*/lib64/" + name).c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i)
        if (void *h = dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_GLOBAL)) {
          globfree(&g);
          return h;
        }
    }
    globfree(&g);
  }
  return nullptr;
}

template <class F>
F sym(void *lib, const char *name) {
  return lib ? reinterpret_cast<F>(dlsym(lib, name)) : nullptr;
}

void cublas_check(int s, const char *what) {
  if (s != 0) throw std::runtime_error(std::string(what) + " failed with status " + std::to_string(s));
}

struct Blas {
  Handle handle = nullptr, lt = nullptr;
  GemmExFn gemm_ex = nullptr;
  LtDescCreateFn desc_create = nullptr;
  LtDescSetFn desc_set = nullptr;
  LtLayoutCreateFn layout_create = nullptr;
  LtPrefCreateFn pref_create = nullptr;
  LtPrefSetFn pref_set = nullptr;
  LtHeuristicFn heuristic = nullptr;
  LtMatmulFn lt_matmul = nullptr;
  void *stream = nullptr;

  explicit Blas(kaio_stream *s) : stream(kaio_stream_native(s)) {
    void *lt_lib = open_any("libcublasLt");
    void *lib = open_any("libcublas");
    auto create = sym<CreateFn>(lib, "cublasCreate_v2");
    auto set_stream = sym<SetStreamFn>(lib, "cublasSetStream_v2");
    gemm_ex = sym<GemmExFn>(lib, "cublasGemmEx");
    if (create && set_stream && gemm_ex && create(&handle) == 0) set_stream(handle, stream);
    else gemm_ex = nullptr;
    auto lt_create = sym<LtCreateFn>(lt_lib, "cublasLtCreate");
    desc_create = sym<LtDescCreateFn>(lt_lib, "cublasLtMatmulDescCreate");
    desc_set = sym<LtDescSetFn>(lt_lib, "cublasLtMatmulDescSetAttribute");
    layout_create = sym<LtLayoutCreateFn>(lt_lib, "cublasLtMatrixLayoutCreate");
    pref_create = sym<LtPrefCreateFn>(lt_lib, "cublasLtMatmulPreferenceCreate");
    pref_set = sym<LtPrefSetFn>(lt_lib, "cublasLtMatmulPreferenceSetAttribute");
    heuristic = sym<LtHeuristicFn>(lt_lib, "cublasLtMatmulAlgoGetHeuristic");
    lt_matmul = sym<LtMatmulFn>(lt_lib, "cublasLtMatmul");
    if (!(lt_create && desc_create && desc_set && layout_create && pref_create && pref_set &&
          heuristic && lt_matmul && lt_create(&lt) == 0))
      lt = nullptr;
  }

  // Row-major Y (M x N, f32 or `out`) = X (M x K, f16 or bf16) · W (K x N, the same).
  void gemm_f16(uint64_t x, uint64_t w, uint64_t y, int64_t m, int64_t n, int64_t k,
                int dt = kR16F, int out = kR32F) const {
    const float one = 1.0f, zero = 0.0f;
    cublas_check(gemm_ex(handle, kOpN, kOpN, static_cast<int>(n), static_cast<int>(m),
                         static_cast<int>(k), &one, reinterpret_cast<void *>(w), dt,
                         static_cast<int>(n), reinterpret_cast<void *>(x), dt,
                         static_cast<int>(k), &zero, reinterpret_cast<void *>(y), out,
                         static_cast<int>(n), kCompute32F, -1),
                 "cublasGemmEx");
  }
};

// Row-major C (M x N, i32) = A (M x K, i8) · B (N x K, i8)ᵀ through cuBLASLt:
// column-major Cᵀ = op_T(B) · A, the "TN" int8 case; first heuristic.
struct LtInt8 {
  const Blas &blas;
  Handle op = nullptr, a = nullptr, b = nullptr, c = nullptr;
  LtHeuristic algo{};
  Buffer workspace;
  static constexpr uint64_t kWorkspace = 32ull << 20;
  LtInt8(const Blas &bl, kaio_device *dev, int64_t m, int64_t n, int64_t k) : blas(bl) {
    kaio_buffer *ws = nullptr;
    CHECK(kaio_buffer_create(&ws, dev, kWorkspace));
    workspace.reset(ws);
    cublas_check(bl.desc_create(&op, kCompute32I, kR32I), "cublasLtMatmulDescCreate");
    const int t = kOpT;
    cublas_check(bl.desc_set(op, kDescTransA, &t, sizeof t), "cublasLtMatmulDescSetAttribute");
    cublas_check(bl.layout_create(&a, kR8I, k, n, k), "cublasLtMatrixLayoutCreate");
    cublas_check(bl.layout_create(&b, kR8I, k, m, k), "cublasLtMatrixLayoutCreate");
    cublas_check(bl.layout_create(&c, kR32I, n, m, n), "cublasLtMatrixLayoutCreate");
    Handle pref = nullptr;
    cublas_check(bl.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
    cublas_check(bl.pref_set(pref, kPrefMaxWorkspace, &kWorkspace, sizeof kWorkspace),
                 "cublasLtMatmulPreferenceSetAttribute");
    int found = 0;
    cublas_check(bl.heuristic(bl.lt, op, a, b, c, c, pref, 1, &algo, &found),
                 "cublasLtMatmulAlgoGetHeuristic");
    if (found < 1) throw std::runtime_error("cuBLASLt found no int8 algorithm");
  }
  void run(uint64_t pa, uint64_t pb, uint64_t pc) const {
    const int32_t one = 1, zero = 0;
    cublas_check(blas.lt_matmul(blas.lt, op, &one, reinterpret_cast<void *>(pb), a,
                                reinterpret_cast<void *>(pa), b, &zero,
                                reinterpret_cast<void *>(pc), c, reinterpret_cast<void *>(pc), c,
                                algo.algo,
                                reinterpret_cast<void *>(kaio_buffer_device_ptr(workspace.get())),
                                kWorkspace, blas.stream),
                 "cublasLtMatmul");
  }
};

// ---------------------------------------------------------------------------
// Device data: an arena of sets rotated past L2.

struct Arena {
  Buffer buf;
  SetLayout layout;
  uint64_t base = 0;
  uint64_t at(uint64_t set, size_t operand) const { return base + layout.offset(set, operand); }
  kaio_tensor view(uint64_t set, size_t operand, kaio_dtype dt, int64_t rows, int64_t cols) const {
    kaio_tensor t = kaio_tensor_2d(buf.get(), dt, rows, cols);
    t.offset_bytes = layout.offset(set, operand);
    return t;
  }
};

Arena make_arena(kaio_device *dev, kaio_stream *s, uint64_t l2,
                 const std::vector<std::vector<unsigned char>> &operands) {
  std::vector<uint64_t> sizes;
  for (const auto &o : operands) sizes.push_back(o.size());
  Arena a;
  a.layout = kaio_bench::plan_sets(sizes, l2);
  kaio_buffer *b = nullptr;
  CHECK(kaio_buffer_create(&b, dev, a.layout.set_stride * a.layout.sets));
  a.buf.reset(b);
  a.base = kaio_buffer_device_ptr(b);
  for (size_t i = 0; i < operands.size(); ++i)
    if (!operands[i].empty())
      CHECK(kaio_buffer_write(b, a.layout.offsets[i], operands[i].data(), operands[i].size()));
  kaio_bench::replicate_first_set(b, a.layout, s);
  return a;
}

std::vector<unsigned char> random_words(uint64_t bytes, uint32_t seed) {
  std::vector<unsigned char> v(bytes);
  std::mt19937 rng(seed);
  for (auto &c : v) c = static_cast<unsigned char>(rng());
  return v;
}

std::vector<float> read_f32(kaio_buffer *b, uint64_t offset, uint64_t count, kaio_stream *s) {
  CHECK(kaio_stream_synchronize(s));
  std::vector<float> v(count);
  CHECK(kaio_buffer_read(b, offset, v.data(), count * 4));
  return v;
}

// `count` values of dtype f32, f16 or bf16, as floats.
std::vector<float> read_out(kaio_buffer *b, uint64_t offset, uint64_t count, kaio_dtype dt,
                            kaio_stream *s) {
  if (dt == KAIO_DTYPE_F32) return read_f32(b, offset, count, s);
  CHECK(kaio_stream_synchronize(s));
  std::vector<uint16_t> h(count);
  CHECK(kaio_buffer_read(b, offset, h.data(), count * 2));
  std::vector<float> v(count);
  for (uint64_t i = 0; i < count; ++i)
    v[i] = static_cast<float>(dt == KAIO_DTYPE_F16 ? kaio_bench::from_f16(h[i])
                                                   : kaio_bench::from_bf16(h[i]));
  return v;
}

double rel_diff(const std::vector<float> &a, const std::vector<float> &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// ---------------------------------------------------------------------------
// Cases

struct Ctx {
  kaio_device *dev;
  kaio_stream *stream;
  uint64_t l2;
  Timer *timer;
  const Blas *blas;
  bool failed = false;
  bool one_shot = false;   // --prefill: also time kaio_matmul_int4 (no op handle)
  kaio_dtype act = KAIO_DTYPE_F16;   // int4 activations and scales (--bf16)
  kaio_dtype out = KAIO_DTYPE_F32;   // int4 and cuBLAS output (--out)
  int burst = 0;                     // --burst B
  double copy_gbs = 0;               // the device-to-device copy's bytes per second
  const kaio_bench::PlainRead *read = nullptr;   // decode rows: the weights' one-launch ceiling
};

// GPTQ weights of one K x N layer: qweight, qzeros, scales (random) and,
// for cuBLAS, the same weights dequantized to f16 or bf16 (K x N).
struct Layer {
  std::vector<unsigned char> qw, qz, sc, w16;
};

Layer make_layer(int64_t n, int64_t k, uint32_t seed, bool dequant,
                 kaio_dtype dt = KAIO_DTYPE_F16) {
  const bool bf = dt == KAIO_DTYPE_BF16;
  Layer l;
  l.qw = random_words(k / 8 * n * 4, seed);
  l.qz = random_words(k / kGroup * n / 8 * 4, seed + 1);
  l.sc = kaio_bench::random_bytes(dt, k / kGroup * n, 0.001f, 0.02f, seed + 2);
  if (!dequant) return l;
  const auto *qw = reinterpret_cast<const uint32_t *>(l.qw.data());
  const auto *qz = reinterpret_cast<const uint32_t *>(l.qz.data());
  const auto *sc = reinterpret_cast<const uint16_t *>(l.sc.data());
  l.w16.resize(k * n * 2);
  auto *w = reinterpret_cast<uint16_t *>(l.w16.data());
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t nn = 0; nn < n; ++nn) {
      const int64_t g = kk / kGroup;
      const int q = (qw[(kk / 8) * n + nn] >> (4 * (kk % 8))) & 15;
      const int z = (qz[g * (n / 8) + nn / 8] >> (4 * (nn % 8))) & 15;
      const double s = bf ? kaio_bench::from_bf16(sc[g * n + nn]) : kaio_bench::from_f16(sc[g * n + nn]);
      const float v = static_cast<float>((q - z) * s);
      w[kk * n + nn] = bf ? kaio_bench::to_bf16(v) : kaio_bench::to_f16(v);
    }
  return l;
}

kaio_matmul_int4_desc int4_desc(int64_t m, int64_t n, int64_t k,
                                kaio_dtype dt = KAIO_DTYPE_F16,
                                kaio_dtype out = KAIO_DTYPE_F32) {
  kaio_matmul_int4_desc d;
  CHECK(kaio_matmul_int4_desc_init(&d, sizeof d));
  d.in_dtype = dt;
  d.out_dtype = out;
  d.m = m;
  d.n = n;
  d.k = k;
  d.group_size = kGroup;
  return d;
}

Op int4_op(kaio_device *dev, int64_t m, int64_t n, int64_t k, kaio_dtype dt = KAIO_DTYPE_F16,
           kaio_dtype out = KAIO_DTYPE_F32) {
  const kaio_matmul_int4_desc d = int4_desc(m, n, k, dt, out);
  kaio_op *op = nullptr;
  CHECK(kaio_op_create_matmul_int4(&op, dev, &d));
  return Op(op);
}

int blas_out(kaio_dtype out) {
  return out == KAIO_DTYPE_F16 ? kR16F : out == KAIO_DTYPE_BF16 ? kR16BF : kR32F;
}

void bench_int4(Ctx &cx, int64_t m, int64_t n, int64_t k) {
  const kaio_dtype dt = cx.act;
  Layer l = make_layer(n, k, static_cast<uint32_t>(n + k), cx.blas->gemm_ex != nullptr, dt);
  auto x = kaio_bench::random_bytes(dt, m * k, -1, 1, 7);
  // operands: x, qweight, qzeros, scales, out (kaio). cuBLAS's 16-bit W (4x the
  // packed bytes) has its own arena: in one set with the int4 operands it made
  // the set over 2x L2 at N >= 8192, so the int4 weights were never rotated and
  // every timed launch re-read the same qweight, partly from L2.
  Arena ar = make_arena(cx.dev, cx.stream, cx.l2,
                        {x, l.qw, l.qz, l.sc, std::vector<unsigned char>(m * n * 4)});
  // cuBLAS's operands: x, w16, out (4 bytes an element: any --out fits)
  Arena blas_ar;
  if (cx.blas->gemm_ex)
    blas_ar = make_arena(cx.dev, cx.stream, cx.l2, {x, l.w16, std::vector<unsigned char>(m * n * 4)});
  Op op = int4_op(cx.dev, m, n, k, dt, cx.out);
  auto views = [&](uint64_t set, kaio_tensor *t) {
    t[0] = ar.view(set, 0, dt, m, k);
    t[1] = ar.view(set, 1, KAIO_DTYPE_U32, k / 8, n);
    t[2] = ar.view(set, 2, KAIO_DTYPE_U32, k / kGroup, n / 8);
    t[3] = ar.view(set, 3, dt, k / kGroup, n);
    t[4] = ar.view(set, 4, cx.out, m, n);
  };
  auto launch = [&](uint64_t set) {
    kaio_tensor t[5];
    views(set, t);
    CHECK(kaio_op_launch(op.get(), cx.stream, t, 5));
  };
  const double kaio_us = cx.timer->median_us(launch, ar.layout.sets);
  const double wbytes = double(l.qw.size() + l.qz.size() + l.sc.size());
  std::printf("int4%s M=%-5lld N=%-6lld K=%-6lld kaio %9.1f us  %7.0f GB/s of weights",
              dt == KAIO_DTYPE_BF16 ? "b" : " ", static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
              kaio_us, wbytes / kaio_us / 1e3);
  if (m <= 16 && cx.read) {
    // the same weight bytes read once by a plain kernel: what one launch of this size can reach
    const double read_us = cx.timer->median_us([&](uint64_t set) {
      const uint64_t bytes = (l.qw.size() + l.qz.size() + l.sc.size()) / 16 * 16;
      cx.read->enqueue(cx.stream, ar.at(set, 1), bytes);
    }, ar.layout.sets);
    std::printf("  read %6.1f us %5.1f%% of copy (kaio at %5.1f%% of it)", read_us,
                100.0 * wbytes / read_us / 1e3 / cx.copy_gbs, 100.0 * read_us / kaio_us);
  }
  if (cx.burst > 0) {
    const double burst_us = cx.timer->burst_us(launch, ar.layout.sets, cx.burst);
    std::printf("  burst %7.1f us/launch %5.1f%% of copy", burst_us,
                100.0 * wbytes / burst_us / 1e3 / cx.copy_gbs);
  }
  double one_us = 0;
  if (cx.one_shot) {   // the one-shot call: the fused kernel wherever the device runs sm_90a
    const kaio_matmul_int4_desc d = int4_desc(m, n, k, dt, cx.out);
    one_us = cx.timer->median_us([&](uint64_t set) {
      kaio_tensor t[5];
      views(set, t);
      CHECK(kaio_matmul_int4(cx.stream, &t[0], &t[1], &t[2], &t[3], &t[4], &d));
    }, ar.layout.sets);
    std::printf("  one-shot %9.1f us", one_us);
  }
  if (cx.blas->gemm_ex) {
    const double blas_us = cx.timer->median_us([&](uint64_t set) {
      cx.blas->gemm_f16(blas_ar.at(set, 0), blas_ar.at(set, 1), blas_ar.at(set, 2), m, n, k,
                        dt == KAIO_DTYPE_BF16 ? kR16BF : kR16F, blas_out(cx.out));
    }, blas_ar.layout.sets);
    const std::vector<float> got =
        read_out(ar.buf.get(), ar.layout.offset(0, 4), m * n, cx.out, cx.stream);
    const std::vector<float> ref =
        read_out(blas_ar.buf.get(), blas_ar.layout.offset(0, 2), m * n, cx.out, cx.stream);
    const double diff = rel_diff(got, ref);
    std::printf("  cuBLAS %s %9.1f us  %7.0f GB/s  speedup %5.2fx  diff %.1e%s",
                dt == KAIO_DTYPE_BF16 ? "bf16" : "f16", blas_us,
                double(l.w16.size()) / blas_us / 1e3, blas_us / kaio_us, diff,
                diff <= 1e-2 ? "" : "  MISMATCH");
    if (cx.one_shot) std::printf("  one-shot %5.2fx", blas_us / one_us);
    std::printf("\n");
    if (!(diff <= 1e-2)) cx.failed = true;
  } else {
    std::printf("  (no cuBLAS)\n");
  }
}

void bench_qkv(Ctx &cx, int64_t m, int64_t k, const int64_t ns[3]) {
  Layer l[3] = {make_layer(ns[0], k, 11, false), make_layer(ns[1], k, 12, false),
                make_layer(ns[2], k, 13, false)};
  std::vector<std::vector<unsigned char>> ops = {kaio_bench::random_bytes(KAIO_DTYPE_F16, m * k, -1, 1, 9)};
  for (int p = 0; p < 3; ++p) {
    ops.push_back(l[p].qw);
    ops.push_back(l[p].qz);
    ops.push_back(l[p].sc);
  }
  for (int p = 0; p < 3; ++p) ops.emplace_back(m * ns[p] * 2);
  Arena ar = make_arena(cx.dev, cx.stream, cx.l2, ops);
  auto views = [&](uint64_t set, kaio_tensor *t) {
    t[0] = ar.view(set, 0, KAIO_DTYPE_F16, m, k);
    for (int p = 0; p < 3; ++p) {
      t[1 + 3 * p] = ar.view(set, 1 + 3 * p, KAIO_DTYPE_U32, k / 8, ns[p]);
      t[2 + 3 * p] = ar.view(set, 2 + 3 * p, KAIO_DTYPE_U32, k / kGroup, ns[p] / 8);
      t[3 + 3 * p] = ar.view(set, 3 + 3 * p, KAIO_DTYPE_F16, k / kGroup, ns[p]);
      t[10 + p] = ar.view(set, 10 + p, KAIO_DTYPE_F16, m, ns[p]);
    }
  };
  kaio_qkv_int4_desc d;
  CHECK(kaio_qkv_int4_desc_init(&d, sizeof d));
  d.m = m;
  d.k = k;
  d.n_q = ns[0];
  d.n_k = ns[1];
  d.n_v = ns[2];
  d.group_size = kGroup;
  kaio_op *fused_raw = nullptr;
  CHECK(kaio_op_create_qkv_project_int4(&fused_raw, cx.dev, &d));
  Op fused(fused_raw);
  Op single[3];
  for (int p = 0; p < 3; ++p) {
    kaio_matmul_int4_desc s;
    CHECK(kaio_matmul_int4_desc_init(&s, sizeof s));
    s.m = m;
    s.n = ns[p];
    s.k = k;
    s.out_dtype = KAIO_DTYPE_F16;
    kaio_op *o = nullptr;
    CHECK(kaio_op_create_matmul_int4(&o, cx.dev, &s));
    single[p].reset(o);
  }
  auto launch_fused = [&](uint64_t set) {
    kaio_tensor t[13];
    views(set, t);
    CHECK(kaio_op_launch(fused.get(), cx.stream, t, 13));
  };
  const double fused_us = cx.timer->median_us(launch_fused, ar.layout.sets);
  const double three_us = cx.timer->median_us([&](uint64_t set) {
    kaio_tensor t[13];
    views(set, t);
    for (int p = 0; p < 3; ++p) {
      kaio_tensor s[5] = {t[0], t[1 + 3 * p], t[2 + 3 * p], t[3 + 3 * p], t[10 + p]};
      CHECK(kaio_op_launch(single[p].get(), cx.stream, s, 5));
    }
  }, ar.layout.sets);
  double wbytes = 0;
  for (const Layer &x : l) wbytes += double(x.qw.size() + x.qz.size() + x.sc.size());
  if (cx.burst > 0) {
    const double burst_us = cx.timer->burst_us(launch_fused, ar.layout.sets, cx.burst);
    std::printf("qkv4  M=%-5lld N=%lld/%lld/%lld K=%-6lld fused burst %7.1f us/launch\n",
                static_cast<long long>(m), static_cast<long long>(ns[0]),
                static_cast<long long>(ns[1]), static_cast<long long>(ns[2]),
                static_cast<long long>(k), burst_us);
  }
  std::printf("qkv4  M=%-5lld N=%lld/%lld/%lld K=%-6lld fused %8.1f us  %7.0f GB/s  3x unfused "
              "%8.1f us  fused speedup %5.2fx\n",
              static_cast<long long>(m), static_cast<long long>(ns[0]),
              static_cast<long long>(ns[1]), static_cast<long long>(ns[2]),
              static_cast<long long>(k), fused_us, wbytes / fused_us / 1e3, three_us,
              three_us / fused_us);
}

// The 7 int4 matmuls of one Llama-3-8B layer (f16 activations, group 128 with
// qzeros, f32 out), timed one by one (the sum of their medians) and as one burst
// (one event pair around the 7): what a decode step's chain of kernels costs.
void decode_layer(Ctx &cx, int64_t m) {
  struct Shape {
    int64_t n, k;
  };
  const Shape layer[] = {{4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096},
                         {14336, 4096}, {14336, 4096}, {4096, 14336}};
  std::vector<std::vector<unsigned char>> operands;
  std::vector<Op> ops;
  double wbytes = 0;
  for (const Shape &s : layer) {
    Layer l = make_layer(s.n, s.k, static_cast<uint32_t>(s.n + 3 * s.k + operands.size()), false);
    wbytes += double(l.qw.size() + l.qz.size() + l.sc.size());
    operands.push_back(kaio_bench::random_bytes(KAIO_DTYPE_F16, m * s.k, -1, 1, 7));
    operands.push_back(std::move(l.qw));
    operands.push_back(std::move(l.qz));
    operands.push_back(std::move(l.sc));
    operands.emplace_back(m * s.n * 4);
    ops.push_back(int4_op(cx.dev, m, s.n, s.k));
  }
  Arena ar = make_arena(cx.dev, cx.stream, cx.l2, operands);
  auto launch = [&](size_t i, uint64_t set) {
    const Shape s = layer[i];
    const kaio_tensor t[5] = {ar.view(set, 5 * i, KAIO_DTYPE_F16, m, s.k),
                              ar.view(set, 5 * i + 1, KAIO_DTYPE_U32, s.k / 8, s.n),
                              ar.view(set, 5 * i + 2, KAIO_DTYPE_U32, s.k / kGroup, s.n / 8),
                              ar.view(set, 5 * i + 3, KAIO_DTYPE_F16, s.k / kGroup, s.n),
                              ar.view(set, 5 * i + 4, KAIO_DTYPE_F32, m, s.n)};
    CHECK(kaio_op_launch(ops[i].get(), cx.stream, t, 5));
  };
  double sum_us = 0;
  for (size_t i = 0; i < std::size(layer); ++i)
    sum_us += cx.timer->median_us([&](uint64_t set) { launch(i, set); }, ar.layout.sets);
  const double burst_us = cx.timer->median_us([&](uint64_t set) {
    for (size_t i = 0; i < std::size(layer); ++i) launch(i, set);
  }, ar.layout.sets);
  const double mb = wbytes / 1e6;
  std::printf("layer M=%-3lld %7.1f MB | one-by-one sum %8.1f us %5.1f%% of copy | burst %8.1f us "
              "%5.1f%% of copy | burst / one-by-one %.3f\n",
              static_cast<long long>(m), mb, sum_us, 100.0 * mb / sum_us * 1e3 / cx.copy_gbs, burst_us,
              100.0 * mb / burst_us * 1e3 / cx.copy_gbs, burst_us / sum_us);
}

void bench_int8(Ctx &cx, int64_t m, int64_t n, int64_t k) {
  Arena ar = make_arena(cx.dev, cx.stream, cx.l2,
                        {random_words(m * k, 3), random_words(n * k, 4),
                         std::vector<unsigned char>(m * n * 4), std::vector<unsigned char>(m * n * 4)});
  kaio_matmul_int8_desc d;
  CHECK(kaio_matmul_int8_desc_init(&d, sizeof d));
  d.m = m;
  d.n = n;
  d.k = k;
  d.out_dtype = KAIO_DTYPE_I32;
  const double ops = 2.0 * m * n * k;
  // AUTO (wgmma + TMA on the H100) writes operand 2, checked against cuBLASLt;
  // ASYNC (the mma.sync kernel) is timed beside it.
  double us[2];
  for (int v = 1; v >= 0; --v) {  // AUTO last: its output is the one checked
    d.variant = v == 0 ? KAIO_MATMUL_AUTO : KAIO_MATMUL_ASYNC;
    kaio_op *raw = nullptr;
    CHECK(kaio_op_create_matmul_int8(&raw, cx.dev, &d));
    Op op(raw);
    us[v] = cx.timer->median_us([&](uint64_t set) {
      kaio_tensor t[5] = {ar.view(set, 0, KAIO_DTYPE_I8, m, k),
                          ar.view(set, 1, KAIO_DTYPE_I8, n, k), {}, {},
                          ar.view(set, 2, KAIO_DTYPE_I32, m, n)};
      CHECK(kaio_op_launch(op.get(), cx.stream, t, 5));
    }, ar.layout.sets);
  }
  const double kaio_us = us[0];
  std::printf("int8  M=%-5lld N=%-6lld K=%-6lld kaio %8.1f us %7.1f TOPS (mma.sync %7.1f)",
              static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
              kaio_us, ops / kaio_us / 1e6, ops / us[1] / 1e6);
  if (cx.blas->lt) {
    LtInt8 lt(*cx.blas, cx.dev, m, n, k);
    const double lt_us = cx.timer->median_us([&](uint64_t set) {
      lt.run(ar.at(set, 0), ar.at(set, 1), ar.at(set, 3));
    }, ar.layout.sets);
    CHECK(kaio_stream_synchronize(cx.stream));
    std::vector<int32_t> got(m * n), ref(m * n);
    CHECK(kaio_buffer_read(ar.buf.get(), ar.layout.offset(0, 2), got.data(), m * n * 4));
    CHECK(kaio_buffer_read(ar.buf.get(), ar.layout.offset(0, 3), ref.data(), m * n * 4));
    const bool same = got == ref;
    std::printf("  cuBLASLt %9.1f us %7.1f TOPS  kaio/cuBLASLt %5.1f%%%s\n", lt_us,
                ops / lt_us / 1e6, 100.0 * lt_us / kaio_us, same ? "  exact" : "  MISMATCH");
    if (!same) cx.failed = true;
  } else {
    std::printf("  (no cuBLASLt)\n");
  }
}

double copy_gbps(Ctx &cx) {
  const uint64_t bytes = 256ull << 20;
  kaio_buffer *a = nullptr, *b = nullptr;
  CHECK(kaio_buffer_create(&a, cx.dev, bytes));
  Buffer ba(a);
  CHECK(kaio_buffer_create(&b, cx.dev, bytes));
  Buffer bb(b);
  const double us = cx.timer->median_us(
      [&](uint64_t) { CHECK(kaio_buffer_copy(b, 0, a, 0, bytes, cx.stream)); }, 1);
  return 2.0 * bytes / us / 1e3;
}

}  // namespace

int main(int argc, char **argv) {
  int iters = 30;
  bool quick = false, decode = false, prefill = false, bf16 = false;
  int burst = 0;
  kaio_dtype out = KAIO_DTYPE_F32;
  std::vector<std::array<int64_t, 3>> shapes;   // --shape M,N,K (repeatable)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--decode") {
      decode = true;
    } else if (a == "--prefill") {
      prefill = true;
    } else if (a == "--bf16") {
      bf16 = true;
    } else if (a == "--out" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "f32" && v != "f16" && v != "bf16") {
        std::fprintf(stderr, "bench_quant: --out takes f32, f16 or bf16\n");
        return 1;
      }
      out = v == "f32" ? KAIO_DTYPE_F32 : v == "f16" ? KAIO_DTYPE_F16 : KAIO_DTYPE_BF16;
    } else if (a == "--shape" && i + 1 < argc) {
      const std::vector<std::string_view> parts = kaio_bench::split(argv[++i], ',');
      std::array<int64_t, 3> mnk{};
      bool ok = parts.size() == 3;
      for (size_t d = 0; ok && d < 3; ++d) {
        const auto x = kaio_bench::parse_positive(parts[d]);
        ok = x.has_value();
        if (ok) mnk[d] = *x;
      }
      if (!ok || mnk[2] % kGroup != 0 || mnk[1] % 8 != 0) {
        std::fprintf(stderr, "bench_quant: --shape takes M,N,K with N %% 8 == 0 and K %% %d == 0\n",
                     static_cast<int>(kGroup));
        return 1;
      }
      shapes.push_back(mnk);
    } else if (a == "--burst" && i + 1 < argc) {
      const auto n = kaio_bench::parse_positive(argv[++i]);
      if (!n || *n > 64) {
        std::fprintf(stderr, "bench_quant: --burst takes 1 to 64\n");
        return 1;
      }
      burst = static_cast<int>(*n);
    } else if (a == "--iters" && i + 1 < argc) {
      const auto n = kaio_bench::parse_positive(argv[++i]);
      if (!n || *n > 100000) {
        std::fprintf(stderr, "bench_quant: --iters takes 1 to 100000\n");
        return 1;
      }
      iters = static_cast<int>(*n);
    } else {
      std::fprintf(stderr, "usage: bench_quant [--iters N] [--quick] [--decode] [--prefill] [--bf16] "
                           "[--out f32|f16|bf16] [--shape M,N,K]... [--burst B]\n");
      return a == "--help" ? 0 : 1;
    }
  }
  if (!shapes.empty() && !prefill) {
    std::fprintf(stderr, "bench_quant: --shape picks prefill rows: add --prefill\n");
    return 1;
  }
  try {
    Device device;
    const kaio_device_info info =
        kaio_bench::open_device(&device, "quantized matmul needs compute capability 8.0+");
    const Stream stream = kaio_bench::create_stream(device);
    Timer timer(device.get(), stream.get(), iters);
    kaio_bench::print_banner("bench_quant", info);
    Blas blas(stream.get());
    Ctx cx{device.get(), stream.get(), info.l2_cache_bytes, &timer, &blas};
    const kaio_bench::PlainRead plain_read(device.get(), info.sm_count);
    cx.read = &plain_read;
    if (bf16) cx.act = KAIO_DTYPE_BF16;
    cx.out = out;
    if (decode) cx.burst = burst;
    std::printf("median of %d launches timed one by one with events after %d warm-ups; operands "
                "rotated past L2; cuBLAS %s, cuBLASLt %s\n",
                iters, kaio_bench::kWarmups, blas.gemm_ex ? "found" : "missing",
                blas.lt ? "found" : "missing");
    cx.copy_gbs = copy_gbps(cx);
    std::printf("device-to-device copy, 256 MiB: %.0f GB/s (read + write)\n\n", cx.copy_gbs);
    std::vector<std::pair<int64_t, int64_t>> nk = {{4096, 4096}};
    if (!quick) nk = {{4096, 4096}, {8192, 8192}, {14336, 4096}};
    if (prefill) {
      cx.one_shot = true;
      if (!shapes.empty()) {
        for (auto [m, n, k] : shapes) bench_int4(cx, m, n, k);
        return cx.failed ? 1 : 0;
      }
      for (auto [n, k] : nk)
        for (int64_t m : {512, 2048, 4096}) bench_int4(cx, m, n, k);
      return cx.failed ? 1 : 0;
    }
    for (auto [n, k] : nk)
      for (int64_t m : {1, 4, 16, 512, 4096})
        if (!decode || m <= 16) bench_int4(cx, m, n, k);
    std::printf("\n");
    const int64_t gqa[3] = {4096, 1024, 1024}, mha[3] = {4096, 4096, 4096};
    for (const int64_t *ns : {gqa, mha})
      for (int64_t m : {1, 4, 16}) bench_qkv(cx, m, 4096, ns);
    if (decode && cx.burst > 0) {
      std::printf("\n== decode layer: Llama-3-8B's Q K V O gate up down, int4 f16, f32 out ==\n");
      for (int64_t m : {1, 16}) decode_layer(cx, m);
    }
    if (decode) return cx.failed ? 1 : 0;
    std::printf("\n");
    bench_int8(cx, 4096, 4096, 4096);
    for (auto [n, k] : nk)
      for (int64_t m : {1, 16, 512, 4096}) bench_int8(cx, m, n, k);
    return cx.failed ? 1 : 0;
  } catch (const kaio_bench::NoDevice &e) {
    std::fprintf(stderr, "bench_quant: %s\n", e.what());
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "bench_quant: %s\n", e.what());
    return 1;
  }
}
