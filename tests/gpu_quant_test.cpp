// Quantized matmul on the GPU against host references from the same inputs.
//
// INT8: the i32 output must equal the integer sums exactly; float outputs
// must equal, bit for bit, the documented chain ((f32(acc) * alpha) * sa[m])
// * sb[n] rounded once to the output type.
// INT4: the reference dequantizes each weight exactly, (q - z) * s, rounds it
// once to the activations' type (as documented) and sums in f64. Tolerance:
// relative Frobenius error <= 2e-5 for f32 outputs (f32 accumulation of
// exact products over K <= 4096 stays near 1e-6), plus one output rounding
// for f16 (2^-11) and bf16 (2^-8) outputs. Canaries with known answers are
// checked exactly. Outputs are NaN-poisoned before every run; their row
// padding must keep the poison.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "support/kaio_test.hpp"

namespace {

std::vector<uint8_t> as_bytes(const void *p, size_t n) {
  const auto *b = static_cast<const uint8_t *>(p);
  return std::vector<uint8_t>(b, b + n);
}

class GpuQuant : public kt::GpuTest {
 protected:
  // The base upload, but never smaller than 16 bytes.
  kt::Buffer upload(const std::vector<uint8_t> &bytes) {
    kt::Buffer b = kt::make_buffer(dev(), std::max<size_t>(bytes.size(), 16));
    EXPECT_EQ(kaio_buffer_write(b.get(), 0, bytes.data(), bytes.size()), KAIO_OK);
    return b;
  }
};

kaio_tensor view(kaio_buffer *b, kaio_dtype dt, int64_t rows, int64_t cols, int64_t ld) {
  kaio_tensor t = kaio_tensor_2d(b, dt, rows, cols);
  t.row_stride = ld;
  return t;
}

double round_to(kaio_dtype dt, double v) {
  float f = static_cast<float>(v);
  if (dt == KAIO_DTYPE_F16) return kt::f16_to_f32(kt::f32_to_f16(f));
  if (dt == KAIO_DTYPE_BF16) return kt::bf16_to_f32(kt::f32_to_bf16(f));
  return f;
}

// ---------------------------------------------------------------------------
// INT8

struct Int8Case {
  int64_t m, n, k;
  kaio_dtype out = KAIO_DTYPE_F32;
  bool sa = false, sb = false;
  float alpha = 1.0f;
  bool prepared = false;
  int64_t pad = 0;  // extra elements per row (multiples of 16 for A and B)
  kaio_matmul_variant variant = KAIO_MATMUL_AUTO;  // ASYNC: the mma.sync kernel
};

class GpuQuantInt8 : public GpuQuant {
 protected:
  void check(const Int8Case &cs) {
    SCOPED_TRACE(std::to_string(cs.m) + "x" + std::to_string(cs.n) + "x" + std::to_string(cs.k) +
                 " out " + kaio_dtype_name(cs.out) + (cs.sa ? " sa" : "") + (cs.sb ? " sb" : "") +
                 " alpha " + std::to_string(cs.alpha) + (cs.prepared ? " prepared" : " one-shot") +
                 (cs.variant == KAIO_MATMUL_ASYNC ? " mma.sync" : " auto"));
    std::mt19937_64 rng(kt::test_seed() ^ (cs.m * 1009 + cs.n * 31 + cs.k));
    const int64_t lda = cs.k + cs.pad, ldb = cs.k + cs.pad, ldc = cs.n + cs.pad;
    std::vector<int8_t> a(cs.m * lda), b(cs.n * ldb);
    for (auto &v : a) v = static_cast<int8_t>(rng());
    for (auto &v : b) v = static_cast<int8_t>(rng());
    std::uniform_real_distribution<float> sd(0.001f, 0.1f);
    std::vector<float> sa(cs.m), sb(cs.n);
    for (auto &v : sa) v = sd(rng);
    for (auto &v : sb) v = sd(rng);
    kt::Buffer ba = upload(as_bytes(a.data(), a.size())), bb = upload(as_bytes(b.data(), b.size()));
    kt::Buffer bsa = upload(as_bytes(sa.data(), sa.size() * 4)),
               bsb = upload(as_bytes(sb.data(), sb.size() * 4));
    const size_t oes = kaio_dtype_size(cs.out), c_bytes = cs.m * ldc * oes;
    kt::Buffer bc = poisoned(c_bytes);
    kaio_tensor t[5] = {view(ba.get(), KAIO_DTYPE_I8, cs.m, cs.k, lda),
                        view(bb.get(), KAIO_DTYPE_I8, cs.n, cs.k, ldb),
                        cs.sa ? kaio_tensor_2d(bsa.get(), KAIO_DTYPE_F32, 1, cs.m) : kaio_tensor{},
                        cs.sb ? kaio_tensor_2d(bsb.get(), KAIO_DTYPE_F32, 1, cs.n) : kaio_tensor{},
                        view(bc.get(), cs.out, cs.m, cs.n, ldc)};
    kaio_matmul_int8_desc d;
    KT_OK(kaio_matmul_int8_desc_init(&d, sizeof d));
    d.out_dtype = cs.out;
    d.alpha = cs.alpha;
    d.variant = cs.variant;
    if (cs.prepared) {
      d.m = cs.m;
      d.n = cs.n;
      d.k = cs.k;
      kaio_op *op = nullptr;
      KT_OK(kaio_op_create_matmul_int8(&op, dev(), &d));
      kt::Op guard(op);
      KT_OK(kaio_op_launch(op, stream(), t, 5));
    } else {
      KT_OK(kaio_matmul_int8(stream(), &t[0], &t[1], cs.sa ? &t[2] : nullptr,
                             cs.sb ? &t[3] : nullptr, &t[4], &d));
    }
    std::vector<uint8_t> out = download(bc.get(), c_bytes);
    int64_t wrong = 0;
    for (int64_t r = 0; r < cs.m; ++r) {
      for (int64_t c = 0; c < cs.n; ++c) {
        int64_t acc = 0;
        for (int64_t kk = 0; kk < cs.k; ++kk) acc += int64_t{a[r * lda + kk]} * b[c * ldb + kk];
        const uint8_t *got = &out[(r * ldc + c) * oes];
        bool ok;
        if (cs.out == KAIO_DTYPE_I32) {
          int32_t g;
          std::memcpy(&g, got, 4);
          ok = g == acc;
        } else {
          float v = static_cast<float>(static_cast<int32_t>(acc));
          v *= cs.alpha;
          if (cs.sa) v *= sa[r];
          if (cs.sb) v *= sb[c];
          if (cs.out == KAIO_DTYPE_F32) {
            ok = std::memcmp(got, &v, 4) == 0;
          } else {
            uint16_t want = cs.out == KAIO_DTYPE_F16 ? kt::f32_to_f16(v) : kt::f32_to_bf16(v), g;
            std::memcpy(&g, got, 2);
            ok = g == want;
          }
        }
        if (!ok && ++wrong <= 3) ADD_FAILURE() << "wrong value at " << r << "," << c;
      }
      for (int64_t c = cs.n; c < ldc && r + 1 < cs.m; ++c)
        for (size_t e = 0; e < oes; ++e)
          ASSERT_EQ(out[(r * ldc + c) * oes + e], 0xFF) << "padding written at " << r << "," << c;
    }
    EXPECT_EQ(wrong, 0) << "of " << cs.m * cs.n << " outputs";
  }
};

// Both kernels: AUTO (wgmma + TMA on compute capability 9.0) and ASYNC (mma.sync).
TEST_F(GpuQuantInt8, IntegerSumsAreExactOverShapes) {
  for (kaio_matmul_variant v : {KAIO_MATMUL_AUTO, KAIO_MATMUL_ASYNC})
    for (Int8Case cs : {Int8Case{1, 1, 16}, Int8Case{7, 9, 48}, Int8Case{127, 129, 64},
                        Int8Case{128, 128, 128}, Int8Case{129, 200, 272},
                        Int8Case{257, 131, 1024}, Int8Case{300, 260, 2048},
                        Int8Case{130, 520, 4096}}) {
      cs.out = KAIO_DTYPE_I32;
      cs.variant = v;
      check(cs);
    }
}

TEST_F(GpuQuantInt8, ScaledOutputsMatchTheDocumentedChainBitForBit) {
  for (kaio_matmul_variant v : {KAIO_MATMUL_AUTO, KAIO_MATMUL_ASYNC})
    for (Int8Case cs : {Int8Case{33, 70, 160, KAIO_DTYPE_F32, false, false, 0.0125f},
                        Int8Case{33, 70, 160, KAIO_DTYPE_F32, true, true, 1.0f, true, 16},
                        Int8Case{130, 250, 512, KAIO_DTYPE_F16, true, false, 0.5f},
                        Int8Case{65, 129, 96, KAIO_DTYPE_BF16, false, true, 2.0f, false, 32},
                        Int8Case{1, 8, 4096, KAIO_DTYPE_F32, true, true, 1.0f, true},
                        Int8Case{3, 17, 32, KAIO_DTYPE_I32, false, false, 1.0f, true, 16}}) {
      cs.variant = v;
      check(cs);
    }
}

// ---------------------------------------------------------------------------
// INT4

struct Int4Case {
  int64_t m, n, k, group;
  bool zeros = true;
  uint32_t zoff = 0;
  kaio_int4_format fmt = KAIO_INT4_GPTQ;
  kaio_dtype in = KAIO_DTYPE_F16, out = KAIO_DTYPE_F32;
  bool prepared = false;
  int64_t pad = 0;      // multiple of 8
  int64_t c_shift = 0;  // C starts this many elements into its buffer (any value)
};

std::string describe(const Int4Case &c) {
  return std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " g" +
         std::to_string(c.group) + (c.zeros ? " zeros" : " symmetric") + " zoff " +
         std::to_string(c.zoff) + (c.fmt == KAIO_INT4_SIGNED ? " signed" : " gptq") + " " +
         kaio_dtype_name(c.in) + "->" + kaio_dtype_name(c.out) + (c.prepared ? " op" : " one-shot") +
         " pad " + std::to_string(c.pad);
}

// One weight set on the host: packed words and the dequantized values.
struct HostWeights {
  int64_t k = 0, n = 0, group = 0, ldqw = 0, ldsc = 0;
  bool zeros = false;
  std::vector<uint32_t> qw, qz;  // qw: K/8 x ldqw; qz: K/g x N/8
  kt::HostTensor sc;             // K/g x ldsc
  std::vector<double> w;         // K x N, rounded once to the activations' type
};

uint32_t nibble(uint32_t word, int64_t i) { return (word >> (4 * (i % 8))) & 15u; }

// Fills w from qw, qz, sc: W = (q - z) * s, rounded once to `in`.
void dequantize(HostWeights &h, const Int4Case &c) {
  h.w.assign(h.k * h.n, 0.0);
  for (int64_t kk = 0; kk < h.k; ++kk)
    for (int64_t nn = 0; nn < h.n; ++nn) {
      int64_t q = nibble(h.qw[(kk / 8) * h.ldqw + nn], kk);
      if (c.fmt == KAIO_INT4_SIGNED) q = q >= 8 ? q - 16 : q;
      const int64_t g = kk / h.group;
      int64_t z = c.fmt == KAIO_INT4_SIGNED ? 0
                  : h.zeros ? nibble(h.qz[g * (h.n / 8) + nn / 8], nn) + c.zoff
                            : 8;
      h.w[kk * h.n + nn] = round_to(c.in, static_cast<double>(q - z) * h.sc.values[g * h.ldsc + nn]);
    }
}

HostWeights random_weights(const Int4Case &c, int64_t n, uint64_t seed, bool zeros) {
  HostWeights h;
  h.k = c.k;
  h.n = n;
  h.group = c.group;
  h.zeros = zeros && c.fmt == KAIO_INT4_GPTQ;
  h.ldqw = n + c.pad / 2;
  h.ldsc = n + c.pad / 2;
  std::mt19937_64 rng(seed);
  h.qw.resize(c.k / 8 * h.ldqw);
  for (auto &v : h.qw) v = static_cast<uint32_t>(rng());
  h.qz.resize(c.k / c.group * (n / 8));
  for (auto &v : h.qz) v = static_cast<uint32_t>(rng());
  h.sc = kt::random_tensor(c.in, c.k / c.group * h.ldsc, 0.002, 0.05, seed + 1);
  dequantize(h, c);
  return h;
}

// Device copies of one weight set and its three views.
struct DeviceWeights {
  kt::Buffer qw, qz, sc;
  kaio_tensor t[3];
};

class GpuQuantInt4 : public GpuQuant {
 protected:
  DeviceWeights to_device(const HostWeights &h, kaio_dtype in) {
    DeviceWeights d;
    d.qw = upload(as_bytes(h.qw.data(), h.qw.size() * 4));
    d.sc = upload(h.sc.bytes);
    d.t[0] = view(d.qw.get(), KAIO_DTYPE_U32, h.k / 8, h.n, h.ldqw);
    d.t[1] = kaio_tensor{};
    if (h.zeros) {
      d.qz = upload(as_bytes(h.qz.data(), h.qz.size() * 4));
      d.t[1] = kaio_tensor_2d(d.qz.get(), KAIO_DTYPE_I32, h.k / h.group, h.n / 8);
    }
    d.t[2] = view(d.sc.get(), in, h.k / h.group, h.n, h.ldsc);
    return d;
  }

