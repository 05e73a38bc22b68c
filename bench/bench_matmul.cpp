// bench_matmul: libkaio's tensor-core matmul against cuBLAS, in one process on
// one stream: the square shapes of KAIO's cuBLAS table and the linear layers of
// 7B-class LLMs, f16 and bf16 in, f32 out. See README.md.
//
// cuBLAS is opened at run time with dlopen, so building needs neither the CUDA
// toolkit nor its headers: the few prototypes and constants used are declared
// below. Without cuBLAS the bench still times libkaio and checks it against a
// host reference.
//
// Exit status: 0 on success, 1 on any failure (a kaio or cuBLAS error, or an
// output that disagrees with cuBLAS or the host reference), 2 when there is no
// usable GPU.
#include <dlfcn.h>
#include <glob.h>
#include <kaio/kaio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "support/command_line.hpp"
#include "support/cublas.hpp"
#include "support/device.hpp"
#include "support/errors.hpp"
#include "support/handles.hpp"
#include "support/host_data.hpp"
#include "support/l2_rotation.hpp"
#include "support/timing.hpp"

namespace {

using kaio_bench::Buffer;
using kaio_bench::Cublas;
using kaio_bench::CublasError;
using kaio_bench::CUDA_R_16BF;
using kaio_bench::CUDA_R_16F;
using kaio_bench::Device;
using kaio_bench::KaioError;
using kaio_bench::Op;
using kaio_bench::SetLayout;
using kaio_bench::Stream;
using kaio_bench::Timer;

constexpr int kDefaultIters = 30;
// Relative Frobenius difference allowed between two f32 outputs of the same
// product. Both sides accumulate exact products of 16-bit inputs in f32, so
// they differ only by summation order: ~1e-6 in practice.
constexpr double kTolerance = 1e-3;
// sgemm is checked at sampled entries only to catch a wrong call, loosely
// enough that TF32 (NVIDIA_TF32_OVERRIDE=1) does not trip it.
constexpr double kSgemmTolerance = 1e-2;
constexpr int kSamples = 256;  // entries of C checked against the host reference
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

enum Variant { kAuto, kSync, kAsync, kVariants };
constexpr kaio_matmul_variant kVariantEnum[kVariants] = {KAIO_MATMUL_AUTO, KAIO_MATMUL_SYNC,
                                                         KAIO_MATMUL_ASYNC};
constexpr const char *kVariantName[kVariants] = {"auto", "sync", "async"};

// ---------------------------------------------------------------------------
// Errors

// A device fault leaves the context unusable: every later call would fail
// too, so the run stops there. Any other error fails only its case.
void rethrow_if_fatal(const KaioError &e) {
  if (e.status == KAIO_ERROR_DEVICE_FAULT) throw e;
}

// ---------------------------------------------------------------------------
// Command line

struct Shape {
  int64_t m, n, k;
};

struct Options {
  std::vector<kaio_dtype> dtypes = {KAIO_DTYPE_F16, KAIO_DTYPE_BF16};
  bool square = true;
  bool llm = true;
  std::vector<Shape> shapes;                                // --shape: replaces the default set
  std::optional<std::pair<kaio_trans, kaio_trans>> layout;  // --layout: trans_a, trans_b
  int iters = kDefaultIters;
  std::string json;
  std::array<bool, kVariants> timed = {true, true, true};
};

constexpr const char *kUsage =
    "usage: bench_matmul [--dtype f16|bf16] [--square-only | --llm-only] [--shape M,N,K]...\n"
    "                    [--layout nn|nt|tn|tt] [--iters N] [--variants auto,sync,async]\n"
    "                    [--json PATH]\n"
    "  --dtype        only this input dtype (default: f16, then bf16); output is f32\n"
    "  --square-only  only the square shapes 256 ... 8192 (layout nn)\n"
    "  --llm-only     only the LLM shapes M in {1,16,128,2048,8192} x (N,K) in\n"
    "                 {(4096,4096), (11008,4096), (4096,11008), (14336,4096)} (layout nt)\n"
    "  --shape M,N,K  this shape instead of the default set (repeatable; layout nn\n"
    "                 unless --layout); K must be a multiple of 8\n"
    "  --layout XY    A's and B's storage for every case: X for A (n: M x K, t: K x M),\n"
    "                 Y for B (n: K x N, t: N x K, nn.Linear weights)\n"
    "  --iters N      timed launches per measurement after 5 warm-ups; the median is\n"
    "                 reported (default 30; use 20 or more)\n"
    "  --variants L   libkaio variants to time, comma-separated (default auto,sync,async);\n"
    "                 auto's output is checked against cuBLAS in any case\n"
    "  --json PATH    also write every result to PATH as JSON (rewritten after each case)\n"
    "Environment: KAIO_BENCH_CUBLAS=/path/to/libcublas.so.N is tried before the usual\n"
    "names and directories.\n";

// The kaio matmul limits, checked here so a typo gets a usage message rather
// than a failed case.
std::optional<Shape> parse_shape(std::string_view text, std::string *why) {
  const std::vector<std::string_view> parts = kaio_bench::split(text, ',');
  if (parts.size() != 3) {
    *why = "expected M,N,K";
    return std::nullopt;
  }
  int64_t v[3];
  for (int i = 0; i < 3; ++i) {
    const std::optional<int64_t> n = kaio_bench::parse_positive(parts[i]);
    if (!n || *n > INT32_MAX) {
      *why = "M, N and K must be integers from 1 to 2^31 - 1";
      return std::nullopt;
    }
    v[i] = *n;
  }
  if (v[2] % 8 != 0) {
    *why = "K must be a multiple of 8 (a libkaio matmul constraint)";
    return std::nullopt;
  }
  if (v[0] > 65535LL * 128) {
    *why = "M must be at most 65535 * 128 (a libkaio matmul constraint)";
    return std::nullopt;
  }
  return Shape{v[0], v[1], v[2]};
}

std::optional<std::pair<kaio_trans, kaio_trans>> parse_layout(std::string_view text) {
  if (text.size() != 2) return std::nullopt;
  auto one = [](char c) -> std::optional<kaio_trans> {
    if (c == 'n' || c == 'N') return KAIO_TRANS_N;
    if (c == 't' || c == 'T') return KAIO_TRANS_T;
    return std::nullopt;
  };
  const std::optional<kaio_trans> a = one(text[0]), b = one(text[1]);
  if (!a || !b) return std::nullopt;
  return std::pair{*a, *b};
}

std::optional<std::array<bool, kVariants>> parse_variants(std::string_view text) {
  std::array<bool, kVariants> on = {false, false, false};
  for (std::string_view name : kaio_bench::split(text, ',')) {
    bool known = false;
    for (int v = 0; v < kVariants; ++v)
      if (name == kVariantName[v]) on[v] = known = true;
    if (!known) return std::nullopt;
  }
  return on;
}

// Returns the options, or nothing after printing why (usage errors and --help).
std::optional<Options> parse_args(int argc, char **argv, bool *help) {
  Options o;
  *help = false;
  auto bad = [&](const std::string &why) {
    std::fprintf(stderr, "bench_matmul: %s\n%s", why.c_str(), kUsage);
    return std::nullopt;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      *help = true;
      std::fputs(kUsage, stdout);
      return std::nullopt;
    }
    if (flag == "--square-only") {
      o.llm = false;
      continue;
    }
    if (flag == "--llm-only") {
      o.square = false;
      continue;
    }
    if (flag != "--dtype" && flag != "--shape" && flag != "--layout" && flag != "--iters" &&
        flag != "--json" && flag != "--variants")
      return bad("unknown argument " + std::string(flag));
    if (i + 1 >= argc) return bad(std::string(flag) + " needs a value");
    const std::string_view value = argv[++i];
    const std::string shown = std::string(flag) + " " + std::string(value);
    if (flag == "--dtype") {
      if (value == "f16") {
        o.dtypes = {KAIO_DTYPE_F16};
      } else if (value == "bf16") {
        o.dtypes = {KAIO_DTYPE_BF16};
      } else {
        return bad("bad argument " + shown + ": use f16 or bf16");
      }
    } else if (flag == "--shape") {
      std::string why;
      const std::optional<Shape> s = parse_shape(value, &why);
      if (!s) return bad("bad argument " + shown + ": " + why);
      o.shapes.push_back(*s);
    } else if (flag == "--layout") {
      o.layout = parse_layout(value);
      if (!o.layout) return bad("bad argument " + shown + ": use nn, nt, tn or tt");
    } else if (flag == "--iters") {
      const std::optional<int64_t> n = kaio_bench::parse_positive(value);
      if (!n || *n > 100000) return bad("bad argument " + shown + ": use 1 to 100000");
      o.iters = static_cast<int>(*n);
    } else if (flag == "--json") {
      if (value.empty()) return bad("--json needs a path");
      o.json = value;
    } else {  // --variants
      const std::optional<std::array<bool, kVariants>> v = parse_variants(value);
      if (!v) return bad("bad argument " + shown + ": a comma-separated list of auto, sync, async");
      o.timed = *v;
    }
  }
  if (!o.square && !o.llm) return bad("--square-only and --llm-only exclude each other");
  if (!o.shapes.empty() && (!o.square || !o.llm))
    return bad("--shape replaces the default set: drop --square-only / --llm-only");
  return o;
}

