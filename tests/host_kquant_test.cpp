// The k-quant ABI on the fake driver: block sizes, the kernel and grid each
// op launches, and every bad input's status and message (naming the
// function, the argument and the value) with no launch.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

class FakeKquant : public ::testing::Test {
 public:  // the bad-input table's lambdas use the fixture's objects
  void SetUp() override {
    if (!kt::on_fake_driver())
      GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host), which sets "
                      "LIBKAIO_CUDA_DRIVER";
    dev_ = kt::open_device(0);
    ASSERT_TRUE(dev_);
    stream_ = kt::make_stream(dev_.get());
    buf_ = kt::make_buffer(dev_.get(), 1 << 20);
  }
  std::string last_kernel() {
    const kt::Launch l = kt::last_launch();
    grid_ = l.grid[0];
    block_ = l.block[0];
    shared_ = l.shared;
    return l.name;
  }
  kaio_tensor at(kaio_dtype dt, int64_t rows, int64_t cols, uint64_t offset) {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), dt, rows, cols);
    t.offset_bytes = offset;
    return t;
  }
  kt::Device dev_;
  kt::Stream stream_;
  kt::Buffer buf_;
  unsigned grid_ = 0, block_ = 0, shared_ = 0;
};

TEST(KquantAbi, BlockSizesAndRowBytes) {
  EXPECT_EQ(kaio_quant_block_elems(KAIO_QUANT_Q8_0), 32);
  EXPECT_EQ(kaio_quant_block_bytes(KAIO_QUANT_Q8_0), 34);
  EXPECT_EQ(kaio_quant_block_bytes(KAIO_QUANT_Q4_K), 144);
  EXPECT_EQ(kaio_quant_block_bytes(KAIO_QUANT_Q5_K), 176);
  EXPECT_EQ(kaio_quant_block_bytes(KAIO_QUANT_Q6_K), 210);
  EXPECT_EQ(kaio_quant_block_elems(KAIO_QUANT_Q6_K), 256);
  EXPECT_EQ(kaio_quant_row_bytes(KAIO_QUANT_Q6_K, 4096), 16 * 210);
  EXPECT_EQ(kaio_quant_row_bytes(KAIO_QUANT_Q4_K, 100), 0);
  EXPECT_EQ(kaio_quant_block_elems(0), 0);
  EXPECT_EQ(kaio_quant_row_bytes(9, 256), 0);
  // Q8_0 takes more bytes than values (34 per 32): the largest cols overflow
  // int64 and give 0; the largest that fits gives its exact size. K-quant rows
  // are smaller than cols, so any valid cols fits.
  EXPECT_EQ(kaio_quant_row_bytes(KAIO_QUANT_Q8_0, INT64_MAX / 32 * 32), 0);
  const int64_t fits = INT64_MAX / 34 * 32;
  EXPECT_EQ(kaio_quant_row_bytes(KAIO_QUANT_Q8_0, fits), INT64_MAX / 34 * 34);
  EXPECT_EQ(kaio_quant_row_bytes(KAIO_QUANT_Q6_K, INT64_MAX / 256 * 256), INT64_MAX / 256 * 210);
}