  // Runs x (m x k) times the weights; returns the decoded output (m x ldc).
  std::vector<double> run(const Int4Case &c, kaio_tensor x, DeviceWeights &w, int64_t n,
                          int64_t ldc) {
    const size_t oes = kaio_dtype_size(c.out), bytes = (c.m * ldc + c.c_shift) * oes;
    kt::Buffer bc = poisoned(bytes);
    kaio_tensor out = view(bc.get(), c.out, c.m, n, ldc);
    out.offset_bytes = static_cast<uint64_t>(c.c_shift) * oes;
    auto result = [&] {
      std::vector<double> all = kt::decode(c.out, download(bc.get(), bytes));
      return std::vector<double>(all.begin() + c.c_shift, all.end());
    };
    kaio_matmul_int4_desc d;
    EXPECT_EQ(kaio_matmul_int4_desc_init(&d, sizeof d), KAIO_OK);
    d.in_dtype = c.in;
    d.out_dtype = c.out;
    d.format = c.fmt;
    d.group_size = c.group;
    d.zeros_offset = c.zoff;
    if (c.prepared) {
      d.m = c.m;
      d.n = n;
      d.k = c.k;
      kaio_op *op = nullptr;
      EXPECT_EQ(kaio_op_create_matmul_int4(&op, dev(), &d), KAIO_OK) << kaio_last_error();
      kt::Op guard(op);
      kaio_tensor t[5] = {x, w.t[0], w.t[1], w.t[2], out};
      EXPECT_EQ(kaio_op_launch(op, stream(), t, 5), KAIO_OK) << kaio_last_error();
      return result();
    }
    EXPECT_EQ(kaio_matmul_int4(stream(), &x, &w.t[0], w.t[1].buffer ? &w.t[1] : nullptr,
                               &w.t[2], &out, &d),
              KAIO_OK)
        << kaio_last_error();
    return result();
  }

