// Kernel-language kernels on a real GPU:
//  - random programs (tests/support/lang_random) against the CPU interpreter
//    on random inputs, every dtype, odd shapes, offset (scalar path),
//    aligned (vector path) and strided views, warp- and block-per-row
//    shapes: bit-exact, since those programs use only operations that both
//    sides round identically (see lang_interpreter.hpp), and the device
//    error flag must name the same first bad read as the interpreter;
//  - the showcase kernels (examples/lang) against an f64 reference and
//    against the built-in ops, with the tolerances stated at tolerance();
//  - exp/log/tanh/erf/sigmoid against f64 on a sweep;
//  - an out-of-range read: never performed; reported by the next stream
//    synchronisation (also after the kernel is destroyed), by an event's, or
//    by kaio_lang_kernel_check after a sync that does not report (another
//    wrapper of the stream); the flag is cleared once reported.
// Outputs are poisoned before every launch and checked fully written.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lang/compiler.hpp"
#include "support/kaio_test.hpp"
#include "support/lang_interpreter.hpp"
#include "support/lang_random.hpp"
#include "support/lang_sources.hpp"

namespace {

using kaio::lang::DType;

// the language's element types carry the kaio_dtype values
kaio_dtype abi(DType d) { return static_cast<kaio_dtype>(d); }

struct Rng {
  uint64_t s;
  uint64_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 11;
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * (next() % 1000003) / 1000003.0; }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
};

// Fills the view's elements (not the row padding) with random values.
void fill_random(kt::LangView &v, Rng &rng) {
  const int size = kaio::lang::dtype_bytes(v.dtype);
  for (int64_t r = 0; r < v.rows; ++r)
    for (int64_t c = 0; c < v.cols; ++c) {
      uint8_t *p = v.bytes.data() + (r * v.stride + c) * size;
      switch (v.dtype) {
        case DType::f32: {
          float f = static_cast<float>(rng.uniform(-4, 4));
          std::memcpy(p, &f, 4);
          break;
        }
        case DType::f16: {
          uint16_t h = kt::f32_to_f16(static_cast<float>(rng.uniform(-4, 4)));
          std::memcpy(p, &h, 2);
          break;
        }
        case DType::bf16: {
          uint16_t h = kt::f32_to_bf16(static_cast<float>(rng.uniform(-4, 4)));
          std::memcpy(p, &h, 2);
          break;
        }
        case DType::i8:
        case DType::u8: *p = static_cast<uint8_t>(rng.next()); break;
        case DType::i32: {
          int32_t x = rng.below(2001) - 1000;
          std::memcpy(p, &x, 4);
          break;
        }
        case DType::u32: {
          uint32_t x = static_cast<uint32_t>(rng.below(3000));
          std::memcpy(p, &x, 4);
          break;
        }
      }
    }
}

// Every byte of the view, padding included, set to a pattern no kernel
// writes by accident.
void poison(kt::LangView &v) { std::fill(v.bytes.begin(), v.bytes.end(), uint8_t{0xA7}); }

class LangGpu : public kt::GpuTest {
 protected:
  struct DeviceView {
    kt::Buffer buffer;
    kaio_tensor view{};
    uint64_t offset = 0;
  };

  DeviceView upload(const kt::LangView &v, uint64_t offset_elems) {
    DeviceView d;
    const uint64_t es = kaio::lang::dtype_bytes(v.dtype);
    d.offset = offset_elems * es;
    d.buffer = kt::make_buffer(dev(), d.offset + v.bytes.size() + 16);
    EXPECT_EQ(kaio_buffer_write(d.buffer.get(), d.offset, v.bytes.data(), v.bytes.size()), KAIO_OK);
    d.view = kaio_tensor_2d(d.buffer.get(), abi(v.dtype), v.rows, v.cols);
    d.view.offset_bytes = d.offset;
    d.view.row_stride = v.stride;
    return d;
  }

  void download(const DeviceView &d, kt::LangView &v) {
    EXPECT_EQ(kaio_buffer_read(d.buffer.get(), d.offset, v.bytes.data(), v.bytes.size()), KAIO_OK);
  }

