// Tensor-core matmul against an f64 CPU reference from the same rounded
// inputs: every variant, input dtype, transpose pair, output dtype and
// alpha/beta case, and the size sweep M, N in {1, 7, 127, 128, 129, 1000,
// 4097}, K in {8, 24, 1000, 4096}.
//
// Tolerance: relative Frobenius error ||out - ref|| / ||ref|| over the rows
// checked, at most 1e-4 for f32 output (f32 accumulation over K <= 4096 of
// exact products stays near 1e-6), and one output rounding plus that for
// f16 (2^-11 + 1e-4) and bf16 (2^-8 + 1e-4) outputs. NaN or Inf anywhere in
// the output fails: C is NaN-poisoned before every beta = 0 run.
// Large shapes check every column of a sample of rows (first, last, the
// tile edges 127/128/129 and a few random ones) to keep the reference cheap.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>
#include <set>

#include "support/kaio_test.hpp"

namespace {

struct Case {
  kaio_matmul_variant variant = KAIO_MATMUL_AUTO;
  kaio_dtype in = KAIO_DTYPE_F16, out = KAIO_DTYPE_F32;
  kaio_trans ta = KAIO_TRANS_N, tb = KAIO_TRANS_T;
  int64_t m = 1, n = 1, k = 8;
  float alpha = 1.0f, beta = 0.0f;
  int64_t pad = 0;  // extra elements per row of A, B and C (keeps multiples of 8)
  bool prepared = false;
};

std::string describe(const Case &c) {
  const char *v[] = {"auto", "sync", "async"};
  return std::string(v[c.variant]) + " " + kaio_dtype_name(c.in) + "->" + kaio_dtype_name(c.out) +
         " " + (c.ta ? "T" : "N") + (c.tb ? "T" : "N") + " " + std::to_string(c.m) + "x" +
         std::to_string(c.n) + "x" + std::to_string(c.k) + " alpha " + std::to_string(c.alpha) +
         " beta " + std::to_string(c.beta) + " pad " + std::to_string(c.pad) +
         (c.prepared ? " prepared" : " one-shot");
}

double out_tolerance(kaio_dtype out) {
  return 1e-4 + (out == KAIO_DTYPE_F16 ? std::ldexp(1.0, -11)
                 : out == KAIO_DTYPE_BF16 ? std::ldexp(1.0, -8) : 0.0);
}

class GpuMatmul : public kt::GpuTest {
 protected:
  void check(const Case &cs) {
    SCOPED_TRACE(describe(cs));
    const size_t ies = 2, oes = kaio_dtype_size(cs.out);
    const int64_t a_rows = cs.ta ? cs.k : cs.m, a_cols = cs.ta ? cs.m : cs.k;
    const int64_t b_rows = cs.tb ? cs.n : cs.k, b_cols = cs.tb ? cs.k : cs.n;
    // A and B rows must start 16-byte aligned: their strides round up to a
    // multiple of 8 elements (the documented constraint); C takes any stride.
    auto up8 = [](int64_t v) { return (v + 7) / 8 * 8; };
    const int64_t lda = up8(a_cols) + cs.pad, ldb = up8(b_cols) + cs.pad, ldc = cs.n + cs.pad;
    const size_t a_elems = (a_rows - 1) * lda + a_cols, b_elems = (b_rows - 1) * ldb + b_cols;
    const size_t c_elems = (cs.m - 1) * ldc + cs.n;
    uint64_t seed = kt::test_seed() ^ (cs.m * 131 + cs.n * 7 + cs.k * 3 + cs.ta * 2 + cs.tb);
    kt::HostTensor a = kt::random_tensor(cs.in, a_elems, -1, 1, seed);
    kt::HostTensor b = kt::random_tensor(cs.in, b_elems, -1, 1, seed + 1);
    kt::HostTensor c0 = kt::random_tensor(cs.out, c_elems, -1, 1, seed + 2);
    kt::Buffer ba = kt::make_buffer(dev(), a_elems * ies), bb = kt::make_buffer(dev(), b_elems * ies);
    kt::Buffer bc = kt::make_buffer(dev(), c_elems * oes);
    KT_OK(kaio_buffer_write(ba.get(), 0, a.bytes.data(), a.bytes.size()));
    KT_OK(kaio_buffer_write(bb.get(), 0, b.bytes.data(), b.bytes.size()));
    if (cs.beta == 0.0f)
      KT_OK(kaio_buffer_memset(bc.get(), stream(), 0, 0xFF, c_elems * oes));  // NaN
    else
      KT_OK(kaio_buffer_write(bc.get(), 0, c0.bytes.data(), c0.bytes.size()));

    kaio_tensor ta = kaio_tensor_2d(ba.get(), cs.in, a_rows, a_cols);
    ta.row_stride = lda;
    kaio_tensor tb = kaio_tensor_2d(bb.get(), cs.in, b_rows, b_cols);
    tb.row_stride = ldb;
    kaio_tensor tc = kaio_tensor_2d(bc.get(), cs.out, cs.m, cs.n);
    tc.row_stride = ldc;
    kaio_matmul_desc d;
    KT_OK(kaio_matmul_desc_init(&d, sizeof d));
    d.in_dtype = cs.in;
    d.out_dtype = cs.out;
    d.trans_a = cs.ta;
    d.trans_b = cs.tb;
    d.variant = cs.variant;
    d.alpha = cs.alpha;
    d.beta = cs.beta;
    if (cs.prepared) {
      d.m = cs.m;
      d.n = cs.n;
      d.k = cs.k;
      kaio_op *op = nullptr;
      KT_OK(kaio_op_create_matmul(&op, dev(), &d));
      kt::Op guard(op);
      kaio_tensor t[] = {ta, tb, tc};
      KT_OK(kaio_op_launch(op, stream(), t, 3));
    } else {
      KT_OK(kaio_matmul(stream(), &ta, &tb, &tc, &d));
    }
    KT_OK(kaio_stream_synchronize(stream()));
    std::vector<uint8_t> ob(c_elems * oes);
    KT_OK(kaio_buffer_read(bc.get(), 0, ob.data(), ob.size()));
    std::vector<double> out = kt::decode(cs.out, ob);

    std::set<int64_t> rows;
    if (cs.m * cs.n * cs.k <= (int64_t{1} << 27)) {
      for (int64_t r = 0; r < cs.m; ++r) rows.insert(r);
    } else {
      std::mt19937_64 rng(seed);
      for (int64_t r : {int64_t{0}, cs.m - 1, int64_t{127}, int64_t{128}, int64_t{129}})
        if (r < cs.m) rows.insert(r);
      for (int i = 0; i < 6; ++i) rows.insert(static_cast<int64_t>(rng() % cs.m));
    }
    double err2 = 0, ref2 = 0;
    int64_t non_finite = 0;
    std::vector<double> arow(cs.k);
    for (int64_t r : rows) {
      for (int64_t kk = 0; kk < cs.k; ++kk)
        arow[kk] = cs.ta ? a.values[kk * lda + r] : a.values[r * lda + kk];
      for (int64_t col = 0; col < cs.n; ++col) {
        double acc = 0;
        for (int64_t kk = 0; kk < cs.k; ++kk)
          acc += arow[kk] * (cs.tb ? b.values[col * ldb + kk] : b.values[kk * ldb + col]);
        double want = cs.alpha * acc + (cs.beta != 0.0f ? cs.beta * c0.values[r * ldc + col] : 0.0);
        double got = out[r * ldc + col];
        if (!std::isfinite(got)) ++non_finite;
        err2 += (got - want) * (got - want);
        ref2 += want * want;
      }
    }
    EXPECT_EQ(non_finite, 0) << "output elements left unwritten or overflowed";
    double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
    EXPECT_LE(rel, out_tolerance(cs.out)) << "relative Frobenius error over " << rows.size() << " rows";
    if (cs.pad > 0 && cs.beta == 0.0f) {
      // Row padding of C is not part of the view and must keep its poison.
      for (int64_t r = 0; r + 1 < cs.m; ++r)
        for (int64_t col = cs.n; col < ldc; ++col)
          ASSERT_TRUE(std::isnan(out[r * ldc + col])) << "padding written at " << r << "," << col;
    }
  }

