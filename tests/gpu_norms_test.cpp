// Add + RMSNorm and LayerNorm against an f64 CPU reference computed from the
// same rounded inputs: every dtype, rows 1 / 3 / 257, row lengths 1 .. 100003
// (warp and block shapes, single-chunk and re-read rows, vector and element
// paths), strided, offset and in-place views, poisoned outputs, large means,
// extreme magnitudes, signed zeros, NaN and inf. Skips without a real GPU.
//
// Tolerance for each element, with K = cols, u = half an ulp of the dtype
// (f32 0, f16 2^-11, bf16 2^-8) and e(K) = 4e-6 + 2^-22·sqrt(K) (f32 math,
// tree-summed statistics):
//   add + RMSNorm: |out - ref| <= (u + e(K))·|ref| + floor
//   LayerNorm:     |out - ref| <= u·|ref| + e(K)·(|d·inv·w| + |b|)
//                                + 2^-23·(4 + sqrt(K))·mean|x|·inv·|w| + floor
// (the last term: the f32 mean's own error, which (x - mean) carries), floor
// = f16 6e-8, else 1e-30. The updated residual must equal round(x + res)
// exactly; a NaN reference needs NaN, a zero reference needs zero of the
// same sign.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "support/kaio_test.hpp"

namespace {

enum class Norm { add_rms, layer };

struct Case {
  Norm op = Norm::add_rms;
  kaio_dtype dt = KAIO_DTYPE_F32;
  int64_t rows = 1, cols = 1;
  int64_t offset = 0;                    // elements; 1 forces the element path
  int64_t x_pad = 0, r_pad = 0, o_pad = 0;
  bool out_is_x = false;                 // in place: out is the very view x
  bool prepared = false;
  bool weight = true, bias = true;       // LayerNorm's optional vectors
  double lo = -3, hi = 3, wlo = -2, whi = 2;
  // edit(x, res) on the host values before upload (special values)
  std::function<void(kt::HostTensor &, kt::HostTensor &)> edit;
};

double half_ulp(kaio_dtype dt) {
  return dt == KAIO_DTYPE_F16 ? std::ldexp(1.0, -11) : dt == KAIO_DTYPE_BF16 ? std::ldexp(1.0, -8) : 0.0;
}

// The dtype's rounding of a value (through f32, as the kernel adds in f32).
double round_to(kaio_dtype dt, double v) {
  float f = static_cast<float>(v);
  if (dt == KAIO_DTYPE_F16) return kt::f16_to_f32(kt::f32_to_f16(f));
  if (dt == KAIO_DTYPE_BF16) return kt::bf16_to_f32(kt::f32_to_bf16(f));
  return f;
}

// Writes value into element i of a host tensor (bytes and values).
void put(kt::HostTensor &t, size_t i, double v) {
  const size_t es = kaio_dtype_size(t.dtype);
  float f = static_cast<float>(v);
  if (t.dtype == KAIO_DTYPE_F32) {
    std::memcpy(&t.bytes[i * es], &f, 4);
  } else {
    uint16_t h = t.dtype == KAIO_DTYPE_F16 ? kt::f32_to_f16(f) : kt::f32_to_bf16(f);
    std::memcpy(&t.bytes[i * es], &h, 2);
  }
  t.values[i] = round_to(t.dtype, v);
}

class GpuNorm : public kt::GpuTest {
 protected:
  void check(const Case &c) {
    SCOPED_TRACE(::testing::Message()
                 << (c.op == Norm::add_rms ? "add_rmsnorm " : "layernorm ") << kaio_dtype_name(c.dt)
                 << " " << c.rows << "x" << c.cols << " offset " << c.offset << " pads " << c.x_pad
                 << "/" << c.r_pad << "/" << c.o_pad << (c.out_is_x ? " out=x" : "")
                 << (c.prepared ? " prepared" : " one-shot") << " range " << c.lo << ".." << c.hi);
    const kaio_dtype dt = c.dt;
    const size_t es = kaio_dtype_size(dt);
    const int64_t R = c.rows, K = c.cols;
    const int64_t xs = K + c.x_pad, rs = K + c.r_pad, os = c.out_is_x ? xs : K + c.o_pad;
    auto span = [&](int64_t stride) { return static_cast<size_t>(c.offset + (R - 1) * stride + K); };
    const uint64_t seed = kt::test_seed() ^ (static_cast<uint64_t>(R) * 1000003u + K * 7919u +
                                             static_cast<uint64_t>(c.op) * 31 + dt);
    kt::HostTensor x = kt::random_tensor(dt, span(xs), c.lo, c.hi, seed);
    kt::HostTensor res = kt::random_tensor(dt, span(rs), c.lo, c.hi, seed + 1);
    kt::HostTensor w = kt::random_tensor(dt, K, c.wlo, c.whi, seed + 2);
    kt::HostTensor b = kt::random_tensor(dt, K, -1, 1, seed + 3);
    if (c.edit) c.edit(x, res);
    const bool add = c.op == Norm::add_rms;

    kt::Buffer bx = upload(x), br = upload(res), bw = upload(w), bb = upload(b);
    kt::Buffer bo = c.out_is_x ? nullptr : kt::make_buffer(dev(), span(os) * es);
    kaio_buffer *out_buf = c.out_is_x ? bx.get() : bo.get();
    if (!c.out_is_x) KT_OK(kaio_buffer_memset(out_buf, stream(), 0, 0xFF, span(os) * es));
    auto rows_view = [&](kaio_buffer *buf, int64_t stride) {
      kaio_tensor t = kaio_tensor_2d(buf, dt, R, K);
      t.offset_bytes = c.offset * es;
      t.row_stride = stride;
      return t;
    };
    kaio_tensor tx = rows_view(bx.get(), xs), tr = rows_view(br.get(), rs),
                to = rows_view(out_buf, os);
    kaio_tensor tw = kaio_tensor_2d(bw.get(), dt, 1, K), tb = kaio_tensor_2d(bb.get(), dt, 1, K);
    kaio_tensor none{};
    if (!c.weight) tw = none;
    if (!c.bias) tb = none;
    const float eps = add ? 1e-6f : 1e-5f;
    launch(c, tx, tr, tw, tb, to, eps);
    KT_OK(kaio_stream_synchronize(stream()));

    std::vector<double> out = read(out_buf, span(os) * es);
    std::vector<double> res_after = add ? read(br.get(), res.bytes.size()) : std::vector<double>{};

    // reference, row by row, from the rounded inputs
    const double u = half_ulp(dt), e = 4e-6 + std::ldexp(1.0, -22) * std::sqrt(double(K));
    const double floor = dt == KAIO_DTYPE_F16 ? 6e-8 : 1e-30;
    int64_t bad = 0;
    std::vector<double> v(K);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t k = 0; k < K; ++k) {
        const size_t xi = c.offset + r * xs + k;
        v[k] = add ? round_to(dt, x.values[xi] + res.values[c.offset + r * rs + k]) : x.values[xi];
      }
      double mean = 0, ss = 0, mean_abs = 0;
      if (!add) {
        for (double a : v) mean += a, mean_abs += std::fabs(a);
        mean /= K;
        mean_abs /= K;
      }
      for (double a : v) ss += (a - mean) * (a - mean);
      const double inv = 1.0 / std::sqrt(ss / K + eps);
      for (int64_t k = 0; k < K; ++k) {
        const double wk = c.weight ? w.values[k] : 1.0, bk = (!add && c.bias) ? b.values[k] : 0.0;
        const double scaled = (v[k] - mean) * inv * wk;
        const double want = (!add && c.bias) ? scaled + bk : scaled;  // absent bias adds nothing
        double tol = u * std::fabs(want) + e * (std::fabs(scaled) + std::fabs(bk)) + floor;
        if (!add) tol += std::ldexp(1.0, -23) * (4 + std::sqrt(double(K))) * mean_abs * inv * std::fabs(wk);
        const double got = out[c.offset + r * os + k];
        bool ok = std::isnan(want) ? std::isnan(got)
                  : want == 0     ? got == 0 && (std::signbit(got) == std::signbit(want) || bk != 0)
                  : std::isinf(want) ? got == want
                                     : std::fabs(got - want) <= tol;
        if (!ok && ++bad <= 5)
          ADD_FAILURE() << "out(" << r << ", " << k << "): got " << got << ", want " << want
                        << " (tol " << tol << ")";
        if (add) {
          const double rv = res_after[c.offset + r * rs + k];
          if (!(rv == v[k] || (std::isnan(rv) && std::isnan(v[k]))) && ++bad <= 5)
            ADD_FAILURE() << "residual(" << r << ", " << k << "): got " << rv << ", want " << v[k];
          if (v[k] == 0 && std::signbit(rv) != std::signbit(v[k]) && ++bad <= 5)
            ADD_FAILURE() << "residual(" << r << ", " << k << "): sign of zero lost";
        }
      }
    }
    EXPECT_EQ(bad, 0) << bad << " elements wrong";
    if (!c.out_is_x) expect_untouched(read_bytes(out_buf, span(os) * es), es, c.offset, os, K, nullptr);
    if (add) expect_untouched(read_bytes(br.get(), res.bytes.size()), es, c.offset, rs, K, &res.bytes);
  }

  kt::Buffer upload(const kt::HostTensor &t) {
    kt::Buffer b = kt::make_buffer(dev(), t.bytes.size());
    EXPECT_EQ(kaio_buffer_write(b.get(), 0, t.bytes.data(), t.bytes.size()), KAIO_OK);
    return b;
  }
  std::vector<uint8_t> read_bytes(kaio_buffer *b, size_t n) {
    std::vector<uint8_t> bytes(n);
    EXPECT_EQ(kaio_buffer_read(b, 0, bytes.data(), n), KAIO_OK);
    return bytes;
  }
  std::vector<double> read(kaio_buffer *b, size_t n) {
    return kt::decode(kaio_buffer_dtype_hint_, read_bytes(b, n));
  }
  // Bytes outside the view must hold the poison (0xFF) or, with `was`,
  // what they held before.
  void expect_untouched(const std::vector<uint8_t> &bytes, size_t es, int64_t offset, int64_t stride,
                        int64_t cols, const std::vector<uint8_t> *was) {
    for (size_t i = 0; i < bytes.size() / es; ++i) {
      bool in_view = i >= static_cast<size_t>(offset) && static_cast<int64_t>((i - offset) % stride) < cols;
      if (in_view) continue;
      for (size_t j = 0; j < es; ++j)
        ASSERT_EQ(bytes[i * es + j], was ? (*was)[i * es + j] : 0xFF)
            << "element " << i << " outside the view was written";
    }
  }

  void launch(const Case &c, const kaio_tensor &x, const kaio_tensor &r, const kaio_tensor &w,
              const kaio_tensor &b, const kaio_tensor &o, float eps) {
    const bool add = c.op == Norm::add_rms;
    if (!c.prepared) {
      if (add) KT_OK(kaio_add_rmsnorm(stream(), &x, &r, &w, &o, eps));
      else KT_OK(kaio_layernorm(stream(), &x, c.weight ? &w : nullptr, c.bias ? &b : nullptr, &o, eps));
      return;
    }
    kaio_op *handle = nullptr;
    if (add) KT_OK(kaio_op_create_add_rmsnorm(&handle, dev(), c.dt, c.rows, c.cols, eps));
    else KT_OK(kaio_op_create_layernorm(&handle, dev(), c.dt, c.rows, c.cols, eps));
    kt::Op guard(handle);
    const kaio_tensor t[4] = {x, add ? r : w, add ? w : b, o};
    KT_OK(kaio_op_launch(handle, stream(), t, 4));
  }

  kaio_dtype kaio_buffer_dtype_hint_ = KAIO_DTYPE_F32;
};

