// k-quant kernels on the GPU against the C++ reference (tests/support/
// kquant_ref, itself checked byte for byte against ggml's library in GGML
// mode and against candle-core's QTensor::quantize in CANDLE mode):
//  * quantize: every format x mode x input dtype x input distribution,
//    the edges of the f32 range included (1e-30 down to subnormals, 1e7 up
//    to 3e38, both mixed with ordinary values, ±0 blocks; f16 inputs within
//    f16's range), 0 differing blocks; odd row counts, padded strides,
//    outputs poisoned; one edge block alone in a row;
//  * dequantize: f32 bit-identical to the reference, f16/bf16 its RNE rounding;
//  * dequant-matmul: against an f64 product of the reference's dequantized
//    weights and the same rounded activations. Tolerance (Frobenius norm of
//    the error over that of sum_k |a_k w_k|, the scale of f32 rounding):
//    matvec (M <= 8) f32 accumulation (and f32 A split into f16 hi + lo, 22
//    bits): 1e-5, plus one f16 output rounding (2^-11) for f16 C;
//    tensor-core path (M > 8): the weights (and f32 A) are rounded to
//    f16/bf16 first, so 2^-9 (f16) or 2^-6 (bf16) on top.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <iterator>
#include <vector>

#include "support/kaio_test.hpp"
#include "support/kquant_inputs.hpp"
#include "support/kquant_ref.hpp"

namespace {

using kqref::Dist;
using kqref::Format;
using kqref::Mode;

constexpr Format kFormats[] = {Format::q8_0, Format::q4_k, Format::q5_k, Format::q6_k};
constexpr kaio_dtype kFloatTypes[] = {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16};

kaio_quant_format api_format(Format f) { return static_cast<kaio_quant_format>(static_cast<int>(f) + 1); }

// Rounds values to dtype; returns the storage bytes and the rounded values.
std::vector<uint8_t> to_dtype(kaio_dtype dt, std::vector<float> *values) {
  std::vector<uint8_t> bytes(values->size() * kaio_dtype_size(dt));
  for (size_t i = 0; i < values->size(); ++i) {
    float v = (*values)[i];
    if (dt == KAIO_DTYPE_F32) {
      std::memcpy(&bytes[4 * i], &v, 4);
      continue;
    }
    uint16_t h = dt == KAIO_DTYPE_F16 ? kt::f32_to_f16(v) : kt::f32_to_bf16(v);
    (*values)[i] = dt == KAIO_DTYPE_F16 ? kt::f16_to_f32(h) : kt::bf16_to_f32(h);
    std::memcpy(&bytes[2 * i], &h, 2);
  }
  return bytes;
}

class GpuKquant : public kt::GpuTest {
 protected:
  // Quantizes rows x cols of `dist` on the GPU (x and q rows padded by the
  // given elements / bytes) and returns the number of blocks that differ
  // from the reference.
  int64_t quantize_mismatches(Format f, Mode mode, kaio_dtype dt, Dist dist, int64_t rows,
                              int64_t cols, int64_t x_pad, int64_t q_pad, bool prepared) {
    const int64_t be = kqref::block_elems(f), bb = kqref::block_bytes(f);
    const int64_t row_bytes = cols / be * bb, ldx = cols + x_pad, ldq = row_bytes + q_pad;
    // f16 inputs take the edge distributions within f16's range (1e7 would
    // be infinite there); bf16 has f32's range
    std::vector<float> x = kqref::make_inputs(dist, rows * ldx, kt::test_seed() + rows,
                                              dt == KAIO_DTYPE_F16 ? kqref::Range::f16 : kqref::Range::f32);
    std::vector<uint8_t> xb = to_dtype(dt, &x);
    kt::Buffer xbuf = upload(xb.data(), xb.size());
    kt::Buffer qbuf = kt::make_buffer(dev(), static_cast<uint64_t>(rows * ldq));
    EXPECT_EQ(kaio_buffer_memset(qbuf.get(), stream(), 0, 0xA5, rows * ldq), KAIO_OK);
    kaio_tensor xt = kaio_tensor_2d(xbuf.get(), dt, rows, cols);
    xt.row_stride = ldx;
    kaio_tensor qt = kaio_tensor_2d(qbuf.get(), KAIO_DTYPE_U8, rows, row_bytes);
    qt.row_stride = ldq;
    kaio_quant_mode m = mode == Mode::ggml ? KAIO_QUANT_MODE_GGML : KAIO_QUANT_MODE_CANDLE;
    if (prepared) {
      kaio_op *op = nullptr;
      EXPECT_EQ(kaio_op_create_quantize(&op, dev(), api_format(f), m, dt, rows, cols), KAIO_OK)
          << kaio_last_error();
      kt::Op owned(op);
      const kaio_tensor t[] = {xt, qt};
      EXPECT_EQ(kaio_op_launch(op, stream(), t, 2), KAIO_OK) << kaio_last_error();
    } else {
      EXPECT_EQ(kaio_quantize(stream(), &xt, &qt, api_format(f), m), KAIO_OK) << kaio_last_error();
    }
    std::vector<uint8_t> got = download(qbuf.get(), static_cast<size_t>(rows * ldq));
    std::vector<uint8_t> want(static_cast<size_t>(row_bytes));
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; ++r) {
      kqref::quantize_row(f, mode, &x[static_cast<size_t>(r * ldx)], cols, want.data());
      for (int64_t b = 0; b < row_bytes / bb; ++b)
        if (std::memcmp(&got[static_cast<size_t>(r * ldq + b * bb)], &want[static_cast<size_t>(b * bb)],
                        static_cast<size_t>(bb)) != 0)
          ++bad;
      for (int64_t p = row_bytes; p < ldq; ++p)  // padding untouched
        if (got[static_cast<size_t>(r * ldq + p)] != 0xA5) ++bad;
    }
    return bad;
  }
};