// ---------------------------------------------------------------------------
// Cases

struct Case {
  const char *group;  // "square", "llm" or "custom"
  int64_t m, n, k;
  kaio_trans ta, tb;
};

std::vector<Case> make_cases(const Options &o) {
  std::vector<Case> cases;
  auto add = [&](const char *group, int64_t m, int64_t n, int64_t k, kaio_trans ta, kaio_trans tb) {
    if (o.layout) std::tie(ta, tb) = *o.layout;
    cases.push_back({group, m, n, k, ta, tb});
  };
  if (!o.shapes.empty()) {
    for (const Shape &s : o.shapes) add("custom", s.m, s.n, s.k, KAIO_TRANS_N, KAIO_TRANS_N);
    return cases;
  }
  // KAIO's cuBLAS table was measured NN.
  if (o.square)
    for (int64_t n : {256, 512, 1024, 2048, 4096, 6144, 8192})
      add("square", n, n, n, KAIO_TRANS_N, KAIO_TRANS_N);
  // y = x · Wᵀ with W the N×K weight of nn.Linear: the projections of a
  // 7B-class model (attention 4096², MLP up 11008×4096, down 4096×11008,
  // Mistral/Llama-3 MLP 14336×4096), M tokens from decode to prefill.
  if (o.llm) {
    const std::pair<int64_t, int64_t> nk[] = {
        {4096, 4096}, {11008, 4096}, {4096, 11008}, {14336, 4096}};
    for (auto [n, k] : nk)
      for (int64_t m : {1, 16, 128, 2048, 8192}) add("llm", m, n, k, KAIO_TRANS_N, KAIO_TRANS_T);
  }
  return cases;
}