  // Relative Frobenius error of out (m x n at stride ldc) against x · W.
  void compare(const Int4Case &c, const std::vector<double> &xv, int64_t ldx,
               const HostWeights &h, const std::vector<double> &out, int64_t ldc) {
    double err2 = 0, ref2 = 0;
    int64_t non_finite = 0;
    for (int64_t r = 0; r < c.m; ++r) {
      std::vector<double> acc(h.n, 0.0);
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const double xk = xv[r * ldx + kk];
        const double *wr = &h.w[kk * h.n];
        for (int64_t nn = 0; nn < h.n; ++nn) acc[nn] += xk * wr[nn];
      }
      for (int64_t nn = 0; nn < h.n; ++nn) {
        double got = out[r * ldc + nn];
        if (!std::isfinite(got)) ++non_finite;
        err2 += (got - acc[nn]) * (got - acc[nn]);
        ref2 += acc[nn] * acc[nn];
      }
      for (int64_t nn = h.n; nn < ldc && r + 1 < c.m; ++nn)
        ASSERT_TRUE(std::isnan(out[r * ldc + nn])) << "padding written at " << r << "," << nn;
    }
    EXPECT_EQ(non_finite, 0) << "outputs left unwritten";
    const double tol = 2e-5 + (c.out == KAIO_DTYPE_F16    ? std::ldexp(1.0, -11)
                               : c.out == KAIO_DTYPE_BF16 ? std::ldexp(1.0, -8)
                                                          : 0.0);
    EXPECT_LE(std::sqrt(err2 / std::max(ref2, 1e-300)), tol);
  }