  kaio_lang_kernel *create(const std::string &src) {
    kaio_lang_kernel *k = nullptr;
    EXPECT_EQ(kaio_lang_kernel_create(&k, dev(), src.c_str()), KAIO_OK) << kaio_last_error() << "\n" << src;
    return k;
  }

  // Another handle on the fixture's CUstream: its sync waits for the same
  // work but reports only flags launched through it.
  kt::Stream wrap_stream() {
    kaio_stream *s = nullptr;
    EXPECT_EQ(kaio_stream_wrap(&s, dev(), kaio_stream_native(stream())), KAIO_OK) << kaio_last_error();
    return kt::Stream(s);
  }
};

struct LangKernelDeleter {
  void operator()(kaio_lang_kernel *k) const { kaio_lang_kernel_destroy(k); }
};
using LangKernel = std::unique_ptr<kaio_lang_kernel, LangKernelDeleter>;

bool same_value(DType d, const uint8_t *a, const uint8_t *b) {
  const int size = kaio::lang::dtype_bytes(d);
  if (std::memcmp(a, b, size) == 0) return true;
  if (d == DType::f32) {
    float x, y;
    std::memcpy(&x, a, 4);
    std::memcpy(&y, b, 4);
    return (std::isnan(x) && std::isnan(y)) || x == y;
  }
  if (d == DType::f16 || d == DType::bf16) {
    uint16_t x, y;
    std::memcpy(&x, a, 2);
    std::memcpy(&y, b, 2);
    auto nan = [&](uint16_t h) {
      return d == DType::f16 ? (h & 0x7C00) == 0x7C00 && (h & 0x3FF) : (h & 0x7F80) == 0x7F80 && (h & 0x7F);
    };
    return (nan(x) && nan(y)) || ((x | y) & 0x7FFF) == 0;  // NaNs, or +0 / -0
  }
  return false;
}

int random_program_count() {
  const char *env = std::getenv("KAIO_LANG_RANDOM_PROGRAMS");
  return env ? std::atoi(env) : 160;
}