std::string layout_name(const Case &c) {
  return std::string(c.ta == KAIO_TRANS_T ? "t" : "n") + (c.tb == KAIO_TRANS_T ? "t" : "n");
}

int64_t round_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

// The row-major storage of A, B and C. A's and B's row strides are rounded up
// to multiples of 8 elements (the tensor-core kernels' requirement); that
// changes nothing for the default shapes, only for odd M or N stored
// transposed. cuBLAS gets the same strides.
struct Geometry {
  int64_t a_rows, a_cols, lda;  // A: M×K (N) or K×M (T)
  int64_t b_rows, b_cols, ldb;  // B: K×N (N) or N×K (T)
  int64_t ldc;                  // C: M×N
  explicit Geometry(const Case &c)
      : a_rows(c.ta == KAIO_TRANS_T ? c.k : c.m),
        a_cols(c.ta == KAIO_TRANS_T ? c.m : c.k),
        lda(round_up(a_cols, 8)),
        b_rows(c.tb == KAIO_TRANS_T ? c.n : c.k),
        b_cols(c.tb == KAIO_TRANS_T ? c.k : c.n),
        ldb(round_up(b_cols, 8)),
        ldc(c.n) {}
  uint64_t a_elems() const { return static_cast<uint64_t>(a_rows * lda); }
  uint64_t b_elems() const { return static_cast<uint64_t>(b_rows * ldb); }
};

uint64_t storage_a(const Case &c, const Geometry &g, int64_t i, int64_t kk) {
  return static_cast<uint64_t>(c.ta == KAIO_TRANS_T ? kk * g.lda + i : i * g.lda + kk);
}
uint64_t storage_b(const Case &c, const Geometry &g, int64_t kk, int64_t j) {
  return static_cast<uint64_t>(c.tb == KAIO_TRANS_T ? j * g.ldb + kk : kk * g.ldb + j);
}

double flops(const Case &c) {
  return 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
}
double tflops(const Case &c, double us) { return flops(c) / (us * 1e6); }

// ---------------------------------------------------------------------------
// Checks