  void check(const Int4Case &c) {
    SCOPED_TRACE(describe(c));
    const uint64_t seed = kt::test_seed() ^ (c.m * 7919 + c.n * 131 + c.k * 3 + c.group);
    HostWeights h = random_weights(c, c.n, seed, c.zeros);
    const int64_t ldx = c.k + c.pad, ldc = c.n + c.pad;
    kt::HostTensor x = kt::random_tensor(c.in, c.m * ldx, -1, 1, seed + 7);
    kt::Buffer bx = upload(x.bytes);
    DeviceWeights w = to_device(h, c.in);
    std::vector<double> out = run(c, view(bx.get(), c.in, c.m, c.k, ldx), w, c.n, ldc);
    compare(c, x.values, ldx, h, out, ldc);
    // Every kernel sums in a fixed order (split-K warps in shared memory, the
    // sm_90a CTA pairs through distributed shared memory): a rerun is identical
    std::vector<double> again = run(c, view(bx.get(), c.in, c.m, c.k, ldx), w, c.n, ldc);
    EXPECT_EQ(std::memcmp(out.data(), again.data(), out.size() * sizeof(double)), 0)
        << "the same call gave different bits";
  }
};

TEST_F(GpuQuantInt4, EveryGroupSizeWithAndWithoutZeros) {
  for (int64_t g : {32, 64, 128, 256})
    for (bool z : {true, false}) check({1, 40, 256, g, z});
  check({2, 72, 384, 384, true});  // g = K, K not a power of two
  check({3, 64, 512, 128, true, 1});  // AutoGPTQ v1 zeros
  check({5, 64, 512, 64, false, 0, KAIO_INT4_SIGNED});
}

TEST_F(GpuQuantInt4, DecodeRowsDtypesAndStrides) {
  // 17 and 32: on sm_90a too, the decode kernel (two slices of 16 rows)
  for (int64_t m : {1, 3, 8, 9, 16, 17, 32}) check({m, 72, 512, 128, true});
  check({4, 136, 1024, 128, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F32});
  check({16, 256, 1024, 64, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F16, false, 16});
  check({7, 64, 256, 32, false, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_BF16, true, 8});
  check({16, 4096, 4096, 128, true});
  check({40, 96, 256, 128, true});  // one-shot past 16 rows: the decode kernel, 3 row tiles
  // contiguous-K kernel (M <= 8, groups >= 128): K not a multiple of 16 warps x 4 steps
  check({2, 64, 3072, 128, true});
  check({6, 40, 1248, 1248, false, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F32});
}