TEST_F(LangGpu, RandomProgramsMatchTheInterpreterBitForBit) {
  const uint64_t base = kt::test_seed();
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {7, 64}, {33, 129}, {16, 1024}, {5, 1030}, {2, 4099}, {130, 40}};
  int flagged = 0, checked_elements = 0;
  for (int n = 0; n < random_program_count(); ++n) {
    const uint64_t seed = base + static_cast<uint64_t>(n);
    kt::RandomProgramOptions o;
    o.exact_only = true;
    const std::string src = kt::random_program(seed, o);
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + src);
    kaio::lang::Compiled c;
    kaio::lang::Diagnostic d;
    ASSERT_TRUE(kaio::lang::compile(src, &c, &d)) << d.message;
    LangKernel k(create(src));
    ASSERT_TRUE(k);
    Rng rng{seed * 7 + 1};
    const auto &shape = shapes[rng.below(8)];
    const int layout = rng.below(3);  // 0 aligned, 1 offset by one element, 2 padded rows
    std::vector<kt::LangView> host, ref;
    std::vector<DeviceView> devs;
    std::vector<kaio_tensor> views;
    std::vector<double> scalars;
    for (const auto &p : c.kernel.params) {
      if (!p.tensor) {
        scalars.push_back(p.scalar == kaio::lang::Type::f32 ? rng.uniform(-3, 3) : rng.below(61) - 30);
        continue;
      }
      kt::LangView v;
      v.dtype = p.dtype;
      v.rows = shape[0];
      v.cols = shape[1];
      v.stride = shape[1] + (layout == 2 ? 1 + rng.below(9) : 0);
      v.bytes.assign(static_cast<size_t>(v.rows * v.stride * kaio::lang::dtype_bytes(v.dtype)), 0);
      poison(v);
      if (!p.output) fill_random(v, rng);
      devs.push_back(upload(v, layout == 1 ? 1 : 0));
      views.push_back(devs.back().view);
      host.push_back(std::move(v));
    }
    ref = host;
    kt::LangRun run = kt::interpret(c.kernel, ref, scalars);
    KT_OK(kaio_lang_kernel_launch(k.get(), stream(), views.data(), views.size(), scalars.data(),
                                  scalars.size()));
    // even programs: the stream's sync reports; odd: a sync through another
    // wrapper of the same CUstream does not, and the check reports
    kaio_status flag;
    if (n % 2 == 0) {
      flag = kaio_stream_synchronize(stream());
    } else {
      kt::Stream alias = wrap_stream();
      KT_OK(kaio_stream_synchronize(alias.get()));
      flag = kaio_lang_kernel_check(k.get());
    }
    if (run.first_bad_site < 0) {
      EXPECT_EQ(flag, KAIO_OK) << kaio_last_error();
    } else {
      ++flagged;
      EXPECT_EQ(flag, KAIO_ERROR_KERNEL_BOUNDS) << kaio_last_error();
      const auto &site = c.kernel.sites[run.first_bad_site];
      const std::string where = ": " + std::to_string(site.pos.line) + ":" + std::to_string(site.pos.col) + ": ";
      EXPECT_NE(std::string(kaio_last_error()).find(where), std::string::npos)
          << kaio_last_error() << " (want " << where << ")";
      KT_OK(kaio_lang_kernel_check(k.get()));  // cleared
      KT_OK(kaio_stream_synchronize(stream()));
    }
    size_t t = 0;
    for (const auto &p : c.kernel.params) {
      if (!p.tensor) continue;
      if (p.output) {
        download(devs[t], host[t]);
        const int es = kaio::lang::dtype_bytes(p.dtype);
        for (int64_t r = 0; r < host[t].rows; ++r)
          for (int64_t col = 0; col < host[t].stride; ++col) {
            const uint8_t *g = host[t].bytes.data() + (r * host[t].stride + col) * es;
            const uint8_t *w = ref[t].bytes.data() + (r * ref[t].stride + col) * es;
            if (col >= host[t].cols) {  // row padding: never written
              ASSERT_TRUE(std::all_of(g, g + es, [](uint8_t b) { return b == 0xA7; }))
                  << p.name << " padding written at " << r << "," << col;
              continue;
            }
            ++checked_elements;
            ASSERT_TRUE(same_value(p.dtype, g, w))
                << p.name << "[" << r << "," << col << "] gpu " << kt::view_value(host[t], r, col)
                << " cpu " << kt::view_value(ref[t], r, col) << " (shape " << shape[0] << "x"
                << shape[1] << ", layout " << layout << ")";
          }
      }
      ++t;
    }
  }
  std::printf("[ lang     ] %d random programs, %d output elements bit-exact, %d raised the "
              "bounds flag as the interpreter predicted\n",
              random_program_count(), checked_elements, flagged);
}

// Tolerance for the showcase kernels, per element:
//   |gpu - ref| <= rtol * |ref| + atol
//   rtol = half an ulp of the output dtype (f32 0, f16 2^-11) + math:
//          2e-6 for the element-wise kernels (ex2.approx plus a few roundings),
//          2e-6 + 2^-22 * sqrt(cols) for row reductions over cols terms;
//   atol = 1e-6 (erf/exp absolute error near their zeros) + f16's smallest
//          spacing floor 6e-8.
double tolerance(kaio_dtype dt, bool row, int64_t cols, double ref) {
  double half_ulp = dt == KAIO_DTYPE_F16 ? std::ldexp(1.0, -11) : 0.0;
  double math = 2e-6 + (row ? std::ldexp(1.0, -22) * std::sqrt(static_cast<double>(cols)) : 0.0);
  return (half_ulp + math) * std::fabs(ref) + 1e-6 + (dt == KAIO_DTYPE_F16 ? 6e-8 : 0.0);
}

std::vector<double> reference(const std::string &name, int64_t rows, int64_t cols,
                              const std::vector<std::vector<double>> &in, double eps) {
  std::vector<double> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0, m = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double x = in[0][r * cols + c];
      ss += x * x;
      m = std::max(m, x);
    }
    for (int64_t c = 0; c < cols; ++c) s += std::exp(in[0][r * cols + c] - m);
    for (int64_t c = 0; c < cols; ++c) {
      double x = in[0][r * cols + c];
      double &o = out[r * cols + c];
      if (name == "silu_gate") o = x / (1 + std::exp(-x)) * in[1][r * cols + c];
      if (name == "gelu") o = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
      if (name == "rmsnorm") o = x / std::sqrt(ss / cols + eps) * in[1][c];
      if (name == "softmax") o = std::exp(x - m) / s;
    }
  }
  return out;
}