TEST_F(GpuKquant, QuantizeIsByteIdenticalToTheReferenceOnEveryDistribution) {
  for (Format f : kFormats)
    for (Mode mode : {Mode::ggml, Mode::candle})
      for (kaio_dtype dt : kFloatTypes)
        for (int di = 0; di < static_cast<int>(Dist::count); ++di) {
          const Dist dist = static_cast<Dist>(di);
          SCOPED_TRACE(std::string(kqref::format_name(f)) + " " + kqref::mode_name(mode) + " " +
                       kaio_dtype_name(dt) + " " + kqref::dist_name(dist));
          EXPECT_EQ(quantize_mismatches(f, mode, dt, dist, 37, 2048, 0, 0, di % 2 == 1), 0);
        }
}

TEST_F(GpuKquant, QuantizeOddShapesAndPaddedStrides) {
  for (Format f : kFormats)
    for (Mode mode : {Mode::ggml, Mode::candle})
      for (int64_t rows : {1, 3, 129}) {
        SCOPED_TRACE(std::string(kqref::format_name(f)) + " " + kqref::mode_name(mode) +
                     " rows " + std::to_string(rows));
        const int64_t cols = f == Format::q8_0 ? 32 * 7 : 256 * 3;
        EXPECT_EQ(quantize_mismatches(f, mode, KAIO_DTYPE_F32, Dist::uniform, rows, cols, 0, 0, false), 0);
        EXPECT_EQ(quantize_mismatches(f, mode, KAIO_DTYPE_BF16, Dist::outliers, rows, cols, 8, 16, true), 0);
      }
}