class GpuNormDtypes : public GpuNorm, public ::testing::WithParamInterface<kaio_dtype> {
 protected:
  void run(Case c) {
    c.dt = GetParam();
    kaio_buffer_dtype_hint_ = c.dt;
    check(c);
  }
};

TEST_P(GpuNormDtypes, MatchReferenceAcrossRowsAndLengths) {
  int n = 0;
  for (Norm op : {Norm::add_rms, Norm::layer})
    for (int64_t rows : {1, 3, 257})
      for (int64_t cols : {1, 127, 4096, 100003}) {
        Case c;
        c.op = op;
        c.rows = rows;
        c.cols = cols;
        c.prepared = (n++ % 2) == 0;
        run(c);
      }
}

TEST_P(GpuNormDtypes, StridedOffsetAndInPlaceViews) {
  for (Norm op : {Norm::add_rms, Norm::layer})
    for (int64_t cols : {37, 1000, 1024, 1500, 8192, 9000}) {
      Case strided;
      strided.op = op;
      strided.rows = 9;
      strided.cols = cols;
      strided.x_pad = 3;
      strided.r_pad = 8;
      strided.o_pad = 5;
      run(strided);
      Case offset = strided;
      offset.x_pad = offset.r_pad = offset.o_pad = 0;
      offset.offset = 1;
      offset.prepared = true;
      run(offset);
      Case inplace = strided;
      inplace.x_pad = 8;
      inplace.out_is_x = true;
      run(inplace);
    }
}