TEST_F(LangGpu, ShowcaseKernelsMatchF64AndTheBuiltIns) {
  const uint64_t seed = kt::test_seed();
  const int64_t shapes[][2] = {{1, 1}, {5, 37}, {64, 1024}, {9, 1031}, {3, 4096}};
  for (const char *name : {"silu_gate", "gelu", "rmsnorm", "softmax"}) {
    for (kaio_dtype dt : {KAIO_DTYPE_F16, KAIO_DTYPE_F32}) {
      std::string src = kt::lang_example(name);
      if (dt == KAIO_DTYPE_F32)
        for (size_t p; (p = src.find("<f16>")) != std::string::npos;) src.replace(p, 5, "<f32>");
      LangKernel k(create(src));
      ASSERT_TRUE(k);
      const bool row = std::string(name) == "rmsnorm" || std::string(name) == "softmax";
      const int n_in = std::string(name) == "gelu" || std::string(name) == "softmax" ? 1 : 2;
      for (const auto &shape : shapes) {
        const int64_t rows = shape[0], cols = shape[1];
        SCOPED_TRACE(std::string(name) + " " + kaio_dtype_name(dt) + " " + std::to_string(rows) +
                     "x" + std::to_string(cols));
        std::vector<kt::HostTensor> in;
        std::vector<std::vector<double>> vals;
        std::vector<kt::Buffer> bufs;
        std::vector<kaio_tensor> views;
        for (int j = 0; j < n_in; ++j) {
          const bool weight = std::string(name) == "rmsnorm" && j == 1;
          const int64_t r = weight ? 1 : rows;
          in.push_back(kt::random_tensor(dt, r * cols, -3, 3, seed + 17 * j + rows * cols));
          vals.push_back(in.back().values);
          bufs.push_back(kt::make_buffer(dev(), in.back().bytes.size()));
          KT_OK(kaio_buffer_write(bufs.back().get(), 0, in.back().bytes.data(), in.back().bytes.size()));
          views.push_back(kaio_tensor_2d(bufs.back().get(), dt, r, cols));
        }
        const size_t out_bytes = rows * cols * kaio_dtype_size(dt);
        kt::Buffer out = kt::make_buffer(dev(), out_bytes), out_builtin = kt::make_buffer(dev(), out_bytes);
        KT_OK(kaio_buffer_memset(out.get(), stream(), 0, 0xA7, out_bytes));
        KT_OK(kaio_buffer_memset(out_builtin.get(), stream(), 0, 0xA7, out_bytes));
        views.push_back(kaio_tensor_2d(out.get(), dt, rows, cols));
        const double eps[] = {1e-5};
        const bool has_eps = std::string(name) == "rmsnorm";
        KT_OK(kaio_lang_kernel_launch(k.get(), stream(), views.data(), views.size(), eps, has_eps));
        kaio_tensor ob = kaio_tensor_2d(out_builtin.get(), dt, rows, cols);
        if (std::string(name) == "silu_gate") KT_OK(kaio_silu_gate(stream(), &views[0], &views[1], &ob));
        if (std::string(name) == "gelu") KT_OK(kaio_gelu(stream(), &views[0], &ob, KAIO_GELU_ERF));
        if (std::string(name) == "rmsnorm") KT_OK(kaio_rmsnorm(stream(), &views[0], &views[1], &ob, 1e-5f));
        if (std::string(name) == "softmax") KT_OK(kaio_softmax(stream(), &views[0], &ob));
        KT_OK(kaio_stream_synchronize(stream()));
        KT_OK(kaio_lang_kernel_check(k.get()));
        std::vector<uint8_t> got(out_bytes), builtin(out_bytes);
        KT_OK(kaio_buffer_read(out.get(), 0, got.data(), out_bytes));
        KT_OK(kaio_buffer_read(out_builtin.get(), 0, builtin.data(), out_bytes));
        std::vector<double> g = kt::decode(dt, got), b = kt::decode(dt, builtin);
        std::vector<double> want = reference(name, rows, cols, vals, 1e-5);
        for (int64_t e = 0; e < rows * cols; ++e) {
          const double tol = tolerance(dt, row, cols, want[e]);
          ASSERT_LE(std::fabs(g[e] - want[e]), tol) << "element " << e << " got " << g[e] << " want " << want[e];
          // the built-in has the same bound, so the two agree within twice it
          ASSERT_LE(std::fabs(g[e] - b[e]), 2 * tol) << "element " << e << " built-in " << b[e];
        }
      }
    }
  }
}