TEST_F(FakeKquant, EachOpLaunchesItsKernelOverTheWholeTensor) {
  // 3 rows of 512 f32 values at 0; their Q6_K bytes at 8192.
  kaio_tensor x = at(KAIO_DTYPE_F32, 3, 512, 0), q = at(KAIO_DTYPE_U8, 3, 420, 8192);
  KT_OK(kaio_quantize(stream_.get(), &x, &q, KAIO_QUANT_Q6_K, KAIO_QUANT_MODE_CANDLE));
  EXPECT_EQ(last_kernel(), "kaio_kq_quantize_q6_k_candle");
  EXPECT_EQ(grid_, 1u);  // 6 superblocks x 16 threads
  kaio_tensor x16 = at(KAIO_DTYPE_BF16, 3, 512, 0), q4 = at(KAIO_DTYPE_U8, 3, 288, 8192);
  KT_OK(kaio_quantize(stream_.get(), &x16, &q4, KAIO_QUANT_Q4_K, KAIO_QUANT_MODE_GGML));
  EXPECT_EQ(last_kernel(), "kaio_kq_quantize_q4_k_ggml");
  KT_OK(kaio_dequantize(stream_.get(), &q, &x, KAIO_QUANT_Q6_K));
  EXPECT_EQ(last_kernel(), "kaio_kq_dequantize_q6_k");
  // matvec: A 3 x 512 f16, W 40 x 512 Q8_0, C 3 x 40 f32: streamed on sm_90,
  // each row's chunk copied in its 16-byte window; a W 2 bytes off 16, or
  // one whose buffer ends inside the last row's window: the CUDA-core
  // kernel, 8 weight rows per CTA
  kaio_tensor a = at(KAIO_DTYPE_F16, 3, 512, 0), w = at(KAIO_DTYPE_U8, 40, 544, 16384),
              c = at(KAIO_DTYPE_F32, 3, 40, 65536);
  KT_OK(kaio_quant_matmul(stream_.get(), &a, &w, &c, KAIO_QUANT_Q8_0));
  EXPECT_EQ(last_kernel(), "kaio_kq_stream_q8_0_f16");
  EXPECT_EQ(kt::launch_param<unsigned>(12), 0u) << "16-byte aligned rows: plain copies";
  const unsigned q8_f16_shared = shared_;
  // bf16 and f32 A are held as their f16 hi + lo split only (4 bytes a
  // value against f16's 2)
  kaio_tensor a_bf = at(KAIO_DTYPE_BF16, 3, 512, 0), a_f32 = at(KAIO_DTYPE_F32, 3, 512, 0);
  KT_OK(kaio_quant_matmul(stream_.get(), &a_bf, &w, &c, KAIO_QUANT_Q8_0));
  EXPECT_EQ(last_kernel(), "kaio_kq_stream_q8_0_bf16");
  EXPECT_EQ(shared_ - q8_f16_shared, 3u * 512 * 2);
  KT_OK(kaio_quant_matmul(stream_.get(), &a_f32, &w, &c, KAIO_QUANT_Q8_0));
  EXPECT_EQ(last_kernel(), "kaio_kq_stream_q8_0_f32");
  EXPECT_EQ(shared_ - q8_f16_shared, 3u * 512 * 2);
  kaio_tensor w_off = at(KAIO_DTYPE_U8, 40, 544, 16386);
  KT_OK(kaio_quant_matmul(stream_.get(), &a, &w_off, &c, KAIO_QUANT_Q8_0));
  EXPECT_EQ(last_kernel(), "kaio_kq_matvec_q8_0_m4");
  EXPECT_EQ(grid_, 5u);
  // K = 480: rows of 15 blocks (510 bytes), at every even address
  kaio_tensor a480 = at(KAIO_DTYPE_F16, 3, 480, 0), w480 = at(KAIO_DTYPE_U8, 40, 510, 16384);
  KT_OK(kaio_quant_matmul(stream_.get(), &a480, &w480, &c, KAIO_QUANT_Q8_0));
  EXPECT_EQ(last_kernel(), "kaio_kq_stream_q8_0_f16");
  EXPECT_EQ(kt::launch_param<unsigned>(12), 1u) << "rows off 16 bytes: windows";
  kt::Buffer exact = kt::make_buffer(dev_.get(), 39 * 510);   // ends 2 bytes past a multiple of 16
  kaio_tensor w_end = kaio_tensor_2d(exact.get(), KAIO_DTYPE_U8, 39, 510);
  kaio_tensor c39 = at(KAIO_DTYPE_F32, 3, 39, 65536);
  KT_OK(kaio_quant_matmul(stream_.get(), &a480, &w_end, &c39, KAIO_QUANT_Q8_0));
  EXPECT_EQ(last_kernel(), "kaio_kq_matvec_q8_0_m4");
  kt::Buffer rounded = kt::make_buffer(dev_.get(), (39 * 510 + 15) / 16 * 16);  // holds the window
  kaio_tensor w_rounded = kaio_tensor_2d(rounded.get(), KAIO_DTYPE_U8, 39, 510);
  KT_OK(kaio_quant_matmul(stream_.get(), &a480, &w_rounded, &c39, KAIO_QUANT_Q8_0));
  EXPECT_EQ(last_kernel(), "kaio_kq_stream_q8_0_f16");
  // K-quants on sm_90 (the fake device): the streaming tensor-core matvec,
  // one CTA of 17 warps per SM (the fake has 4) and at most one per 16-row
  // tile, with A (M x K x 2 bytes) and its group sums at the end of its
  // shared memory
  auto matmul = [&](const kaio_tensor &av, const kaio_tensor &wv, const kaio_tensor &cv,
                    kaio_quant_format f) {
    const kaio_status st = kaio_quant_matmul(stream_.get(), &av, &wv, &cv, f);
    EXPECT_EQ(st, KAIO_OK) << kaio_last_error();
    return st == KAIO_OK ? last_kernel() : std::string("(failed)");
  };
  kaio_tensor w4 = at(KAIO_DTYPE_U8, 40, 288, 16384), a32 = at(KAIO_DTYPE_F32, 3, 512, 0),
              abf = at(KAIO_DTYPE_BF16, 3, 512, 0);
  EXPECT_EQ(matmul(a, w4, c, KAIO_QUANT_Q4_K), "kaio_kq_stream_q4_k_f16");
  EXPECT_EQ(grid_, 3u);  // 3 tiles of 16 rows
  EXPECT_EQ(block_, 544u);
  EXPECT_EQ(kt::launch_param<unsigned>(11), 3u) << "a ring of 3 stages";
  const unsigned shared_m3 = shared_;
  EXPECT_EQ(matmul(at(KAIO_DTYPE_F16, 1, 512, 0), w4, at(KAIO_DTYPE_F32, 1, 40, 65536), KAIO_QUANT_Q4_K),
            "kaio_kq_stream_q4_k_f16");
  EXPECT_EQ(shared_m3 - shared_, 2u * 512 * 2 + 3 * 2 * 16 * 2)
      << "two more rows of A and of its group sums (3 bf16 planes, 16 groups a row)";
  EXPECT_EQ(matmul(abf, w4, c, KAIO_QUANT_Q4_K), "kaio_kq_stream_q4_k_bf16");
  // 100 rows of Q5_K: 7 tiles, one CTA per SM
  EXPECT_EQ(matmul(abf, at(KAIO_DTYPE_U8, 100, 352, 16384), at(KAIO_DTYPE_F32, 3, 100, 65536),
                   KAIO_QUANT_Q5_K),
            "kaio_kq_stream_q5_k_bf16");
  EXPECT_EQ(grid_, 4u);
  // Q6_K rows at any even address stream too (K = 33 x 256: 6930-byte
  // rows); a W 2 bytes off 16 takes the register-fed kernel
  const kaio_tensor clong = at(KAIO_DTYPE_F32, 3, 40, 524288);
  EXPECT_EQ(matmul(at(KAIO_DTYPE_F16, 3, 8448, 0), at(KAIO_DTYPE_U8, 40, 33 * 210, 65536), clong,
                   KAIO_QUANT_Q6_K),
            "kaio_kq_stream_q6_k_f16");
  EXPECT_EQ(grid_, 3u);
  EXPECT_EQ(block_, 544u);
  EXPECT_EQ(kt::launch_param<unsigned>(12), 1u);
  // rows 16 mod 32 bytes apart (8 blocks, 1680 bytes) take the windows too,
  // which place them on their sectors; rows 0 mod 32 apart (16 blocks, 3360
  // bytes) from a 32-byte aligned W take plain copies
  const kaio_tensor a2k = at(KAIO_DTYPE_F16, 3, 2048, 0);
  EXPECT_EQ(matmul(a2k, at(KAIO_DTYPE_U8, 40, 8 * 210, 65536), clong, KAIO_QUANT_Q6_K),
            "kaio_kq_stream_q6_k_f16");
  EXPECT_EQ(kt::launch_param<unsigned>(12), 1u);
  EXPECT_EQ(matmul(at(KAIO_DTYPE_F16, 3, 4096, 0), at(KAIO_DTYPE_U8, 40, 16 * 210, 65536), clong,
                   KAIO_QUANT_Q6_K),
            "kaio_kq_stream_q6_k_f16");
  EXPECT_EQ(kt::launch_param<unsigned>(12), 0u);
  EXPECT_EQ(matmul(at(KAIO_DTYPE_F16, 3, 4096, 0), at(KAIO_DTYPE_U8, 40, 16 * 210, 65552), clong,
                   KAIO_QUANT_Q6_K),
            "kaio_kq_stream_q6_k_f16");
  EXPECT_EQ(kt::launch_param<unsigned>(12), 1u) << "W at 16 mod 32";
  EXPECT_EQ(matmul(a2k, at(KAIO_DTYPE_U8, 40, 8 * 210, 65538), clong, KAIO_QUANT_Q6_K),
            "kaio_kq_mma_q6_k_f16_w4");
  EXPECT_EQ(grid_, 3u);
  // an A of 8 x 8448 (132 KiB, 8.25 KiB of group sums) fits beside a ring
  // of 2 stages; one of 8 x 9472 (148 KiB) beside none: register-fed
  EXPECT_EQ(matmul(at(KAIO_DTYPE_F16, 8, 8448, 0), at(KAIO_DTYPE_U8, 40, 33 * 144, 262144),
                   at(KAIO_DTYPE_F32, 8, 40, 524288), KAIO_QUANT_Q4_K),
            "kaio_kq_stream_q4_k_f16");
  EXPECT_EQ(kt::launch_param<unsigned>(11), 2u);
  EXPECT_EQ(matmul(at(KAIO_DTYPE_F16, 8, 9472, 0), at(KAIO_DTYPE_U8, 40, 37 * 144, 262144),
                   at(KAIO_DTYPE_F32, 8, 40, 524288), KAIO_QUANT_Q4_K),
            "kaio_kq_mma_q4_k_f16");
  // f32 A streams too (4 bytes a value); one of 8 x 4096 (128 KiB) leaves
  // room for a ring of 2 stages only, one of 8 x 4864 for none: the
  // CUDA-core kernel
  EXPECT_EQ(matmul(a32, w4, c, KAIO_QUANT_Q4_K), "kaio_kq_stream_q4_k_f32");
  EXPECT_EQ(grid_, 3u);
  EXPECT_EQ(kt::launch_param<unsigned>(11), 3u);
  EXPECT_EQ(matmul(at(KAIO_DTYPE_F32, 8, 4096, 0), at(KAIO_DTYPE_U8, 40, 16 * 144, 262144),
                   at(KAIO_DTYPE_F32, 8, 40, 524288), KAIO_QUANT_Q4_K),
            "kaio_kq_stream_q4_k_f32");
  EXPECT_EQ(kt::launch_param<unsigned>(11), 2u) << "a ring of 2 stages";
  EXPECT_LE(shared_, 227u * 1024);
  EXPECT_GT(shared_, 8u * 4096 * 4);
  EXPECT_EQ(matmul(at(KAIO_DTYPE_F32, 8, 4864, 0), at(KAIO_DTYPE_U8, 40, 19 * 144, 262144),
                   at(KAIO_DTYPE_F32, 8, 40, 524288), KAIO_QUANT_Q4_K),
            "kaio_kq_matvec_q4_k_m8");
  EXPECT_EQ(grid_, 5u);
  // M > 8: dequantize into the op's workspace, then the tensor-core matmul
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_quant_matmul(&op, dev_.get(), KAIO_QUANT_Q8_0, KAIO_DTYPE_F16,
                                    KAIO_DTYPE_F32, 16, 40, 512));
  kt::Op owned(op);
  kaio_tensor t[] = {at(KAIO_DTYPE_F16, 16, 512, 0), w, at(KAIO_DTYPE_F32, 16, 40, 65536)};
  const unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op, stream_.get(), t, 3));
  EXPECT_EQ(kt::fake().launch_count() - before, 2u);
  EXPECT_NE(last_kernel().find("matmul"), std::string::npos);
}