// The contiguous-K kernels split K over 16, 8 or 4 warps per CTA, picked by how
// many CTAs N makes (src/ops/quant_int4.cpp); on a 132-SM H100, N = 8200 takes
// the 8-warp kernel at M <= 8 and the 16-warp one at M <= 16, N = 8456 the 4-warp
// ones (the last CTA half full). Also the smallest legal K (32, one group) and N (8).
TEST_F(GpuQuantInt4, ContiguousKKernelsOfEveryWarpCount) {
  check({1, 8200, 256, 128, true});
  check({5, 8456, 128, 128, false, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F16});
  check({2, 8456, 1152, 128, true, 1});  // 36 steps: 4 warps take 12, 12, 12, 0
  check({3, 8456, 32, 32, true});
  // M > 8 on 132 SMs: 129 CTAs take the 16-warp kernel, 257 the 8-warp one,
  // 265 the 4-warp one with 4 steps per batch, 397 the one with 2
  check({16, 4104, 256, 128, true});
  check({16, 12680, 256, 128, false, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F16});
  check({12, 8200, 384, 128, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F32});
  check({16, 8456, 256, 256, true});
  check({16, 8456, 512, 128, false, 0, KAIO_INT4_SIGNED, KAIO_DTYPE_F16, KAIO_DTYPE_BF16});
  check({16, 8, 32, 32, false});
  check({1, 8, 4096, 128, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F32, false, 8});
}

// M > 16: on an sm_90 the dequantize-into-wgmma kernels (tiles of 64, 128 or
// 256 rows, split or not), elsewhere the dequantize pass (op handles) or the
// decode kernel (one-shot).
// K = 32 x odd leaves half of the last 64-wide K step past K; g = 32 puts two
// groups in every step; M and N off the tiles; the signed format; padded rows.
TEST_F(GpuQuantInt4, PrefillKTailsGroupsOfThirtyTwoAndOddTiles) {
  // M > 64: on sm_90a the fused kernel (fewer rows at N <= 4096 run the decode kernel)
  check({65, 72, 96, 96, true});
  check({68, 64, 160, 32, false, 0, KAIO_INT4_SIGNED, KAIO_DTYPE_BF16, KAIO_DTYPE_BF16, true});
  // f16 folds the signed format's xor into its nibble lop3: both formats on both paths
  check({72, 64, 256, 64, false, 0, KAIO_INT4_SIGNED, KAIO_DTYPE_F16, KAIO_DTYPE_F32});
  check({300, 136, 224, 32, true, 1, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F16, false, 8});
  check({257, 264, 512, 128, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F32, true});
  // C one element off a 16-byte boundary: the element-store epilogue
  check({70, 80, 256, 64, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F16, false, 0, 1});
  check({130, 40, 128, 128, false, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F32, true, 8, 3});
  // 7 K steps over a cluster of 4: 2, 2, 2 and 1
  check({100, 256, 448, 64, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F32});
}

// The sm_90a kernel's tiles, as src/ops/quant_int4.cpp picks them on a
// 132-SM H100 (the cases above take 64-row tiles, split 2 or 4 ways): 70
// column tiles of 40 rows at 2 K steps take the 64-row tile unsplit (140
// split CTAs would need two waves); M 300 and 520 over 60 column tiles the
// 192-row one, M 200 over 66 the 128-row one. Then each split: M 200 over 17
// column tiles at 16 K steps (128 rows, 2 ways), over 9 at 32 (128 rows, 4
// ways); M 257 over 33 at 16 (192 rows, 2 ways), M 450 over 9 at 16 (192
// rows, 4 ways); M 200 over 49 at 16 (256 rows, 2 ways), over 17 at 32 (256
// rows, 4 ways). Where M is past a whole tile, the last row tile loads the
// tile's worth of rows that ends at M and stores only its own: M 520 on
// 192-row tiles loads rows 328-519 in the third. On other GPUs the picks
// differ; the results must hold either way.
TEST_F(GpuQuantInt4, PrefillTilesOfEverySize) {
  check({40, 128 * 70, 128, 128, true});
  check({300, 128 * 60, 128, 64, false, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F32});
  check({200, 128 * 66, 64, 64, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F16});
  check({520, 128 * 60, 64, 32, false, 0, KAIO_INT4_SIGNED, KAIO_DTYPE_BF16, KAIO_DTYPE_BF16});
  check({200, 2056, 1024, 128, true, 1, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_BF16});
  check({200, 1032, 2048, 32, false, 0, KAIO_INT4_SIGNED, KAIO_DTYPE_F16, KAIO_DTYPE_F16});
  check({257, 4104, 1024, 64, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F32});
  check({450, 1032, 1024, 256, false, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F16});
  check({200, 6152, 1024, 128, false, 0, KAIO_INT4_SIGNED, KAIO_DTYPE_F16, KAIO_DTYPE_BF16});
  check({200, 2056, 2048, 2048, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F32});
}

// The unsplit 192- and 256-row tiles over many column tiles (on a 132-SM H100,
// 65 column tiles, the last one 72 columns wide, by 2 row tiles: 130 CTAs in
// one wave; 192 rows at M 260 and 300, 256 at M 500): K tails, g = 32 and
// g >= 128 (scales made once for several steps), the signed format, an op
// handle with padded rows, and C off a 16-byte boundary (the element-store
// epilogue).
TEST_F(GpuQuantInt4, PrefillWideTileOverManyColumns) {
  const int64_t n = 128 * 64 + 72;
  check({300, n, 160, 32, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F16});
  check({260, n, 192, 64, false, 0, KAIO_INT4_SIGNED, KAIO_DTYPE_BF16, KAIO_DTYPE_F32, true, 8});
  check({500, n, 256, 128, true, 1, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_BF16, false, 0, 1});
}