TEST_F(LangGpu, MathFunctionsMeetTheirStatedErrorBounds) {
  // Bounds (|gpu - f64| <= rel * |f64| + abs): exp 2e-6 rel for |x| <= 20
  // (ex2.approx after rounding x*log2(e)); log 3e-7 abs (lg2.approx);
  // tanh and erf 3e-7 abs and 1e-6 rel; sigmoid 2e-6 rel.
  LangKernel k(create(
      "kernel m(x: tensor<f32>, e: tensor<f32>, l: tensor<f32>, t: tensor<f32>, f: tensor<f32>, "
      "s: tensor<f32>) { e = exp(x); l = log(abs(x)); t = tanh(x); f = erf(x); s = sigmoid(x); }"));
  ASSERT_TRUE(k);
  const int64_t n = 1 << 16;
  std::vector<float> x(n);
  for (int64_t j = 0; j < n; ++j) x[j] = static_cast<float>(-20.0 + 40.0 * (j + 0.5) / n);
  std::vector<kt::Buffer> bufs;
  std::vector<kaio_tensor> views;
  for (int j = 0; j < 6; ++j) {
    bufs.push_back(kt::make_buffer(dev(), n * 4));
    views.push_back(kaio_tensor_2d(bufs.back().get(), KAIO_DTYPE_F32, 1, n));
  }
  KT_OK(kaio_buffer_write(bufs[0].get(), 0, x.data(), n * 4));
  KT_OK(kaio_lang_kernel_launch(k.get(), stream(), views.data(), 6, nullptr, 0));
  KT_OK(kaio_stream_synchronize(stream()));
  std::vector<std::vector<float>> out(5, std::vector<float>(n));
  for (int j = 0; j < 5; ++j) KT_OK(kaio_buffer_read(bufs[j + 1].get(), 0, out[j].data(), n * 4));
  double worst[5] = {0, 0, 0, 0, 0};
  for (int64_t j = 0; j < n; ++j) {
    const double v = x[j];
    const double want[5] = {std::exp(v), std::log(std::fabs(v)), std::tanh(v), std::erf(v), 1 / (1 + std::exp(-v))};
    const double rel[5] = {2e-6, 0, 1e-6, 1e-6, 2e-6}, abs_[5] = {0, 3e-7, 3e-7, 3e-7, 1e-30};
    for (int f = 0; f < 5; ++f) {
      const double err = std::fabs(out[f][j] - want[f]);
      const double bound = rel[f] * std::fabs(want[f]) + abs_[f] + (f == 1 ? 1e-7 * std::fabs(want[f]) : 0);
      worst[f] = std::max(worst[f], err / bound);
      ASSERT_LE(err, bound) << "function " << f << " at x = " << v << ": " << out[f][j] << " vs " << want[f];
    }
  }
  std::printf("[ lang     ] worst error / bound: exp %.2f log %.2f tanh %.2f erf %.2f sigmoid %.2f\n",
              worst[0], worst[1], worst[2], worst[3], worst[4]);
}