// Before sm_90 (no bulk copies): K-quant matvecs with f16/bf16 A run the
// register-fed tensor-core kernels, 4 warps per CTA for rows of at most 32
// superblocks, else 8, one CTA per 16 rows. Runs in a child (threadsafe death
// test: a fresh process) with compute capability 8.0; exits 0 when all holds,
// else with the failed check's code.
[[noreturn]] void kquant_matvec_before_sm90() {
  const kt::FakeChild child("80", 1 << 20);
  auto launched = [](const char *want, unsigned want_grid, unsigned want_block) {
    const kt::Launch l = kt::last_launch();
    return l.name == want && l.grid[0] == want_grid && l.block[0] == want_block;
  };
  kaio_stream *stream = child.stream.get();
  kaio_tensor a = child.at(KAIO_DTYPE_F16, 3, 512, 0), abf = child.at(KAIO_DTYPE_BF16, 3, 512, 0),
              w4 = child.at(KAIO_DTYPE_U8, 40, 288, 16384), c = child.at(KAIO_DTYPE_F32, 3, 40, 65536);
  if (kaio_quant_matmul(stream, &a, &w4, &c, KAIO_QUANT_Q4_K) != KAIO_OK) std::_Exit(2);
  if (!launched("kaio_kq_mma_q4_k_f16_w4", 3, 128)) std::_Exit(3);
  if (kaio_quant_matmul(stream, &abf, &w4, &c, KAIO_QUANT_Q4_K) != KAIO_OK) std::_Exit(4);
  if (!launched("kaio_kq_mma_q4_k_bf16_w4", 3, 128)) std::_Exit(5);
  kaio_tensor along = child.at(KAIO_DTYPE_F16, 3, 8448, 0),
              wlong = child.at(KAIO_DTYPE_U8, 40, 33 * 176, 65536),
              clong = child.at(KAIO_DTYPE_F32, 3, 40, 524288);
  if (kaio_quant_matmul(stream, &along, &wlong, &clong, KAIO_QUANT_Q5_K) != KAIO_OK)
    std::_Exit(6);
  if (!launched("kaio_kq_mma_q5_k_f16", 3, 256)) std::_Exit(7);
  std::_Exit(0);
}