// More CTAs than SMs, at M and N off the tiles. On a 132-SM H100: M 1000
// over 41 column tiles (the last 8 columns wide) on 192-row tiles, 246 CTAs
// at 6 K steps; M 600 over 65 at 2 and 3 K steps (192 rows); M 2000 over 33
// on 256-row tiles at 4 K steps, the last row tile loading rows 1744-1999.
// 16-bit C 16-byte aligned takes the transposed stores, C one or two
// elements off that the element stores.
TEST_F(GpuQuantInt4, PrefillSeveralWavesOfTiles) {
  check({1000, 128 * 40 + 8, 384, 64, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F16});
  check({600, 128 * 64 + 72, 128, 32, false, 0, KAIO_INT4_SIGNED, KAIO_DTYPE_BF16,
         KAIO_DTYPE_BF16, true, 8});
  check({2000, 128 * 32 + 8, 256, 128, true, 1, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F32,
         false, 8, 3});
  check({1000, 128 * 40 + 8, 384, 32, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F16,
         false, 0, 1});
  check({600, 128 * 64 + 72, 192, 64, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_F16,
         true, 16, 2});
}

TEST_F(GpuQuantInt4, OpHandlesAtPrefillDequantizeIntoTheirWorkspace) {
  check({64, 128, 256, 128, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F32, true});
  check({100, 200, 512, 64, false, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_BF16, KAIO_DTYPE_BF16, true, 8});
  check({17, 64, 1024, 1024, true, 1, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F16, true});
  check({5, 64, 256, 128, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F32, true});
  // past M = 4096 op handles own the workspace on sm_90 too (below it, the fused kernel)
  check({4100, 64, 256, 128, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16, KAIO_DTYPE_F16, true});
}

// Known answers: x = 1, scale 1, every word the same pattern.
TEST_F(GpuQuantInt4, CanariesGiveTheirKnownAnswers) {
  const int64_t m = 3, n = 64, k = 512;
  std::vector<uint16_t> ones(m * k, kt::f32_to_f16(1.0f)), sc(k / 128 * n, kt::f32_to_f16(1.0f));
  kt::Buffer bx = upload(as_bytes(ones.data(), ones.size() * 2)),
             bs = upload(as_bytes(sc.data(), sc.size() * 2));
  struct {
    uint32_t word;
    kaio_int4_format fmt;
    double want;
  } canaries[] = {
      {0x88888888u, KAIO_INT4_GPTQ, 0.0},                         // q = 8 = zero point
      {0x87654321u, KAIO_INT4_GPTQ, (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 - 64) * (k / 8.0)},
      {0x87654321u, KAIO_INT4_SIGNED, (1 + 2 + 3 + 4 + 5 + 6 + 7 - 8) * (k / 8.0)},
      {0x99999999u, KAIO_INT4_GPTQ, static_cast<double>(k)},     // unit weights
      {0x00000000u, KAIO_INT4_SIGNED, 0.0},
  };
  for (const auto &cn : canaries) {
    SCOPED_TRACE(cn.word);
    std::vector<uint32_t> qw(k / 8 * n, cn.word);
    kt::Buffer bq = upload(as_bytes(qw.data(), qw.size() * 4));
    kt::Buffer bc = poisoned(m * n * 4);
    kaio_tensor x = kaio_tensor_2d(bx.get(), KAIO_DTYPE_F16, m, k),
                q = kaio_tensor_2d(bq.get(), KAIO_DTYPE_U32, k / 8, n),
                s = kaio_tensor_2d(bs.get(), KAIO_DTYPE_F16, k / 128, n),
                c = kaio_tensor_2d(bc.get(), KAIO_DTYPE_F32, m, n);
    kaio_matmul_int4_desc d;
    KT_OK(kaio_matmul_int4_desc_init(&d, sizeof d));
    d.format = cn.fmt;
    KT_OK(kaio_matmul_int4(stream(), &x, &q, nullptr, &s, &c, &d));
    for (double v : kt::decode(KAIO_DTYPE_F32, download(bc.get(), m * n * 4)))
      ASSERT_EQ(v, cn.want);
  }
}