  struct Shape {
    int64_t m, n, k;
  };
  // Each shape in all four layouts, case i cycling the input dtype (both in
  // every layout), the output dtype, alpha, beta 0 (NaN-poisoned C) or not
  // and padded rows; prepared(i): a prepared op, else the one-shot call.
  template <class Prepared>
  void every_layout(std::initializer_list<Shape> shapes, Prepared prepared) {
    int i = 0;
    for (const Shape &sh : shapes)
      for (int lay = 0; lay < 4; ++lay, ++i) {
        Case c;
        c.m = sh.m;
        c.n = sh.n;
        c.k = sh.k;
        c.ta = (lay & 2) ? KAIO_TRANS_T : KAIO_TRANS_N;
        c.tb = (lay & 1) ? KAIO_TRANS_T : KAIO_TRANS_N;
        c.in = ((i + i / 4) % 2) ? KAIO_DTYPE_BF16 : KAIO_DTYPE_F16;
        c.out = (i % 3 == 0) ? KAIO_DTYPE_F32 : (i % 3 == 1) ? KAIO_DTYPE_F16 : KAIO_DTYPE_BF16;
        c.alpha = (i % 2) ? 0.75f : 1.0f;
        c.beta = (i % 4 == 1) ? -0.25f : 0.0f;
        c.pad = (i % 5 == 2) ? 8 : 0;
        c.prepared = prepared(i);
        check(c);
      }
  }
};

TEST_F(GpuMatmul, EveryVariantDtypeLayoutAndOutput) {
  int n = 0;
  for (kaio_matmul_variant v : {KAIO_MATMUL_SYNC, KAIO_MATMUL_ASYNC, KAIO_MATMUL_AUTO})
    for (kaio_dtype in : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16})
      for (kaio_trans ta : {KAIO_TRANS_N, KAIO_TRANS_T})
        for (kaio_trans tb : {KAIO_TRANS_N, KAIO_TRANS_T})
          for (kaio_dtype out : {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16}) {
            Case c;
            c.variant = v;
            c.in = in;
            c.out = out;
            c.ta = ta;
            c.tb = tb;
            c.m = 129;
            c.n = 127;
            c.k = 264;
            c.alpha = (n % 2) ? 1.5f : 1.0f;
            c.beta = (n % 3 == 0) ? 0.5f : 0.0f;
            c.pad = (n % 4 == 1) ? 8 : 0;
            c.prepared = (n++ % 2) == 0;
            check(c);
          }
}