// ||out - ref||_F / ||ref||_F over C (M×N, row stride ldc); NaN or Inf in out
// makes it NaN or Inf, which fails every "<= tolerance" test.
double rel_frobenius(const std::vector<float> &out, const std::vector<float> &ref, int64_t m,
                     int64_t n, int64_t ldc) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < m; ++i) {
    const float *o = out.data() + i * ldc, *r = ref.data() + i * ldc;
    for (int64_t j = 0; j < n; ++j) {
      const double d = static_cast<double>(o[j]) - r[j];
      num += d * d;
      den += static_cast<double>(r[j]) * r[j];
    }
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// An f64 host reference at a few entries of C: the four corners and random
// ones. Computed from the very values uploaded (the rounded 16-bit inputs, or
// the f32 ones for sgemm), so it is exact up to f64 rounding.
struct Samples {
  std::vector<std::pair<int64_t, int64_t>> points;
  std::vector<double> ref;

  template <class Value>  // Value(i, j) -> the output at C[i][j]
  double rel(Value value) const {
    double num = 0, den = 0;
    for (size_t p = 0; p < points.size(); ++p) {
      const double d = value(points[p].first, points[p].second) - ref[p];
      num += d * d;
      den += ref[p] * ref[p];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  }
};

template <class AValue, class BValue>  // storage index -> the value as a double
Samples sample_reference(const Case &c, const Geometry &g, AValue a, BValue b) {
  Samples s;
  s.points = {{0, 0}, {0, c.n - 1}, {c.m - 1, 0}, {c.m - 1, c.n - 1}};
  uint32_t seed = 12345;
  while (s.points.size() < static_cast<size_t>(kSamples)) {
    seed = seed * 1664525u + 1013904223u;
    const int64_t i = static_cast<int64_t>(seed % static_cast<uint64_t>(c.m));
    seed = seed * 1664525u + 1013904223u;
    const int64_t j = static_cast<int64_t>(seed % static_cast<uint64_t>(c.n));
    s.points.push_back({i, j});
  }
  for (auto [i, j] : s.points) {
    double sum = 0;
    for (int64_t kk = 0; kk < c.k; ++kk)
      sum += a(storage_a(c, g, i, kk)) * b(storage_b(c, g, kk, j));
    s.ref.push_back(sum);
  }
  return s;
}

// ---------------------------------------------------------------------------
// Device memory

// A, B and C of one case, layout operands 0, 1 and 2, in one buffer of sets
// rotated to defeat L2 (see support/l2_rotation.hpp).
struct Arena : SetLayout {
  explicit Arena(SetLayout layout) : SetLayout(std::move(layout)) {}

  Buffer buffer;
  uint64_t base = 0;  // device address of byte 0
  uint64_t c_bytes = 0;

  uint64_t a(uint64_t set) const { return offset(set, 0); }  // byte offsets
  uint64_t b(uint64_t set) const { return offset(set, 1); }
  uint64_t c(uint64_t set) const { return offset(set, 2); }
};

// Uploads A and B into set 0, then copies set 0 to every other set.
Arena make_arena(kaio_device *device, kaio_stream *stream, const Case &c, const Geometry &g,
                 size_t in_size, const void *host_a, const void *host_b, uint64_t l2_bytes) {
  const uint64_t a_bytes = g.a_elems() * in_size, b_bytes = g.b_elems() * in_size;
  const uint64_t c_bytes = static_cast<uint64_t>(c.m * g.ldc) * sizeof(float);
  Arena ar(kaio_bench::plan_sets({a_bytes, b_bytes, c_bytes}, l2_bytes));
  ar.c_bytes = c_bytes;
  kaio_buffer *raw = nullptr;
  CHECK(kaio_buffer_create(&raw, device, ar.sets * ar.set_stride));
  ar.buffer.reset(raw);
  ar.base = kaio_buffer_device_ptr(raw);
  if (ar.base == 0) throw KaioError("kaio_buffer_device_ptr returned 0", KAIO_ERROR_INTERNAL);
  CHECK(kaio_buffer_write(raw, ar.a(0), host_a, a_bytes));
  CHECK(kaio_buffer_write(raw, ar.b(0), host_b, b_bytes));
  kaio_bench::replicate_first_set(raw, ar, stream);
  return ar;
}

// ---------------------------------------------------------------------------
// One case

struct Cell {
  double us = kNaN;          // median time; NaN when not timed
  double rel = kNaN;         // rel. Frobenius difference from cuBLAS's output
  double sample_rel = kNaN;  // rel. difference from the host reference at sampled entries
  uint64_t sets = 0;         // sgemm only: its own f32 sets
  bool checked = false;
  std::string error;
};

struct Result {
  Case c{};
  kaio_dtype dtype = KAIO_DTYPE_INVALID;
  uint64_t sets = 0;
  std::array<Cell, kVariants> kaio;
  Cell cublas, sgemm;
  std::vector<std::string> problems;  // mismatches and errors: any makes the exit status 1
};

class Bench {
 public:
  Bench(kaio_device *device, kaio_stream *stream, const kaio_device_info &info,
        const Cublas *cublas, const Options &opt)
      : device_(device),
        stream_(stream),
        l2_(info.l2_cache_bytes),
        cublas_(cublas),
        opt_(opt),
        timer_(device, stream, opt.iters) {}

  Result run(const Case &c, kaio_dtype dtype) {
    Result r;
    r.c = c;
    r.dtype = dtype;
    const Geometry g(c);
    // Host values in [-1, 1]; the 16-bit operands are them rounded to nearest
    // even, sgemm gets them as they are.
    const std::vector<float> a32 = kaio_bench::random_floats(g.a_elems(), -1, 1, 0x5EED0001u);
    const std::vector<float> b32 = kaio_bench::random_floats(g.b_elems(), -1, 1, 0x5EED0002u);
    try {
      run_half(c, g, dtype, a32, b32, &r);
    } catch (const KaioError &e) {
      rethrow_if_fatal(e);
      r.problems.push_back(std::string("error: ") + e.what());
    } catch (const CublasError &e) {
      r.problems.push_back(std::string("error: ") + e.what());
    }
    if (cublas_) run_sgemm(c, g, a32, b32, &r);
    return r;
  }

 private:
  Op make_op(const Case &c, kaio_dtype dtype, int v) const {
    kaio_matmul_desc d;
    CHECK(kaio_matmul_desc_init(&d, sizeof d));
    d.in_dtype = dtype;
    d.out_dtype = KAIO_DTYPE_F32;
    d.trans_a = c.ta;
    d.trans_b = c.tb;
    d.variant = kVariantEnum[v];
    d.m = c.m;
    d.n = c.n;
    d.k = c.k;
    d.alpha = 1.0f;
    d.beta = 0.0f;
    kaio_op *op = nullptr;
    CHECK(kaio_op_create_matmul(&op, device_, &d));
    return Op(op);
  }

  void launch_kaio(const kaio_op *op, const Case &c, const Geometry &g, kaio_dtype dtype,
                   const Arena &ar, uint64_t set) const {
    kaio_tensor t[3];
    t[0] = kaio_tensor_2d(ar.buffer.get(), dtype, g.a_rows, g.a_cols);
    t[0].offset_bytes = ar.a(set);
    t[0].row_stride = g.lda;
    t[1] = kaio_tensor_2d(ar.buffer.get(), dtype, g.b_rows, g.b_cols);
    t[1].offset_bytes = ar.b(set);
    t[1].row_stride = g.ldb;
    t[2] = kaio_tensor_2d(ar.buffer.get(), KAIO_DTYPE_F32, c.m, c.n);
    t[2].offset_bytes = ar.c(set);
    t[2].row_stride = g.ldc;
    CHECK(kaio_op_launch(op, stream_, t, 3));
  }

  // Runs `launch` once on set 0 into a NaN-poisoned C and reads C back.
  void run_once(const Arena &ar, const std::function<void(uint64_t)> &launch,
                std::vector<float> *out) const {
    CHECK(kaio_buffer_memset(ar.buffer.get(), stream_, ar.c(0), 0xFF, ar.c_bytes));
    launch(0);
    CHECK(kaio_stream_synchronize(stream_));
    out->resize(ar.c_bytes / sizeof(float));
    CHECK(kaio_buffer_read(ar.buffer.get(), ar.c(0), out->data(), ar.c_bytes));
  }

  void run_half(const Case &c, const Geometry &g, kaio_dtype dtype, const std::vector<float> &a32,
                const std::vector<float> &b32, Result *r) {
    const std::vector<uint16_t> a16 = kaio_bench::to_half(a32, dtype),
                                b16 = kaio_bench::to_half(b32, dtype);
    const Arena ar = make_arena(device_, stream_, c, g, 2, a16.data(), b16.data(), l2_);
    r->sets = ar.sets;
    const int type = dtype == KAIO_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
    auto decode = [dtype](uint16_t h) {
      return dtype == KAIO_DTYPE_F16 ? kaio_bench::from_f16(h) : kaio_bench::from_bf16(h);
    };
    const Samples samples = sample_reference(
        c, g, [&](uint64_t i) { return decode(a16[i]); },
        [&](uint64_t i) { return decode(b16[i]); });

    // Ops: AUTO always (it is the one checked), the others when timed.
    std::array<Op, kVariants> ops;
    for (int v = 0; v < kVariants; ++v) {
      if (v != kAuto && !opt_.timed[v]) continue;
      try {
        ops[v] = make_op(c, dtype, v);
      } catch (const KaioError &e) {
        rethrow_if_fatal(e);
        fail(&r->kaio[v], r, std::string("kaio ") + kVariantName[v] + ": " + e.what());
      }
    }

    // The check, before any timing: cuBLAS's output is the reference, and
    // itself checked against the host at sampled entries.
    auto cublas_launch = [&](uint64_t set) {
      cublas_->gemm_ex(c.ta == KAIO_TRANS_T, c.tb == KAIO_TRANS_T, c.m, c.n, c.k, type,
                       ar.base + ar.a(set), g.lda, ar.base + ar.b(set), g.ldb,
                       ar.base + ar.c(set), g.ldc);
    };
    std::vector<float> ref, out;
    if (cublas_) {
      try {
        run_once(ar, cublas_launch, &ref);
        r->cublas.sample_rel =
            samples.rel([&](int64_t i, int64_t j) { return ref[i * g.ldc + j]; });
        r->cublas.checked = true;
        if (!(r->cublas.sample_rel <= kTolerance))
          r->problems.push_back(mismatch("cuBLAS GemmEx (the reference itself!)",
                                         "host f64 reference", r->cublas.sample_rel));
      } catch (const CublasError &e) {
        fail(&r->cublas, r, e.what());
      } catch (const KaioError &e) {
        rethrow_if_fatal(e);
        fail(&r->cublas, r, std::string("cuBLAS reference run: ") + e.what());
      }
    }
    const bool have_ref = r->cublas.checked;
    for (int v = 0; v < kVariants; ++v) {
      if (!ops[v]) continue;
      Cell &cell = r->kaio[v];
      try {
        run_once(
            ar, [&](uint64_t set) { launch_kaio(ops[v].get(), c, g, dtype, ar, set); }, &out);
        cell.sample_rel = samples.rel([&](int64_t i, int64_t j) { return out[i * g.ldc + j]; });
        if (have_ref) cell.rel = rel_frobenius(out, ref, c.m, c.n, g.ldc);
        cell.checked = true;
        const std::string who = std::string("kaio ") + kVariantName[v];
        if (have_ref && !(cell.rel <= kTolerance))
          r->problems.push_back(mismatch(who, "cuBLAS", cell.rel));
        else if (!(cell.sample_rel <= kTolerance))
          r->problems.push_back(mismatch(who, "host f64 reference", cell.sample_rel));
      } catch (const KaioError &e) {
        rethrow_if_fatal(e);
        fail(&cell, r, std::string("kaio ") + kVariantName[v] + ": " + e.what());
      }
    }
    std::vector<float>().swap(ref);
    std::vector<float>().swap(out);

    // Timing.
    for (int v = 0; v < kVariants; ++v) {
      Cell &cell = r->kaio[v];
      if (!opt_.timed[v] || !ops[v] || !cell.error.empty()) continue;
      try {
        cell.us = timer_.median_us(
            [&](uint64_t set) { launch_kaio(ops[v].get(), c, g, dtype, ar, set); }, ar.sets);
      } catch (const KaioError &e) {
        rethrow_if_fatal(e);
        fail(&cell, r, std::string("kaio ") + kVariantName[v] + " timing: " + e.what());
      }
    }
    if (cublas_ && r->cublas.error.empty()) {
      try {
        r->cublas.us = timer_.median_us(cublas_launch, ar.sets);
      } catch (const CublasError &e) {
        fail(&r->cublas, r, e.what());
      } catch (const KaioError &e) {
        rethrow_if_fatal(e);
        fail(&r->cublas, r, std::string("cuBLAS timing: ") + e.what());
      }
    }
  }

  // f32 in and out at the same shape and layout. The same for every dtype, so
  // measured once per shape and layout.
  void run_sgemm(const Case &c, const Geometry &g, const std::vector<float> &a32,
                 const std::vector<float> &b32, Result *r) {
    const auto key = std::make_tuple(c.m, c.n, c.k, c.ta, c.tb);
    if (auto it = sgemm_cache_.find(key); it != sgemm_cache_.end()) {
      r->sgemm = it->second;
      if (!r->sgemm.error.empty()) r->problems.push_back("sgemm: " + r->sgemm.error);
      return;
    }
    Cell &cell = r->sgemm;
    try {
      const Arena ar = make_arena(device_, stream_, c, g, 4, a32.data(), b32.data(), l2_);
      cell.sets = ar.sets;
      auto launch = [&](uint64_t set) {
        cublas_->sgemm(c.ta == KAIO_TRANS_T, c.tb == KAIO_TRANS_T, c.m, c.n, c.k, ar.base + ar.a(set),
                     g.lda, ar.base + ar.b(set), g.ldb, ar.base + ar.c(set), g.ldc);
      };
      const Samples samples = sample_reference(
          c, g, [&](uint64_t i) { return static_cast<double>(a32[i]); },
          [&](uint64_t i) { return static_cast<double>(b32[i]); });
      CHECK(kaio_buffer_memset(ar.buffer.get(), stream_, ar.c(0), 0xFF, ar.c_bytes));
      launch(0);
      CHECK(kaio_stream_synchronize(stream_));
      // Only the sampled entries come back: C can be hundreds of MiB.
      cell.sample_rel = samples.rel([&](int64_t i, int64_t j) {
        float x = 0;
        CHECK(kaio_buffer_read(ar.buffer.get(), ar.c(0) + static_cast<uint64_t>(i * g.ldc + j) * 4,
                               &x, sizeof x));
        return static_cast<double>(x);
      });
      cell.checked = true;
      if (!(cell.sample_rel <= kSgemmTolerance))
        r->problems.push_back(
            mismatch("cuBLAS sgemm", "host f64 reference", cell.sample_rel, kSgemmTolerance));
      cell.us = timer_.median_us(launch, ar.sets);
    } catch (const CublasError &e) {
      fail(&cell, r, std::string("sgemm: ") + e.what());
    } catch (const KaioError &e) {
      rethrow_if_fatal(e);
      fail(&cell, r, std::string("sgemm: ") + e.what());
    }
    sgemm_cache_[key] = cell;
  }

  static void fail(Cell *cell, Result *r, const std::string &message) {
    cell->error = message;
    r->problems.push_back("error: " + message);
  }

  static std::string mismatch(const std::string &who, const std::string &against, double rel,
                              double tolerance = kTolerance) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.3g (allowed: %.0e)", rel, tolerance);
    return "MISMATCH: " + who + " differs from " + against + ": relative Frobenius difference " +
           buf;
  }

  kaio_device *device_;
  kaio_stream *stream_;
  uint64_t l2_;
  const Cublas *cublas_;
  const Options &opt_;
  Timer timer_;
  std::map<std::tuple<int64_t, int64_t, int64_t, kaio_trans, kaio_trans>, Cell> sgemm_cache_;
};

// ---------------------------------------------------------------------------
// Output

std::string fmt(const char *format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string shape_name(const Case &c) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "%5lld x %5lld x %5lld", static_cast<long long>(c.m),
                static_cast<long long>(c.n), static_cast<long long>(c.k));
  return buf;
}