// Identity weights (q = 9 on the diagonal, 8 elsewhere, zero 8, scale 1)
// return x exactly.
TEST_F(GpuQuantInt4, IdentityWeightsReturnTheActivations) {
  const int64_t m = 5, n = 64, k = 64;
  std::vector<uint32_t> qw(k / 8 * n, 0x88888888u);
  for (int64_t i = 0; i < k; ++i) qw[(i / 8) * n + i] ^= 1u << (4 * (i % 8));  // 8 -> 9
  std::vector<uint16_t> sc(n, kt::f32_to_f16(1.0f));
  kt::HostTensor x = kt::random_tensor(KAIO_DTYPE_F16, m * k, -2, 2, kt::test_seed());
  kt::Buffer bx = upload(x.bytes), bq = upload(as_bytes(qw.data(), qw.size() * 4)),
             bs = upload(as_bytes(sc.data(), sc.size() * 2)), bc = poisoned(m * n * 4);
  kaio_tensor tx = kaio_tensor_2d(bx.get(), KAIO_DTYPE_F16, m, k),
              tq = kaio_tensor_2d(bq.get(), KAIO_DTYPE_U32, k / 8, n),
              ts = kaio_tensor_2d(bs.get(), KAIO_DTYPE_F16, 1, n),
              tc = kaio_tensor_2d(bc.get(), KAIO_DTYPE_F32, m, n);
  kaio_matmul_int4_desc d;
  KT_OK(kaio_matmul_int4_desc_init(&d, sizeof d));
  d.group_size = k;
  KT_OK(kaio_matmul_int4(stream(), &tx, &tq, nullptr, &ts, &tc, &d));
  std::vector<double> out = kt::decode(KAIO_DTYPE_F32, download(bc.get(), m * n * 4));
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], x.values[i]) << i;
}

// KAIO's signed column-major storage, repacked, gives the same product.
TEST_F(GpuQuantInt4, RepackedKaioWeightsMatchTheReference) {
  Int4Case c{4, 48, 256, 128, false, 0, KAIO_INT4_SIGNED};
  HostWeights h = random_weights(c, c.n, kt::test_seed() + 11, false);
  std::vector<uint32_t> kaio(c.n * (c.k / 8));
  for (int64_t kw = 0; kw < c.k / 8; ++kw)
    for (int64_t nn = 0; nn < c.n; ++nn) kaio[nn * (c.k / 8) + kw] = h.qw[kw * h.ldqw + nn];
  kt::Buffer src = upload(as_bytes(kaio.data(), kaio.size() * 4));
  DeviceWeights w = to_device(h, c.in);
  KT_OK(kaio_buffer_memset(w.qw.get(), stream(), 0, 0, h.qw.size() * 4));
  kaio_tensor ts = kaio_tensor_2d(src.get(), KAIO_DTYPE_U32, c.n, c.k / 8);
  KT_OK(kaio_int4_repack_kaio(stream(), &ts, &w.t[0]));
  kt::HostTensor x = kt::random_tensor(c.in, c.m * c.k, -1, 1, kt::test_seed() + 12);
  kt::Buffer bx = upload(x.bytes);
  std::vector<double> out = run(c, kaio_tensor_2d(bx.get(), c.in, c.m, c.k), w, c.n, c.n);
  compare(c, x.values, c.k, h, out, c.n);
}