TEST_F(LangGpu, OutOfRangeReadIsReportedNotPerformed) {
  const std::string src =
      "kernel shift(x: tensor<f32>, out: tensor<f32>) {\n"
      "    out = x[i + 1] + 1.0;\n"
      "}\n";
  LangKernel k(create(src));
  ASSERT_TRUE(k);
  const int64_t n = 1000;
  std::vector<float> x(n + 8);
  for (int64_t j = 0; j < n + 8; ++j) x[j] = static_cast<float>(j);
  kt::Buffer xb = kt::make_buffer(dev(), (n + 8) * 4), ob = kt::make_buffer(dev(), n * 4);
  KT_OK(kaio_buffer_write(xb.get(), 0, x.data(), x.size() * 4));
  KT_OK(kaio_buffer_memset(ob.get(), stream(), 0, 0xA7, n * 4));
  // the view stops at n elements although the buffer holds more: the read
  // of element n is outside the view and must not happen
  kaio_tensor v[2] = {kaio_tensor_2d(xb.get(), KAIO_DTYPE_F32, 1, n), kaio_tensor_2d(ob.get(), KAIO_DTYPE_F32, 1, n)};
  KT_OK(kaio_lang_kernel_launch(k.get(), stream(), v, 2, nullptr, 0));
  EXPECT_EQ(kaio_stream_synchronize(stream()), KAIO_ERROR_KERNEL_BOUNDS);
  const std::string msg = kaio_last_error();
  EXPECT_EQ(msg.rfind("kaio_stream_synchronize: kernel 'shift' read outside a view: 2:11: index "
                      "1000 out of range for tensor 'x'; the read was skipped and gave 0",
                      0),
            0u)
      << msg;
  EXPECT_NE(msg.find("\n        out = x[i + 1] + 1.0;\n              ^"), std::string::npos) << msg;
  std::vector<float> out(n);
  KT_OK(kaio_buffer_read(ob.get(), 0, out.data(), n * 4));
  for (int64_t j = 0; j + 1 < n; ++j) ASSERT_EQ(out[j], static_cast<float>(j + 2));
  EXPECT_EQ(out[n - 1], 1.0f);  // the skipped read gave 0
  KT_OK(kaio_lang_kernel_check(k.get()));  // the sync cleared the flag
  KT_OK(kaio_stream_synchronize(stream()));

  // an event recorded after the launch reports it too
  KT_OK(kaio_lang_kernel_launch(k.get(), stream(), v, 2, nullptr, 0));
  kaio_event *event = nullptr;
  KT_OK(kaio_event_create(&event, dev(), KAIO_EVENT_DISABLE_TIMING));
  KT_OK(kaio_event_record(event, stream()));
  EXPECT_EQ(kaio_event_synchronize(event), KAIO_ERROR_KERNEL_BOUNDS);
  EXPECT_NE(std::string(kaio_last_error()).find("index 1000 out of range for tensor 'x'"),
            std::string::npos) << kaio_last_error();
  kaio_event_destroy(event);
  KT_OK(kaio_stream_synchronize(stream()));

  // a kernel destroyed before the sync is still reported; a 2-D read names
  // the failing index
  LangKernel k2(create("kernel bias(x: tensor<f32>, w: tensor<f32>, out: tensor<f32>) {\n"
                       "    out = x + w[0, col + 3];\n"
                       "}\n"));
  ASSERT_TRUE(k2);
  kaio_tensor v2[3] = {kaio_tensor_2d(xb.get(), KAIO_DTYPE_F32, 1, n),
                       kaio_tensor_2d(xb.get(), KAIO_DTYPE_F32, 1, n),
                       kaio_tensor_2d(ob.get(), KAIO_DTYPE_F32, 1, n)};
  KT_OK(kaio_lang_kernel_launch(k2.get(), stream(), v2, 3, nullptr, 0));
  k2.reset();
  EXPECT_EQ(kaio_stream_synchronize(stream()), KAIO_ERROR_KERNEL_BOUNDS);
  EXPECT_NE(std::string(kaio_last_error()).find("kernel 'bias' read outside a view: 2:15: column "
                                                "index 1002 out of range for tensor 'w'"),
            std::string::npos) << kaio_last_error();
  KT_OK(kaio_stream_synchronize(stream()));
}