std::string tflops_cell(const Case &c, const Cell &cell) {
  if (!cell.error.empty()) return "error";
  if (std::isnan(cell.us)) return "-";
  return fmt("%.1f", tflops(c, cell.us));
}

std::string pct_cell(const Cell &kaio, const Cell &cublas) {
  if (std::isnan(kaio.us) || std::isnan(cublas.us)) return "-";
  return fmt("%.1f%%", 100.0 * cublas.us / kaio.us);
}

void print_header(const Options &o, kaio_dtype dtype, bool have_cublas) {
  const bool f16 = dtype == KAIO_DTYPE_F16;
  std::printf(
      "\n== %s x %s -> f32: libkaio prepared ops; cuBLAS: cublasGemmEx %s -> CUDA_R_32F, "
      "CUBLAS_COMPUTE_32F; sgemm: cublasSgemm f32 ==\n",
      kaio_dtype_name(dtype), kaio_dtype_name(dtype), f16 ? "CUDA_R_16F" : "CUDA_R_16BF");
  std::printf("%-21s %-3s %4s |", "M x N x K", "lay", "sets");
  for (int v = 0; v < kVariants; ++v)
    if (o.timed[v]) std::printf(" %7s", kVariantName[v]);
  std::printf(" | %8s %8s |", "cuBLAS", "sgemm");
  for (int v = 0; v < kVariants; ++v)
    if (o.timed[v]) std::printf(" %7s", (std::string(kVariantName[v]) + "%").c_str());
  std::printf(" | %s\n", have_cublas ? "max rel. diff vs cuBLAS" : "max rel. diff vs host");
}