TEST_P(GpuNormDtypes, LayerNormOptionalWeightAndBias) {
  for (bool weight : {false, true})
    for (bool bias : {false, true}) {
      Case c;
      c.op = Norm::layer;
      c.rows = 5;
      c.cols = 2048;
      c.weight = weight;
      c.bias = bias;
      c.prepared = weight;
      run(c);
    }
}

TEST_P(GpuNormDtypes, LargeMeanAndExtremeMagnitudes) {
  const bool f32 = GetParam() == KAIO_DTYPE_F32, f16 = GetParam() == KAIO_DTYPE_F16;
  Case mean;  // 1e4 + noise: a one-pass E[x²] - mean² would lose it all in f32
  mean.op = Norm::layer;
  mean.rows = 4;
  mean.cols = 4096;
  mean.lo = f32 ? 1e4 - 1.7 : 100 - 1.7;
  mean.hi = f32 ? 1e4 + 1.7 : 100 + 1.7;
  run(mean);
  mean.cols = 100003;
  run(mean);
  // magnitudes whose squares overflow f32 (f32, bf16) or f16's range
  const double big = f16 ? 3e4 : 1e30;
  for (Norm op : {Norm::add_rms, Norm::layer})
    for (int64_t cols : {127, 4096, 100003}) {
      Case c;
      c.op = op;
      c.rows = 3;
      c.cols = cols;
      c.lo = -big;
      c.hi = big;
      c.wlo = 0.5;
      c.whi = 1;
      if (f16 && op == Norm::layer) c.lo = -6e4, c.hi = 6e4;
      run(c);
    }
}