TEST_F(LangGpu, UnpackExamplesMatchTheInterpreter) {
  for (const char *name : {"unpack_q6", "dequant_q8", "residual_rmsnorm"}) {
    const std::string src = kt::lang_example(name);
    kaio::lang::Compiled c;
    kaio::lang::Diagnostic d;
    ASSERT_TRUE(kaio::lang::compile(src, &c, &d));
    LangKernel k(create(src));
    ASSERT_TRUE(k);
    const int64_t rows = 11, cols = 96;
    Rng rng{kt::test_seed() + 5};
    std::vector<kt::LangView> host;
    std::vector<DeviceView> devs;
    std::vector<kaio_tensor> views;
    for (const auto &p : c.kernel.params) {
      if (!p.tensor) continue;
      kt::LangView v;
      v.dtype = p.dtype;
      v.rows = (p.name == "weight") ? 1 : rows;
      v.cols = p.name == "packed" ? 6 * cols / 8 : p.name == "scales" ? cols / (std::string(name) == "unpack_q6" ? 16 : 32) : cols;
      v.stride = v.cols;
      v.bytes.assign(static_cast<size_t>(v.rows * v.cols * kaio::lang::dtype_bytes(v.dtype)), 0);
      poison(v);
      if (!p.output) fill_random(v, rng);
      devs.push_back(upload(v, 0));
      views.push_back(devs.back().view);
      host.push_back(std::move(v));
    }
    std::vector<double> scalars(c.kernel.scalar_count, 1e-5);
    std::vector<kt::LangView> ref = host;
    EXPECT_EQ(kt::interpret(c.kernel, ref, scalars).first_bad_site, -1);
    KT_OK(kaio_lang_kernel_launch(k.get(), stream(), views.data(), views.size(), scalars.data(), scalars.size()));
    KT_OK(kaio_stream_synchronize(stream()));
    KT_OK(kaio_lang_kernel_check(k.get()));
    size_t t = 0;
    for (const auto &p : c.kernel.params) {
      if (!p.tensor) continue;
      if (p.output) {
        download(devs[t], host[t]);
        for (int64_t r = 0; r < host[t].rows; ++r)
          for (int64_t col = 0; col < host[t].cols; ++col) {
            double g = kt::view_value(host[t], r, col), w = kt::view_value(ref[t], r, col);
            // unpacking is exact; the norm sums in another order (f16 output)
            double tol = std::string(name) == "residual_rmsnorm" ? 2e-3 * std::fabs(w) + 1e-6 : 0.0;
            ASSERT_LE(std::fabs(g - w), tol) << name << " " << p.name << "[" << r << "," << col << "]";
          }
      }
      ++t;
    }
  }
}

}  // namespace

namespace {

// Destroying the last kernel of a source unloads its module (bounded
// caches): work already queued with it still runs to the end.
TEST_F(LangGpu, KernelDestroyedWhileQueuedStillRunsToTheEnd) {
  const int64_t n = int64_t{1} << 26;  // 256 MiB each way: milliseconds of work
  kt::Buffer xb = kt::make_buffer(dev(), n * 4), ob = kt::make_buffer(dev(), n * 4);
  KT_OK(kaio_buffer_memset(xb.get(), stream(), 0, 0, n * 4));  // x = 0.0
  kaio_tensor v[2] = {kaio_tensor_2d(xb.get(), KAIO_DTYPE_F32, 1, n),
                      kaio_tensor_2d(ob.get(), KAIO_DTYPE_F32, 1, n)};
  LangKernel k(create("kernel queued_then_unloaded(x: tensor<f32>, out: tensor<f32>) {\n"
                      "    out = x * 2.0 + 3.0;\n"
                      "}\n"));
  ASSERT_TRUE(k);
  for (int i = 0; i < 4; ++i) KT_OK(kaio_lang_kernel_launch(k.get(), stream(), v, 2, nullptr, 0));
  k.reset();
  KT_OK(kaio_stream_synchronize(stream()));
  for (int64_t i : {int64_t{0}, n / 3, n - 1}) {
    float got = 0.0f;
    KT_OK(kaio_buffer_read(ob.get(), static_cast<uint64_t>(i) * 4, &got, 4));
    EXPECT_EQ(got, 3.0f) << "element " << i;
  }
}

}  // namespace