void print_row(const Options &o, const Result &r, bool have_cublas) {
  const Case &c = r.c;
  std::printf("%-21s %-3s %4llu |", shape_name(c).c_str(), layout_name(c).c_str(),
              static_cast<unsigned long long>(r.sets));
  for (int v = 0; v < kVariants; ++v)
    if (o.timed[v]) std::printf(" %7s", tflops_cell(c, r.kaio[v]).c_str());
  if (have_cublas)
    std::printf(" | %8s %8s |", tflops_cell(c, r.cublas).c_str(), tflops_cell(c, r.sgemm).c_str());
  else
    std::printf(" | %17s |", "cuBLAS not found");
  for (int v = 0; v < kVariants; ++v)
    if (o.timed[v]) std::printf(" %7s", pct_cell(r.kaio[v], r.cublas).c_str());
  // The worst kaio difference over the variants checked.
  double worst = -1;
  for (int v = 0; v < kVariants; ++v) {
    const Cell &cell = r.kaio[v];
    if (!cell.checked) continue;
    const double d = have_cublas && r.cublas.checked ? cell.rel : cell.sample_rel;
    worst = std::isnan(d) || std::isnan(worst) ? kNaN : std::max(worst, d);
  }
  std::string check = worst == -1 ? "-" : fmt("%.1e", worst);
  std::printf(" | %s %s\n", check.c_str(), r.problems.empty() ? "ok" : "FAILED (below)");
  for (const std::string &p : r.problems) std::printf("  !! %s\n", p.c_str());
  std::fflush(stdout);
}