TEST_P(GpuNormDtypes, SignedZerosNanAndInf) {
  const double inf = INFINITY, nan = NAN;
  for (Norm op : {Norm::add_rms, Norm::layer})
    for (int64_t cols : {127, 4096, 5000}) {
      Case c;
      c.op = op;
      c.rows = 4;
      c.cols = cols;
      c.bias = false;  // LayerNorm of a constant row is then ±0
      c.edit = [=](kt::HostTensor &x, kt::HostTensor &res) {
        // row 0: NaN; row 1: +inf; row 2: -inf + all -0 residuals; row 3: constant
        put(x, 5 % cols, nan);
        put(x, cols + 7 % cols, inf);
        for (int64_t k = 0; k < cols; ++k) {
          put(res, 2 * cols + k, -0.0);
          put(x, 3 * cols + k, op == Norm::layer ? 1.5 : -0.0);
          put(res, 3 * cols + k, -0.0);
        }
        put(x, 2 * cols + 3 % cols, -inf);
      };
      run(c);
    }
}

TEST_F(GpuNorm, SanitizerSmall) {
  // both paths (vector, element), both shapes, strided: small for memcheck
  for (kaio_dtype dt : {KAIO_DTYPE_F32, KAIO_DTYPE_BF16})
    for (Norm op : {Norm::add_rms, Norm::layer})
      for (int64_t cols : {33, 64, 1100}) {
        Case c;
        c.op = op;
        c.dt = dt;
        c.rows = 3;
        c.cols = cols;
        c.x_pad = cols % 2;
        c.r_pad = 8;
        c.bias = cols != 64;
        kaio_buffer_dtype_hint_ = dt;
        check(c);
      }
}

const kaio_dtype kDtypes[] = {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16};
INSTANTIATE_TEST_SUITE_P(GpuNorm, GpuNormDtypes, ::testing::ValuesIn(kDtypes),
                         [](const auto &i) { return std::string(kaio_dtype_name(i.param)); });

}  // namespace