TEST_F(GpuMatmul, SizeSweepEdgeTilesAndK) {
  const int64_t mn[] = {1, 7, 127, 128, 129, 1000, 4097};
  const int64_t ks[] = {8, 24, 1000, 4096};
  int n = 0;
  for (int64_t m : mn)
    for (int64_t nn : mn)
      for (int64_t k : ks) {
        // Every (M, N) pair at K = 24, and the other K values on a diagonal
        // band, keeps the sweep to a few seconds of CPU reference.
        if (k != 24 && (m != nn && !(m == 1 || nn == 1))) continue;
        Case c;
        c.m = m;
        c.n = nn;
        c.k = k;
        c.ta = (n % 4) / 2 ? KAIO_TRANS_T : KAIO_TRANS_N;
        c.tb = (n % 2) ? KAIO_TRANS_N : KAIO_TRANS_T;
        c.in = (n % 3 == 0) ? KAIO_DTYPE_BF16 : KAIO_DTYPE_F16;
        c.variant = (n % 5 == 0) ? KAIO_MATMUL_SYNC : KAIO_MATMUL_AUTO;
        c.beta = (n % 7 == 0) ? -0.25f : 0.0f;
        c.prepared = (n++ % 2) == 1;
        check(c);
      }
}

// Decode shapes: AUTO with M <= 16 and nn.Linear weights (B transposed)
// runs the GEMV kernels; every row bucket, odd N, every output dtype.
TEST_F(GpuMatmul, DecodeShapesOnTheGemvPath) {
  int idx = 0;
  for (int64_t m : {1, 2, 3, 4, 5, 8, 9, 16})
    for (int64_t n : {1, 7, 127, 4096})
      for (int64_t k : {8, 24, 4096}) {
        Case c;
        c.m = m;
        c.n = n;
        c.k = k;
        c.ta = KAIO_TRANS_N;
        c.tb = KAIO_TRANS_T;
        c.in = (idx % 2) ? KAIO_DTYPE_BF16 : KAIO_DTYPE_F16;
        c.out = (idx % 3 == 0) ? KAIO_DTYPE_F32 : (idx % 3 == 1) ? KAIO_DTYPE_F16 : KAIO_DTYPE_BF16;
        c.alpha = 1.5f;
        c.beta = (idx % 4 == 0) ? 0.5f : 0.0f;
        c.prepared = (idx++ % 2) == 1;
        check(c);
      }
}