std::string json_string(const std::string &s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

std::string json_number(double v) { return std::isfinite(v) ? fmt("%.6g", v) : "null"; }

std::string json_cell(const Case &c, const Cell &cell, const Cell *cublas, bool with_rel) {
  std::string s = "{\"median_us\": " + json_number(cell.us) +
                  ", \"tflops\": " + json_number(std::isnan(cell.us) ? kNaN : tflops(c, cell.us));
  if (cublas)
    s += ", \"pct_of_cublas\": " +
         json_number(std::isnan(cell.us) ? kNaN : 100.0 * cublas->us / cell.us);
  if (with_rel) s += ", \"rel_diff_cublas\": " + json_number(cell.rel);
  s += ", \"rel_diff_host_samples\": " + json_number(cell.sample_rel);
  if (cell.sets) s += ", \"sets\": " + std::to_string(cell.sets);
  s += ", \"checked\": " + std::string(cell.checked ? "true" : "false");
  s += ", \"error\": " + (cell.error.empty() ? std::string("null") : json_string(cell.error));
  return s + "}";
}

struct RunInfo {
  const kaio_device_info *device;
  const Cublas *cublas;
  std::string cublas_error;
  const Options *opt;
};

bool write_json(const std::string &path, const RunInfo &info, const std::vector<Result> &results,
                bool complete) {
  std::string s =
      "{\n  \"bench\": \"bench_matmul\",\n  \"libkaio\": " + json_string(kaio_version_string()) +
      ",\n  \"device\": {\"name\": " + json_string(info.device->name) + ", \"cc\": \"" +
      std::to_string(info.device->cc_major) + "." + std::to_string(info.device->cc_minor) +
      "\", \"sm_count\": " + std::to_string(info.device->sm_count) +
      ", \"l2_cache_bytes\": " + std::to_string(info.device->l2_cache_bytes) + "},\n";
  if (info.cublas)
    s += "  \"cublas\": {\"path\": " + json_string(info.cublas->path()) +
         ", \"version\": " + std::to_string(info.cublas->version()) + "},\n";
  else
    s += "  \"cublas\": null,\n  \"cublas_error\": " + json_string(info.cublas_error) + ",\n";
  s += "  \"warmups\": " + std::to_string(kaio_bench::kWarmups) +
       ",\n  \"iters\": " + std::to_string(info.opt->iters) +
       ",\n  \"tolerance\": 1e-3,\n  \"complete\": " + (complete ? "true" : "false") +
       ",\n  \"results\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result &r = results[i];
    const Case &c = r.c;
    const Geometry g(c);
    s += i ? ",\n    {" : "\n    {";
    s += "\"dtype\": " + json_string(kaio_dtype_name(r.dtype)) + ", \"out_dtype\": \"f32\"" +
         ", \"group\": " + json_string(c.group) + ", \"m\": " + std::to_string(c.m) +
         ", \"n\": " + std::to_string(c.n) + ", \"k\": " + std::to_string(c.k) +
         ", \"layout\": " + json_string(layout_name(c)) + ", \"lda\": " + std::to_string(g.lda) +
         ", \"ldb\": " + std::to_string(g.ldb) + ", \"ldc\": " + std::to_string(g.ldc) +
         ", \"flop\": " + json_number(flops(c)) + ", \"sets\": " + std::to_string(r.sets) +
         ", \"kaio\": {";
    for (int v = 0; v < kVariants; ++v)
      s += std::string(v ? ", " : "") + "\"" + kVariantName[v] +
           "\": " + json_cell(c, r.kaio[v], info.cublas ? &r.cublas : nullptr, true);
    s += "}, \"cublas\": " + (info.cublas ? json_cell(c, r.cublas, nullptr, false) : "null");
    s += ", \"sgemm\": " + (info.cublas ? json_cell(c, r.sgemm, nullptr, false) : "null");
    s += ", \"ok\": " + std::string(r.problems.empty() ? "true" : "false") + ", \"problems\": [";
    for (size_t p = 0; p < r.problems.size(); ++p)
      s += (p ? ", " : "") + json_string(r.problems[p]);
    s += "]}";
  }
  s += "\n  ]\n}\n";
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  return std::fclose(f) == 0 && ok;
}