// The named edge superblocks (kqref::edge_blocks), one a row, so a
// mismatch names its case.
TEST_F(GpuKquant, QuantizeEdgeBlocksByteIdentical) {
  for (kaio_dtype dt : kFloatTypes) {
    const std::vector<kqref::EdgeBlock> edges =
        kqref::edge_blocks(dt == KAIO_DTYPE_F16 ? kqref::Range::f16 : kqref::Range::f32);
    const int64_t rows = static_cast<int64_t>(edges.size()), cols = 256;
    std::vector<float> x;
    for (const kqref::EdgeBlock &e : edges) x.insert(x.end(), e.x.begin(), e.x.end());
    std::vector<uint8_t> xb = to_dtype(dt, &x);
    kt::Buffer xbuf = upload(xb.data(), xb.size());
    for (Format f : kFormats)
      for (Mode mode : {Mode::ggml, Mode::candle}) {
        SCOPED_TRACE(std::string(kqref::format_name(f)) + " " + kqref::mode_name(mode) + " from " +
                     kaio_dtype_name(dt));
        const int64_t row_bytes = cols / kqref::block_elems(f) * kqref::block_bytes(f);
        kt::Buffer qbuf = kt::make_buffer(dev(), static_cast<uint64_t>(rows * row_bytes));
        ASSERT_EQ(kaio_buffer_memset(qbuf.get(), stream(), 0, 0xA5, rows * row_bytes), KAIO_OK);
        kaio_tensor xt = kaio_tensor_2d(xbuf.get(), dt, rows, cols);
        kaio_tensor qt = kaio_tensor_2d(qbuf.get(), KAIO_DTYPE_U8, rows, row_bytes);
        KT_OK(kaio_quantize(stream(), &xt, &qt, api_format(f),
                            mode == Mode::ggml ? KAIO_QUANT_MODE_GGML : KAIO_QUANT_MODE_CANDLE));
        const std::vector<uint8_t> got = download(qbuf.get(), static_cast<size_t>(rows * row_bytes));
        std::vector<uint8_t> want(static_cast<size_t>(row_bytes));
        for (int64_t r = 0; r < rows; ++r) {
          kqref::quantize_row(f, mode, &x[static_cast<size_t>(r * cols)], cols, want.data());
          EXPECT_EQ(std::memcmp(&got[static_cast<size_t>(r * row_bytes)], want.data(), want.size()), 0)
              << edges[static_cast<size_t>(r)].name;
        }
      }
  }
}

TEST_F(GpuKquant, DequantizeMatchesTheReference) {
  for (Format f : kFormats)
    for (kaio_dtype dt : kFloatTypes) {
      SCOPED_TRACE(std::string(kqref::format_name(f)) + " -> " + kaio_dtype_name(dt));
      const int64_t rows = 13, cols = 256 * 5, be = kqref::block_elems(f);
      const int64_t row_bytes = cols / be * kqref::block_bytes(f);
      std::vector<float> x = kqref::make_inputs(Dist::outliers, rows * cols, kt::test_seed());
      std::vector<uint8_t> q(static_cast<size_t>(rows * row_bytes));
      std::vector<float> want(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        kqref::quantize_row(f, Mode::ggml, &x[static_cast<size_t>(r * cols)], cols, &q[static_cast<size_t>(r * row_bytes)]);
        kqref::dequantize_row(f, &q[static_cast<size_t>(r * row_bytes)], cols, &want[static_cast<size_t>(r * cols)]);
      }
      kt::Buffer qbuf = upload(q.data(), q.size());
      const size_t ybytes = x.size() * kaio_dtype_size(dt);
      kt::Buffer ybuf = kt::make_buffer(dev(), ybytes);
      ASSERT_EQ(kaio_buffer_memset(ybuf.get(), stream(), 0, 0xFF, ybytes), KAIO_OK);  // NaN poison
      kaio_tensor qt = kaio_tensor_2d(qbuf.get(), KAIO_DTYPE_U8, rows, row_bytes);
      kaio_tensor yt = kaio_tensor_2d(ybuf.get(), dt, rows, cols);
      KT_OK(kaio_dequantize(stream(), &qt, &yt, api_format(f)));
      std::vector<uint8_t> got = download(ybuf.get(), ybytes);
      std::vector<float> want_rounded = want;
      std::vector<uint8_t> want_bytes = to_dtype(dt, &want_rounded);
      EXPECT_EQ(std::memcmp(got.data(), want_bytes.data(), ybytes), 0);
    }
}