// 16-bit outputs of whole tiles along N with beta 0 (the epilogue's paired
// stores; pad 8 keeps C and ldc 16-byte aligned). The taller shapes put the
// 128 x 256 tiles to work, with a partial last tile row along M; the short
// ones the 128 x 64 tiles.
TEST_F(GpuMatmul, SixteenBitOutputsOfWholeTiles) {
  struct Shape {
    int64_t m, n, k;
  } shapes[] = {{300, 512, 1000}, {2000, 2048, 264}, {4100, 4096, 128}, {128, 4096, 4096}};
  int idx = 0;
  for (const Shape &sh : shapes)
    for (kaio_dtype out : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16}) {
      Case c;
      c.m = sh.m;
      c.n = sh.n;
      c.k = sh.k;
      c.in = (idx % 2) ? KAIO_DTYPE_F16 : KAIO_DTYPE_BF16;
      c.out = out;
      c.alpha = (idx % 3 == 1) ? 0.75f : 1.0f;
      c.pad = (idx % 4 == 2) ? 8 : 0;
      c.prepared = (idx++ % 2) == 0;
      check(c);
    }
}

// Few output tiles with a long K: prepared ops on the Hopper path split K
// over the idle SMs and sum the splits in a second kernel, or in the kernel
// itself with the 128 x 128 / 128 x 64 tiles (one-shot calls never split,
// having no workspace). Every layout and output dtype, beta 0
// (NaN-poisoned C) and not, K not a multiple of the 64-wide K step.
// Plus the squares 512^3 - 1024^3 (the bench's shapes).
TEST_F(GpuMatmul, SplitKShapesInPreparedOps) {
  every_layout({{17, 300, 4096},
                {128, 256, 4104},
                {129, 1000, 1000},
                {200, 7, 8192},
                {64, 513, 2048},
                {128, 4096, 4096},
                {512, 512, 512},
                {768, 768, 768},
                {1024, 1024, 1024}},
               [](int) { return true; });
}

// K split over a cluster of CTAs (the _k<S> kernels: a tile's partials summed
// in rank order through distributed shared memory), one-shot calls and
// prepared ops alike. With the H100's cluster counts the cost model routes
// these shapes to each of the cluster kernels (KAIO_LOG names them;
// bench/RESULTS.md, sessions 22 and 23): 64 x 513 x 2048 and 512 x 1024 x
// 2048 on 128 x 64 tiles split 4 and 2 ways; 256 x 1280 x 2048, 384 x 1536 x
// 4096 and 200 x 4000 x 3000 on 128 x 128 tiles split 4, 3 and 2 ways (K
// tails in the last split). Every layout and output dtype, beta 0
// (NaN-poisoned C) and not, padded rows; MN-major B of two 64-wide panels on
// ranks >= 1 is what the descriptors' CTA-local addresses fixed.
TEST_F(GpuMatmul, ClusterSplitShapes) {
  every_layout({{64, 513, 2048}, {512, 1024, 2048}, {256, 1280, 2048}, {384, 1536, 4096},
                {200, 4000, 3000}},
               [](int i) { return (i / 8 + i / 2) % 2 == 0; });
}