// Fused QKV: each output matches the reference, and equals bit for bit the
// separate matmul_int4 call on the same weights (same kernel arithmetic).
TEST_F(GpuQuantInt4, FusedQkvMatchesThreeSeparateProducts) {
  for (int64_t m : {1, 4, 16}) {
    for (bool prepared : {false, true}) {
      // group 128 at M = 4: the contiguous-K kernel; 64: the interleaved one
      Int4Case c{m, 0, 512, m == 4 ? 128 : 64, true, 0, KAIO_INT4_GPTQ, KAIO_DTYPE_F16,
                 KAIO_DTYPE_F16};
      SCOPED_TRACE(describe(c) + (prepared ? " prepared" : ""));
      const int64_t ns[3] = {128, 32, 40};
      HostWeights h[3];
      DeviceWeights w[3];
      for (int p = 0; p < 3; ++p) {
        h[p] = random_weights(c, ns[p], kt::test_seed() + 100 * p + m, p != 1);
        w[p] = to_device(h[p], c.in);
      }
      kt::HostTensor x = kt::random_tensor(c.in, m * c.k, -1, 1, kt::test_seed() + m);
      kt::Buffer bx = upload(x.bytes);
      kt::Buffer bo[3] = {poisoned(m * ns[0] * 2), poisoned(m * ns[1] * 2), poisoned(m * ns[2] * 2)};
      kaio_tensor t[13];
      t[0] = kaio_tensor_2d(bx.get(), c.in, m, c.k);
      for (int p = 0; p < 3; ++p) {
        for (int j = 0; j < 3; ++j) t[1 + 3 * p + j] = w[p].t[j];
        t[10 + p] = kaio_tensor_2d(bo[p].get(), KAIO_DTYPE_F16, m, ns[p]);
      }
      kaio_qkv_int4_desc d;
      KT_OK(kaio_qkv_int4_desc_init(&d, sizeof d));
      d.group_size = c.group;
      if (prepared) {
        d.m = m;
        d.k = c.k;
        d.n_q = ns[0];
        d.n_k = ns[1];
        d.n_v = ns[2];
        kaio_op *op = nullptr;
        KT_OK(kaio_op_create_qkv_project_int4(&op, dev(), &d));
        kt::Op guard(op);
        KT_OK(kaio_op_launch(op, stream(), t, 13));
      } else {
        KT_OK(kaio_qkv_project_int4(stream(), t, 13, &d));
      }
      for (int p = 0; p < 3; ++p) {
        std::vector<uint8_t> fused = download(bo[p].get(), m * ns[p] * 2);
        Int4Case cp = c;
        cp.n = ns[p];
        compare(cp, x.values, c.k, h[p], kt::decode(KAIO_DTYPE_F16, fused), ns[p]);
        std::vector<double> alone = run(cp, t[0], w[p], ns[p], ns[p]);
        EXPECT_EQ(kt::decode(KAIO_DTYPE_F16, fused), alone) << "projection " << p;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// QKV with int8 weights (W8A16): per-tensor and per-column scales.

class GpuQuantQkv8 : public GpuQuant {
 protected:
  void check(int64_t m, int64_t k, const int64_t ns[3], kaio_dtype out, bool prepared,
             int64_t pad) {
    SCOPED_TRACE("M " + std::to_string(m) + " K " + std::to_string(k) + " out " +
                 kaio_dtype_name(out) + (prepared ? " op" : " one-shot"));
    std::mt19937_64 rng(kt::test_seed() ^ (m * 31 + k));
    kt::HostTensor x = kt::random_tensor(KAIO_DTYPE_F16, m * (k + pad), -1, 1, rng());
    kt::Buffer bx = upload(x.bytes);
    std::vector<int8_t> w[3];
    std::vector<float> sc[3];
    kt::Buffer bw[3], bs[3], bo[3];
    kaio_tensor t[10];
    t[0] = view(bx.get(), KAIO_DTYPE_F16, m, k, k + pad);
    const size_t oes = kaio_dtype_size(out);
    for (int p = 0; p < 3; ++p) {
      const int64_t ldw = ns[p] + pad;
      w[p].resize(k * ldw);
      for (auto &v : w[p]) v = static_cast<int8_t>(rng());
      sc[p].resize(p == 0 ? 1 : ns[p]);  // q per tensor, k and v per column
      std::uniform_real_distribution<float> sd(0.001f, 0.05f);
      for (auto &v : sc[p]) v = sd(rng);
      bw[p] = upload(as_bytes(w[p].data(), w[p].size()));
      bs[p] = upload(as_bytes(sc[p].data(), sc[p].size() * 4));
      bo[p] = poisoned(m * ns[p] * oes);
      t[1 + 2 * p] = view(bw[p].get(), KAIO_DTYPE_I8, k, ns[p], ldw);
      t[2 + 2 * p] = kaio_tensor_2d(bs[p].get(), KAIO_DTYPE_F32, 1, sc[p].size());
      t[7 + p] = kaio_tensor_2d(bo[p].get(), out, m, ns[p]);
    }
    kaio_qkv_int8_desc d;
    KT_OK(kaio_qkv_int8_desc_init(&d, sizeof d));
    d.out_dtype = out;
    if (prepared) {
      d.m = m;
      d.k = k;
      d.n_q = ns[0];
      d.n_k = ns[1];
      d.n_v = ns[2];
      kaio_op *op = nullptr;
      KT_OK(kaio_op_create_qkv_project_int8(&op, dev(), &d));
      kt::Op guard(op);
      KT_OK(kaio_op_launch(op, stream(), t, 10));
    } else {
      KT_OK(kaio_qkv_project_int8(stream(), t, 10, &d));
    }
    for (int p = 0; p < 3; ++p) {
      std::vector<double> got = kt::decode(out, download(bo[p].get(), m * ns[p] * oes));
      const int64_t ldw = ns[p] + pad;
      double err2 = 0, ref2 = 0;
      int64_t non_finite = 0;
      for (int64_t r = 0; r < m; ++r)
        for (int64_t n = 0; n < ns[p]; ++n) {
          double acc = 0;
          for (int64_t kk = 0; kk < k; ++kk) acc += x.values[r * (k + pad) + kk] * w[p][kk * ldw + n];
          const double want = acc * sc[p][p == 0 ? 0 : n];
          if (!std::isfinite(got[r * ns[p] + n])) ++non_finite;
          err2 += (got[r * ns[p] + n] - want) * (got[r * ns[p] + n] - want);
          ref2 += want * want;
        }
      EXPECT_EQ(non_finite, 0) << "projection " << p;
      const double tol = 2e-5 + (out == KAIO_DTYPE_F16 ? std::ldexp(1.0, -11)
                                 : out == KAIO_DTYPE_BF16 ? std::ldexp(1.0, -8) : 0.0);
      EXPECT_LE(std::sqrt(err2 / std::max(ref2, 1e-300)), tol) << "projection " << p;
    }
  }
};

TEST_F(GpuQuantQkv8, MatchesTheReferenceOverRowsScalesAndOutputs) {
  const int64_t gqa[3] = {64, 36, 40}, big[3] = {4096, 1024, 1024};
  check(1, 256, gqa, KAIO_DTYPE_F16, false, 0);
  check(5, 512, gqa, KAIO_DTYPE_F32, true, 8);  // x row stride: a multiple of 8
  check(16, 256, gqa, KAIO_DTYPE_BF16, false, 8);
  check(20, 96, gqa, KAIO_DTYPE_F16, true, 0);
  check(4, 4096, big, KAIO_DTYPE_F16, true, 0);
}

}  // namespace