TEST(FakeKquantSm80, MatvecRunsTheRegisterFedKernels) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (!kt::on_fake_driver()) GTEST_SKIP() << "needs the fake driver: run through `meson test`";
  EXPECT_EXIT(kquant_matvec_before_sm90(), ::testing::ExitedWithCode(0), "");
}

struct BadCase {
  const char *name;
  kaio_status expected;
  std::vector<const char *> parts;
  std::function<kaio_status(FakeKquant &)> call;
};
// by name: gtest would otherwise print the struct's bytes, padding included
void PrintTo(const BadCase &c, std::ostream *os) { *os << c.name; }

class FakeKquantBad : public FakeKquant, public ::testing::WithParamInterface<BadCase> {};

// One-shot quantize of a 1 x 256 view at x_off with its blocks at q_off.
kaio_status quantize_at(FakeKquant &k, kaio_quant_format f, kaio_dtype q_dtype, int64_t q_cols,
                        uint64_t x_off, uint64_t q_off) {
  kaio_tensor x = k.at(KAIO_DTYPE_F32, 1, 256, x_off), q = k.at(q_dtype, 1, q_cols, q_off);
  return kaio_quantize(k.stream_.get(), &x, &q, f, 0);
}

kaio_status create_mm(FakeKquant &k, kaio_quant_format f, kaio_dtype out, int64_t kdim) {
  kaio_op *op = nullptr;
  kaio_status s = kaio_op_create_quant_matmul(&op, k.dev_.get(), f, KAIO_DTYPE_F16, out, 1, 8, kdim);
  kaio_op_destroy(op);
  return s;
}