// The 64 x 64 tiles (_m64: one consumer warpgroup, two CTAs an SM), where the
// cost model sends few-tile products of at most 16 K steps (KAIO_LOG names
// them; bench/RESULTS.md, session 23): one tile alone on an SM (17 x 300 x
// 520, 65 x 129 x 72), one CTA an SM (300 x 700 x 1000), two to most SMs
// (1000^3, 96 x 2000 x 520); M, N and K off the tile. Every layout and
// output dtype, beta 0 (NaN-poisoned C) and not, padded rows.
TEST_F(GpuMatmul, SixtyFourRowTiles) {
  every_layout({{17, 300, 520}, {65, 129, 72}, {300, 700, 1000}, {1000, 1000, 1000},
                {96, 2000, 520}},
               [](int i) { return (i / 4 + i) % 2 == 0; });
}

// The splits are summed in a fixed order: the same inputs give the same bits
// (8 tiles of 128 x 64, K split over the idle SMs: by whichever CTA finishes
// a tile last, or over a cluster).
TEST_F(GpuMatmul, SplitKIsDeterministic) {
  const int64_t m = 128, n = 512, k = 8192;
  kt::HostTensor a = kt::random_tensor(KAIO_DTYPE_F16, m * k, -1, 1, kt::test_seed() + 71);
  kt::HostTensor b = kt::random_tensor(KAIO_DTYPE_F16, n * k, -1, 1, kt::test_seed() + 72);
  kt::Buffer ba = kt::make_buffer(dev(), m * k * 2), bb = kt::make_buffer(dev(), n * k * 2),
             bc = kt::make_buffer(dev(), m * n * 4);
  KT_OK(kaio_buffer_write(ba.get(), 0, a.bytes.data(), a.bytes.size()));
  KT_OK(kaio_buffer_write(bb.get(), 0, b.bytes.data(), b.bytes.size()));
  kaio_matmul_desc d;
  KT_OK(kaio_matmul_desc_init(&d, sizeof d));
  d.trans_b = KAIO_TRANS_T;
  d.m = m;
  d.n = n;
  d.k = k;
  kaio_op *raw = nullptr;
  KT_OK(kaio_op_create_matmul(&raw, dev(), &d));
  kt::Op op(raw);
  kaio_tensor t[] = {kaio_tensor_2d(ba.get(), KAIO_DTYPE_F16, m, k),
                     kaio_tensor_2d(bb.get(), KAIO_DTYPE_F16, n, k),
                     kaio_tensor_2d(bc.get(), KAIO_DTYPE_F32, m, n)};
  std::vector<float> first(m * n), again(m * n);
  for (int run = 0; run < 5; ++run) {
    KT_OK(kaio_buffer_memset(bc.get(), stream(), 0, 0xFF, m * n * 4));
    KT_OK(kaio_op_launch(op.get(), stream(), t, 3));
    KT_OK(kaio_stream_synchronize(stream()));
    KT_OK(kaio_buffer_read(bc.get(), 0, (run ? again : first).data(), m * n * 4));
    if (run) {
      ASSERT_EQ(std::memcmp(first.data(), again.data(), m * n * 4), 0) << "run " << run;
    }
  }
  double err2 = 0, ref2 = 0;
  for (int64_t r : {int64_t{0}, int64_t{77}, m - 1})
    for (int64_t col = 0; col < n; ++col) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) acc += a.values[r * k + kk] * b.values[col * k + kk];
      err2 += (first[r * n + col] - acc) * (first[r * n + col] - acc);
      ref2 += acc * acc;
    }
  EXPECT_LE(std::sqrt(err2 / ref2), 1e-4);
}