// C = A · dequant(W)ᵀ against an f64 reference; see the file comment for
// the tolerances.
TEST_F(GpuKquant, QuantMatmulMatchesTheF64Reference) {
  struct Shape { int64_t m, n, k; };
  // Before sm_90, K > 32 x 256 (8448, 12800) runs the 8-warp tensor-core
  // matvec and smaller K its 4-warp variant. On sm_90 the streaming kernel
  // (one CTA per SM, 16-row tiles, stages of 16 blocks per row, Q8_0 64)
  // takes them all but an A too large for shared memory, and these reach its
  // corners:
  // - (1, 2113, 2048): more tiles than an H100's 132 SMs, the last one 1 row;
  // - (2, 4300, 512): up to 3 tiles per CTA and 2-block stages;
  // - (1, 40, 2304): a last stage of 1 block;
  // - (3, 300, 14336): 7 stages per tile through a ring of 3, or of 2 where A
  //   leaves no room for 3 (Q6_K);
  // - (2, 37, 14336): f32 A (and Q8_0's bf16 A, split likewise), through a
  //   ring of 2 for Q5_K and Q6_K;
  // - (8, 20, 8448): a ring of 2 for Q4_K (f16, bf16 A) and Q8_0 (f16 A);
  // - (4, 40, 2048): Q6_K streamed with M > 1;
  // - K not a multiple of 2048 (Q6_K) or 128 (Q8_0, 4 blocks a warp), and
  //   odd N: rows at any even address, copied in 16-byte windows.
  // A's rows are padded (lda = K + 8) for every M <= 8.
  const Shape shapes[] = {{1, 1, 256}, {1, 67, 1024}, {3, 130, 512}, {5, 8, 256},
                          {8, 31, 768}, {9, 40, 256}, {33, 129, 512}, {2, 17, 8448},
                          {7, 5, 12800}, {1, 2113, 2048}, {2, 4300, 512}, {1, 40, 2304},
                          {3, 300, 14336}, {2, 37, 14336}, {8, 20, 8448}, {4, 40, 2048}};
  // Q8_0 only: rows of 35 and 19 blocks, so a stage's last warp has 1-3
  // blocks of its 4 (the others are skipped)
  const Shape q8_only[] = {{2, 45, 1120}, {1, 19, 608}};
  auto shapes_of = [&](Format f) {
    std::vector<Shape> out(std::begin(shapes), std::end(shapes));
    if (f == Format::q8_0) out.insert(out.end(), std::begin(q8_only), std::end(q8_only));
    return out;
  };
  for (Format f : kFormats)
    for (kaio_dtype adt : kFloatTypes)
      for (kaio_dtype odt : {KAIO_DTYPE_F32, KAIO_DTYPE_F16})
        for (const Shape &s : shapes_of(f)) {
          SCOPED_TRACE(std::string(kqref::format_name(f)) + " A " + kaio_dtype_name(adt) +
                       " C " + kaio_dtype_name(odt) + " " + std::to_string(s.m) + "x" +
                       std::to_string(s.n) + "x" + std::to_string(s.k));
          const int64_t be = kqref::block_elems(f), row_bytes = s.k / be * kqref::block_bytes(f);
          std::vector<float> wv = kqref::make_inputs(Dist::uniform, s.n * s.k, kt::test_seed() + 5);
          std::vector<uint8_t> wq(static_cast<size_t>(s.n * row_bytes));
          std::vector<float> wd(wv.size());
          for (int64_t r = 0; r < s.n; ++r) {
            kqref::quantize_row(f, Mode::ggml, &wv[static_cast<size_t>(r * s.k)], s.k, &wq[static_cast<size_t>(r * row_bytes)]);
            kqref::dequantize_row(f, &wq[static_cast<size_t>(r * row_bytes)], s.k, &wd[static_cast<size_t>(r * s.k)]);
          }
          std::vector<float> av = kqref::make_inputs(Dist::uniform, s.m * s.k, kt::test_seed() + 9);
          const std::vector<uint8_t> packed = to_dtype(adt, &av);
          // M <= 8: A's rows padded by 8 values of poison (0xFF: NaN), which no
          // kernel may read (M > 8 with f32 A takes only a contiguous A)
          const size_t esize = kaio_dtype_size(adt), lda = static_cast<size_t>(s.k) + (s.m <= 8 ? 8 : 0);
          std::vector<uint8_t> ab(static_cast<size_t>(s.m) * lda * esize, 0xFF);
          for (int64_t r = 0; r < s.m; ++r)
            std::copy_n(&packed[static_cast<size_t>(r * s.k) * esize], static_cast<size_t>(s.k) * esize,
                        &ab[static_cast<size_t>(r) * lda * esize]);
          // W's buffer 16 bytes longer than W: sm_90 streams Q6_K and Q8_0 rows
          // in 16-byte windows, which may reach past W's last byte (the host
          // test covers the buffer that ends there)
          std::vector<uint8_t> wpad(wq);
          wpad.resize(wq.size() + 16, 0xA5);
          kt::Buffer abuf = upload(ab.data(), ab.size()), wbuf = upload(wpad.data(), wpad.size());
          const size_t cbytes = static_cast<size_t>(s.m * s.n) * kaio_dtype_size(odt);
          kt::Buffer cbuf = kt::make_buffer(dev(), cbytes);
          ASSERT_EQ(kaio_buffer_memset(cbuf.get(), stream(), 0, 0xFF, cbytes), KAIO_OK);
          kaio_tensor t[] = {kaio_tensor_2d(abuf.get(), adt, s.m, s.k),
                             kaio_tensor_2d(wbuf.get(), KAIO_DTYPE_U8, s.n, row_bytes),
                             kaio_tensor_2d(cbuf.get(), odt, s.m, s.n)};
          t[0].row_stride = static_cast<int64_t>(lda);
          if (s.m <= 8) {
            KT_OK(kaio_quant_matmul(stream(), &t[0], &t[1], &t[2], api_format(f)));
            // a rerun must give the same bits (the split-K sums have a fixed order)
            const std::vector<uint8_t> first = download(cbuf.get(), cbytes);
            ASSERT_EQ(kaio_buffer_memset(cbuf.get(), stream(), 0, 0xFF, cbytes), KAIO_OK);
            KT_OK(kaio_quant_matmul(stream(), &t[0], &t[1], &t[2], api_format(f)));
            ASSERT_EQ(download(cbuf.get(), cbytes), first) << "results differ between runs";
          } else {
            kaio_op *op = nullptr;
            KT_OK(kaio_op_create_quant_matmul(&op, dev(), api_format(f), adt, odt, s.m, s.n, s.k));
            kt::Op owned(op);
            KT_OK(kaio_op_launch(op, stream(), t, 3));
          }
          // Error measured against sum_k |a_k w_k| per output (normwise over
          // C), the scale of f32 rounding in any summation order: against |C|
          // itself one output whose terms cancel (seen with N = 1, K = 256,
          // Q4_K/Q5_K, where the min part is subtracted) fails at ~2e-5.
          std::vector<double> got = kt::decode(odt, download(cbuf.get(), cbytes));
          double err = 0, norm = 0;
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) {
              double ref = 0, mag = 0;
              for (int64_t kk = 0; kk < s.k; ++kk) {
                const double term = static_cast<double>(av[static_cast<size_t>(i * s.k + kk)]) *
                                    wd[static_cast<size_t>(j * s.k + kk)];
                ref += term;
                mag += std::fabs(term);
              }
              double g = got[static_cast<size_t>(i * s.n + j)];
              ASSERT_TRUE(std::isfinite(g)) << "C[" << i << "," << j << "] not written";
              err += (g - ref) * (g - ref);
              norm += mag * mag;
            }
          double tol = 1e-5 + (odt == KAIO_DTYPE_F16 ? std::ldexp(1.0, -11) : 0.0);
          if (s.m > 8) tol += adt == KAIO_DTYPE_BF16 ? std::ldexp(1.0, -6) : std::ldexp(1.0, -9);
          EXPECT_LE(std::sqrt(err / norm), tol);
        }
}

}  // namespace