kaio_status create_q(kaio_device *d, kaio_quant_format f, kaio_quant_mode m, kaio_dtype dt,
                     int64_t rows, int64_t cols) {
  kaio_op *op = nullptr;
  kaio_status s = kaio_op_create_quantize(&op, d, f, m, dt, rows, cols);
  kaio_op_destroy(op);
  return s;
}

std::vector<BadCase> bad_cases() {
  using V = std::vector<const char *>;
  return {
      {"unknown format", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_op_create_quantize", "'format'", "7"},
       [](FakeKquant &k) { return create_q(k.dev_.get(), 7, 0, KAIO_DTYPE_F32, 1, 256); }},
      {"unknown mode", KAIO_ERROR_INVALID_ARGUMENT, V{"'mode'", "5"},
       [](FakeKquant &k) { return create_q(k.dev_.get(), KAIO_QUANT_Q6_K, 5, KAIO_DTYPE_F32, 1, 256); }},
      {"int input", KAIO_ERROR_INVALID_DTYPE, V{"in_dtype", "i32"},
       [](FakeKquant &k) { return create_q(k.dev_.get(), KAIO_QUANT_Q6_K, 0, KAIO_DTYPE_I32, 1, 256); }},
      {"cols not a block multiple", KAIO_ERROR_INVALID_DIMENSION, V{"100", "KAIO_QUANT_Q4_K", "256"},
       [](FakeKquant &k) { return create_q(k.dev_.get(), KAIO_QUANT_Q4_K, 0, KAIO_DTYPE_F32, 1, 100); }},
      {"zero rows", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_op_create_quantize", "0 x 256"},
       [](FakeKquant &k) { return create_q(k.dev_.get(), KAIO_QUANT_Q8_0, 0, KAIO_DTYPE_F32, 0, 256); }},
      {"q not u8", KAIO_ERROR_INVALID_DTYPE, V{"kaio_quantize", "'q'", "U8"},
       [](FakeKquant &k) { return quantize_at(k, KAIO_QUANT_Q6_K, KAIO_DTYPE_I8, 210, 0, 4096); }},
      {"q wrong width", KAIO_ERROR_SHAPE_MISMATCH, V{"'q'", "1 x 200", "210"},
       [](FakeKquant &k) { return quantize_at(k, KAIO_QUANT_Q6_K, KAIO_DTYPE_U8, 200, 0, 4096); }},
      {"q odd offset", KAIO_ERROR_MISALIGNED, V{"'q'", "byte 1 of", "2 bytes"},
       [](FakeKquant &k) { return quantize_at(k, KAIO_QUANT_Q6_K, KAIO_DTYPE_U8, 210, 0, 4097); }},
      {"q4_k q not 16-aligned", KAIO_ERROR_MISALIGNED, V{"'q'", "16 bytes"},
       [](FakeKquant &k) { return quantize_at(k, KAIO_QUANT_Q4_K, KAIO_DTYPE_U8, 144, 0, 4104); }},
      {"x misaligned", KAIO_ERROR_MISALIGNED, V{"'x'", "16 bytes"},
       [](FakeKquant &k) { return quantize_at(k, KAIO_QUANT_Q6_K, KAIO_DTYPE_U8, 210, 4, 4096); }},
      {"q overlaps x", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_quantize"},
       [](FakeKquant &k) { return quantize_at(k, KAIO_QUANT_Q6_K, KAIO_DTYPE_U8, 210, 0, 512); }},
      {"null x", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_quantize", "'x'"},
       [](FakeKquant &k) {
         kaio_tensor q = k.at(KAIO_DTYPE_U8, 1, 210, 4096);
         return kaio_quantize(k.stream_.get(), nullptr, &q, KAIO_QUANT_Q6_K, 0);
       }},
      {"dequantize to i8", KAIO_ERROR_INVALID_DTYPE, V{"kaio_dequantize", "out_dtype"},
       [](FakeKquant &k) {
         kaio_tensor q = k.at(KAIO_DTYPE_U8, 1, 210, 4096), y = k.at(KAIO_DTYPE_I8, 1, 256, 0);
         return kaio_dequantize(k.stream_.get(), &q, &y, KAIO_QUANT_Q6_K);
       }},
      {"matmul bf16 output", KAIO_ERROR_INVALID_DTYPE, V{"kaio_op_create_quant_matmul", "out_dtype", "bf16"},
       [](FakeKquant &k) { return create_mm(k, KAIO_QUANT_Q8_0, KAIO_DTYPE_BF16, 256); }},
      {"matmul K not a block multiple", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_op_create_quant_matmul", "200"},
       [](FakeKquant &k) { return create_mm(k, KAIO_QUANT_Q6_K, KAIO_DTYPE_F32, 200); }},
      {"one-shot matmul M > 8", KAIO_ERROR_UNSUPPORTED, V{"kaio_quant_matmul", "kaio_op_create_quant_matmul"},
       [](FakeKquant &k) {
         kaio_tensor a = k.at(KAIO_DTYPE_F16, 9, 256, 0), w = k.at(KAIO_DTYPE_U8, 8, 210, 8192),
                     c = k.at(KAIO_DTYPE_F32, 9, 8, 16384);
         return kaio_quant_matmul(k.stream_.get(), &a, &w, &c, KAIO_QUANT_Q6_K);
       }},
      {"matmul W wrong rows", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_quant_matmul", "'W'"},
       [](FakeKquant &k) {
         kaio_tensor a = k.at(KAIO_DTYPE_F16, 2, 256, 0), w = k.at(KAIO_DTYPE_U8, 7, 210, 8192),
                     c = k.at(KAIO_DTYPE_F32, 2, 8, 16384);
         return kaio_quant_matmul(k.stream_.get(), &a, &w, &c, KAIO_QUANT_Q6_K);
       }},
      {"launch with wrong count", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_op_launch", "'count'", "{x, q}"},
       [](FakeKquant &k) {
         kaio_op *op = nullptr;
         kaio_status s = kaio_op_create_quantize(&op, k.dev_.get(), KAIO_QUANT_Q8_0, 0, KAIO_DTYPE_F32, 1, 256);
         if (s != KAIO_OK) return s;
         kaio_tensor t[] = {k.at(KAIO_DTYPE_F32, 1, 256, 0)};
         s = kaio_op_launch(op, k.stream_.get(), t, 1);
         kaio_op_destroy(op);
         return s;
       }},
  };
}

TEST_P(FakeKquantBad, ReturnsItsStatusAndNamesTheArgument) {
  const BadCase &c = GetParam();
  const unsigned long long before = kt::fake().launch_count();
  EXPECT_EQ(c.call(*this), c.expected) << kaio_last_error();
  const std::string msg = kaio_last_error();
  for (const char *part : c.parts) EXPECT_NE(msg.find(part), std::string::npos) << part << " in: " << msg;
  EXPECT_EQ(kt::fake().launch_count(), before);
}

INSTANTIATE_TEST_SUITE_P(Table, FakeKquantBad, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase> &i) {
                           std::string n = i.param.name;
                           for (char &ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