// ---------------------------------------------------------------------------

int run(const Options &opt) {
  Device device;
  const kaio_device_info info =
      kaio_bench::open_device(&device, "tensor-core matmul needs compute capability 8.0+");
  const Stream stream = kaio_bench::create_stream(device);

  RunInfo run_info{&info, nullptr, "", &opt};
  std::unique_ptr<Cublas> cublas = Cublas::open(stream.get(), &run_info.cublas_error);
  run_info.cublas = cublas.get();
  if (!opt.json.empty() && !write_json(opt.json, run_info, {}, false)) {
    std::fprintf(stderr, "bench_matmul: cannot write --json %s: %s\n", opt.json.c_str(),
                 std::strerror(errno));
    return 1;
  }

  kaio_bench::print_banner("bench_matmul", info);
  if (cublas) {
    const int v = cublas->version();
    std::printf("cuBLAS %d.%d.%d from %s\n", v / 10000, v / 100 % 100, v % 100,
                cublas->path().c_str());
    if (const char *tf32 = std::getenv("NVIDIA_TF32_OVERRIDE"); tf32 && std::strcmp(tf32, "0"))
      std::printf("note: NVIDIA_TF32_OVERRIDE=%s may let sgemm use TF32\n", tf32);
  } else {
    std::printf(
        "cuBLAS not found: %s\nlibkaio is timed and checked against a host reference "
        "only.\n",
        run_info.cublas_error.c_str());
  }
  std::printf(
      "TFLOP/s = 2·M·N·K / median of %d launches, each timed with its own event pair "
      "after %d warm-ups;\n"
      "%% = libkaio's TFLOP/s over cuBLAS GemmEx's (same dtypes, layout and stream); "
      "layout: A then B,\n"
      "n = stored as op(X), t = stored transposed; sets: copies rotated to defeat L2. "
      "Check: rel. Frobenius\n"
      "difference of libkaio's output (each variant) from cuBLAS's, at most 1e-3.\n",
      opt.iters, kaio_bench::kWarmups);
  std::fflush(stdout);

  const std::vector<Case> cases = make_cases(opt);
  Bench bench(device.get(), stream.get(), info, cublas.get(), opt);
  std::vector<Result> results;
  size_t failed_cases = 0;
  bool json_ok = true;
  try {
    for (kaio_dtype dtype : opt.dtypes) {
      print_header(opt, dtype, cublas != nullptr);
      std::array<double, kVariants> log_sum{};
      std::array<int, kVariants> count{};
      for (const Case &c : cases) {
        results.push_back(bench.run(c, dtype));
        const Result &r = results.back();
        print_row(opt, r, cublas != nullptr);
        if (!r.problems.empty()) ++failed_cases;
        for (int v = 0; v < kVariants; ++v)
          if (!std::isnan(r.kaio[v].us) && !std::isnan(r.cublas.us)) {
            log_sum[v] += std::log(r.cublas.us / r.kaio[v].us);
            ++count[v];
          }
        if (!opt.json.empty()) json_ok = write_json(opt.json, run_info, results, false) && json_ok;
      }
      if (cublas) {
        std::printf("geometric mean %% of cuBLAS (%s):", kaio_dtype_name(dtype));
        for (int v = 0; v < kVariants; ++v)
          if (count[v])
            std::printf("  %s %.1f%%", kVariantName[v], 100.0 * std::exp(log_sum[v] / count[v]));
        std::printf("\n");
      }
    }
  } catch (const KaioError &e) {
    // A device fault: the context is gone. Keep what was measured.
    if (!opt.json.empty()) write_json(opt.json, run_info, results, false);
    std::fprintf(stderr, "bench_matmul: stopping after %zu results: %s\n", results.size(),
                 e.what());
    return 1;
  }
  if (!opt.json.empty()) {
    json_ok = write_json(opt.json, run_info, results, true) && json_ok;
    if (json_ok)
      std::printf("\nresults written to %s\n", opt.json.c_str());
    else
      std::fprintf(stderr, "bench_matmul: writing %s failed\n", opt.json.c_str());
  }
  if (failed_cases) {
    std::printf("\nFAILED: %zu of %zu cases had a mismatch or an error:\n", failed_cases,
                results.size());
    for (const Result &r : results)
      for (const std::string &p : r.problems)
        std::printf("  %s %s %s: %s\n", kaio_dtype_name(r.dtype), shape_name(r.c).c_str(),
                    layout_name(r.c).c_str(), p.c_str());
    return 1;
  }
  std::printf("\nall %zu cases ok: every libkaio output checked agrees with %s\n", results.size(),
              cublas ? "cuBLAS (rel. Frobenius <= 1e-3)" : "the host reference");
  return json_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  bool help = false;
  const std::optional<Options> opt = parse_args(argc, argv, &help);
  if (!opt) return help ? 0 : 1;
  return kaio_bench::exit_status_of("bench_matmul", [&] { return run(*opt); });
}