TEST_F(GpuMatmul, KaioNamedEntryPoints) {
  const int64_t m = 200, n = 72, k = 40;
  for (int which = 0; which < 4; ++which) {
    kaio_dtype in = which < 2 ? KAIO_DTYPE_F16 : KAIO_DTYPE_BF16;
    kt::HostTensor a = kt::random_tensor(in, m * k, -2, 2, kt::test_seed() + which);
    kt::HostTensor b = kt::random_tensor(in, k * n, -2, 2, kt::test_seed() + 10 + which);
    kt::Buffer ba = kt::make_buffer(dev(), m * k * 2), bb = kt::make_buffer(dev(), k * n * 2),
               bc = kt::make_buffer(dev(), m * n * 4), bd = kt::make_buffer(dev(), m * n * 4);
    KT_OK(kaio_buffer_write(ba.get(), 0, a.bytes.data(), a.bytes.size()));
    KT_OK(kaio_buffer_write(bb.get(), 0, b.bytes.data(), b.bytes.size()));
    kaio_tensor ta = kaio_tensor_2d(ba.get(), in, m, k), tb = kaio_tensor_2d(bb.get(), in, k, n);
    kaio_tensor tc = kaio_tensor_2d(bc.get(), KAIO_DTYPE_F32, m, n);
    kaio_tensor td = kaio_tensor_2d(bd.get(), KAIO_DTYPE_F32, m, n);
    kaio_op *op = nullptr;
    switch (which) {
      case 0: KT_OK(kaio_matmul_tc(stream(), &ta, &tb, &tc)); KT_OK(kaio_op_create_matmul_tc(&op, dev(), m, n, k)); break;
      case 1: KT_OK(kaio_matmul_tc_async(stream(), &ta, &tb, &tc)); KT_OK(kaio_op_create_matmul_tc_async(&op, dev(), m, n, k)); break;
      case 2: KT_OK(kaio_matmul_tc_bf16(stream(), &ta, &tb, &tc)); KT_OK(kaio_op_create_matmul_tc_bf16(&op, dev(), m, n, k)); break;
      case 3: KT_OK(kaio_matmul_tc_bf16_async(stream(), &ta, &tb, &tc)); KT_OK(kaio_op_create_matmul_tc_bf16_async(&op, dev(), m, n, k)); break;
    }
    kt::Op guard(op);
    kaio_tensor t[] = {ta, tb, td};
    KT_OK(kaio_op_launch(op, stream(), t, 3));
    KT_OK(kaio_stream_synchronize(stream()));
    std::vector<float> c(m * n), d(m * n);
    KT_OK(kaio_buffer_read(bc.get(), 0, c.data(), c.size() * 4));
    KT_OK(kaio_buffer_read(bd.get(), 0, d.data(), d.size() * 4));
    EXPECT_EQ(std::memcmp(c.data(), d.data(), c.size() * 4), 0) << "one-shot and op differ";
    double err2 = 0, ref2 = 0;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t col = 0; col < n; ++col) {
        double acc = 0;
        for (int64_t kk = 0; kk < k; ++kk) acc += a.values[r * k + kk] * b.values[kk * n + col];
        err2 += (c[r * n + col] - acc) * (c[r * n + col] - acc);
        ref2 += acc * acc;
      }
    EXPECT_LE(std::sqrt(err2 / ref2), 1e-4) << "entry point " << which;
  }
}

}  // namespace

namespace {

// dA = dC·Bᵀ + beta·dA and dB = Aᵀ·dC + beta·dB against f64, with a random
// upstream gradient (never all ones), f16 and f32 dC, and accumulation.
TEST_F(GpuMatmul, BackwardMatchesReference) {
  struct Shape {
    int64_t m, n, k;
  };
  int idx = 0;
  for (Shape s : {Shape{8, 8, 8}, Shape{136, 264, 72}, Shape{1000, 512, 384}})
    for (bool f32_grad : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        const kaio_dtype in = (idx++ % 2) ? KAIO_DTYPE_BF16 : KAIO_DTYPE_F16;
        const kaio_dtype grad = f32_grad ? KAIO_DTYPE_F32 : in;
        SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " in "
                                          << kaio_dtype_name(in) << " dC "
                                          << kaio_dtype_name(grad) << " beta " << beta);
        uint64_t seed = kt::test_seed() + idx * 101;
        kt::HostTensor a = kt::random_tensor(in, s.m * s.k, -1, 1, seed);
        kt::HostTensor b = kt::random_tensor(in, s.k * s.n, -1, 1, seed + 1);
        kt::HostTensor g = kt::random_tensor(grad, s.m * s.n, -1, 1, seed + 2);
        kt::HostTensor da0 = kt::random_tensor(KAIO_DTYPE_F32, s.m * s.k, -1, 1, seed + 3);
        kt::HostTensor db0 = kt::random_tensor(KAIO_DTYPE_F32, s.k * s.n, -1, 1, seed + 4);
        kt::Buffer ba = kt::make_buffer(dev(), a.bytes.size()), bb = kt::make_buffer(dev(), b.bytes.size()),
                   bg = kt::make_buffer(dev(), g.bytes.size()), bda = kt::make_buffer(dev(), da0.bytes.size()),
                   bdb = kt::make_buffer(dev(), db0.bytes.size());
        KT_OK(kaio_buffer_write(ba.get(), 0, a.bytes.data(), a.bytes.size()));
        KT_OK(kaio_buffer_write(bb.get(), 0, b.bytes.data(), b.bytes.size()));
        KT_OK(kaio_buffer_write(bg.get(), 0, g.bytes.data(), g.bytes.size()));
        if (beta != 0.0f) {
          KT_OK(kaio_buffer_write(bda.get(), 0, da0.bytes.data(), da0.bytes.size()));
          KT_OK(kaio_buffer_write(bdb.get(), 0, db0.bytes.data(), db0.bytes.size()));
        } else {
          KT_OK(kaio_buffer_memset(bda.get(), stream(), 0, 0xFF, da0.bytes.size()));
          KT_OK(kaio_buffer_memset(bdb.get(), stream(), 0, 0xFF, db0.bytes.size()));
        }
        kaio_matmul_backward_desc d;
        KT_OK(kaio_matmul_backward_desc_init(&d, sizeof d));
        d.in_dtype = in;
        d.grad_dtype = grad;
        d.m = s.m;
        d.n = s.n;
        d.k = s.k;
        d.beta = beta;
        kaio_op *op = nullptr;
        KT_OK(kaio_op_create_matmul_backward(&op, dev(), &d));
        kt::Op guard(op);
        kaio_tensor t[] = {kaio_tensor_2d(bg.get(), grad, s.m, s.n),
                           kaio_tensor_2d(ba.get(), in, s.m, s.k),
                           kaio_tensor_2d(bb.get(), in, s.k, s.n),
                           kaio_tensor_2d(bda.get(), KAIO_DTYPE_F32, s.m, s.k),
                           kaio_tensor_2d(bdb.get(), KAIO_DTYPE_F32, s.k, s.n)};
        KT_OK(kaio_op_launch(op, stream(), t, 5));
        KT_OK(kaio_stream_synchronize(stream()));
        std::vector<float> da(s.m * s.k), db(s.k * s.n);
        KT_OK(kaio_buffer_read(bda.get(), 0, da.data(), da.size() * 4));
        KT_OK(kaio_buffer_read(bdb.get(), 0, db.data(), db.size() * 4));
        // An f32 dC is rounded to the input dtype first: so is the reference.
        std::vector<double> gv = g.values;
        if (grad == KAIO_DTYPE_F32)
          for (double &v : gv)
            v = in == KAIO_DTYPE_F16 ? kt::f16_to_f32(kt::f32_to_f16(static_cast<float>(v)))
                                     : kt::bf16_to_f32(kt::f32_to_bf16(static_cast<float>(v)));
        double e2 = 0, r2 = 0;
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.k; ++j) {
            double acc = 0;
            for (int64_t c = 0; c < s.n; ++c) acc += gv[i * s.n + c] * b.values[j * s.n + c];
            double want = acc + beta * da0.values[i * s.k + j];
            e2 += (da[i * s.k + j] - want) * (da[i * s.k + j] - want);
            r2 += want * want;
          }
        EXPECT_LE(std::sqrt(e2 / r2), 1e-4) << "dA";
        e2 = r2 = 0;
        for (int64_t j = 0; j < s.k; ++j)
          for (int64_t c = 0; c < s.n; ++c) {
            double acc = 0;
            for (int64_t i = 0; i < s.m; ++i) acc += a.values[i * s.k + j] * gv[i * s.n + c];
            double want = acc + beta * db0.values[j * s.n + c];
            e2 += (db[j * s.n + c] - want) * (db[j * s.n + c] - want);
            r2 += want * want;
          }
        EXPECT_LE(std::sqrt(e2 / r2), 1e-4) << "dB";
      }
}

}  // namespace
