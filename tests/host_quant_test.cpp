// Quantized matmul on the fake driver: which kernel each shape launches and
// with what grid, and a table of bad inputs (packing, shapes, dtypes,
// alignment), each with its exact status, a message naming the function and
// the argument, and no launch. Runs on every machine.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

using kt::Launch;
using kt::last_launch;
using kt::launch_param;

class FakeQuant : public ::testing::Test {
 public:
  // Views at 64 KiB-spaced offsets of one buffer.
  kaio_tensor at(int slot, kaio_dtype dt, int64_t rows, int64_t cols) {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), dt, rows, cols);
    t.offset_bytes = static_cast<uint64_t>(slot) << 16;
    return t;
  }
  kaio_stream *s() { return stream_.get(); }
  kaio_device *d() { return dev_.get(); }

 protected:
  void SetUp() override {
    if (!kt::on_fake_driver())
      GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host), which sets "
                      "LIBKAIO_CUDA_DRIVER";
    dev_ = kt::open_device(0);
    stream_ = kt::make_stream(dev_.get());
    buf_ = kt::make_buffer(dev_.get(), 1 << 22);
  }
  kt::Device dev_;
  kt::Stream stream_;
  kt::Buffer buf_;
};

TEST_F(FakeQuant, Int8PicksWgmmaOnHopperAndMmaSyncWhenAsked) {
  kaio_matmul_int8_desc d;
  KT_OK(kaio_matmul_int8_desc_init(&d, sizeof d));
  EXPECT_EQ(d.variant, KAIO_MATMUL_AUTO);
  const int64_t m = 130, n = 600, k = 64;
  kaio_tensor a = at(0, KAIO_DTYPE_I8, m, k), b = at(1, KAIO_DTYPE_I8, n, k),
              c = at(2, KAIO_DTYPE_F32, m, n);
  KT_OK(kaio_matmul_int8(stream_.get(), &a, &b, nullptr, nullptr, &c, &d));
  Launch l = last_launch();  // the fake device is compute capability 9.0
  EXPECT_EQ(l.name, "kaio_matmul_sm90_s8_nt");
  kaio_device_info info{};
  info.struct_size = sizeof info;
  KT_OK(kaio_device_get_info(dev_.get(), &info));
  // 2 x 3 tiles of 128 x 256; persistent: at most one CTA per SM
  EXPECT_EQ(l.grid[0], std::min(6u, static_cast<unsigned>(info.sm_count)));
  EXPECT_EQ(l.block[0], 384u);
  EXPECT_EQ(launch_param<uint32_t>(5), static_cast<uint32_t>(k));
  EXPECT_EQ(launch_param<float>(8), 0.0f) << "no beta";
  EXPECT_EQ(launch_param<uint32_t>(10), 1u) << "K in one split: ceil(64 / 128) steps";
  EXPECT_EQ(launch_param<uint64_t>(11), 0u);
  // i32 output (the exact sums) takes the same kernel, out_dtype 6.
  kaio_tensor ci = at(2, KAIO_DTYPE_I32, m, n);
  d.out_dtype = KAIO_DTYPE_I32;
  KT_OK(kaio_matmul_int8(stream_.get(), &a, &b, nullptr, nullptr, &ci, &d));
  EXPECT_EQ(last_launch().name, "kaio_matmul_sm90_s8_nt");
  EXPECT_EQ(launch_param<uint32_t>(9), static_cast<uint32_t>(KAIO_DTYPE_I32));
  d.out_dtype = KAIO_DTYPE_F32;
  d.variant = KAIO_MATMUL_ASYNC;
  KT_OK(kaio_matmul_int8(stream_.get(), &a, &b, nullptr, nullptr, &c, &d));
  l = last_launch();
  EXPECT_EQ(l.name, "kaio_matmul_int8_sm80_async");
  EXPECT_EQ(l.grid[0], 5u);
  EXPECT_EQ(l.grid[1], 2u);
  EXPECT_EQ(l.block[0], 256u);
  EXPECT_EQ(l.shared, 65536u);
}

TEST_F(FakeQuant, Int4DecodeKernelByRowsAndFusedQkvIsOneLaunch) {
  // The fake GPU has 4 SMs (64 warp slots at 16 per SM): groups >= 128 take the
  // contiguous-K kernel with the most warps (16, 8, 4) whose busy CTAs fit them. It is
  // cc 9.0: each runs as its sm_90 twin, `_pdl` (host_pdl_launch_test.cpp: 8.x does not).
  const int64_t k = 256;
  struct {
    int64_t m, n, group;
    kaio_dtype in;
    const char *kernel;
    unsigned grid_z;
  } cases[] = {{1, 96, 128, KAIO_DTYPE_F16, "kaio_int4_gemv_f16_m8_g128", 1},
               {1, 96, 64, KAIO_DTYPE_F16, "kaio_int4_gemv_f16_m8", 1},
               {8, 96, 256, KAIO_DTYPE_BF16, "kaio_int4_gemv_bf16_m8_g128", 1},
               {8, 96, 32, KAIO_DTYPE_BF16, "kaio_int4_gemv_bf16_m8", 1},
               {1, 256, 128, KAIO_DTYPE_F16, "kaio_int4_gemv_f16_m8_g128_w8", 1},  // 8 CTAs
               {4, 264, 256, KAIO_DTYPE_BF16, "kaio_int4_gemv_bf16_m8_g128_w4", 1},  // 9 CTAs
               {9, 96, 128, KAIO_DTYPE_F16, "kaio_int4_gemv_f16_m16_g128", 1},
               {16, 224, 128, KAIO_DTYPE_BF16, "kaio_int4_gemv_bf16_m16_g128_w8", 1},  // 7 CTAs
               {16, 416, 128, KAIO_DTYPE_F16, "kaio_int4_gemv_f16_m16_g128_w4s2", 1},  // 13 CTAs
               {16, 96, 64, KAIO_DTYPE_F16, "kaio_int4_gemv_f16_m16", 1}};
  for (const auto &cs : cases) {
    const int64_t n = cs.n;
    kaio_matmul_int4_desc d;
    KT_OK(kaio_matmul_int4_desc_init(&d, sizeof d));
    d.in_dtype = cs.in;
    d.group_size = cs.group;
    const int64_t groups = k / cs.group;
    kaio_tensor a = at(0, cs.in, cs.m, k), qw = at(1, KAIO_DTYPE_U32, k / 8, n),
                qz = at(2, KAIO_DTYPE_U32, groups, n / 8), sc = at(3, cs.in, groups, n),
                c = at(4, KAIO_DTYPE_F32, cs.m, n);
    KT_OK(kaio_matmul_int4(stream_.get(), &a, &qw, &qz, &sc, &c, &d));
    Launch l = last_launch();
    EXPECT_EQ(l.name, std::string(cs.kernel) + "_pdl") << "M = " << cs.m << ", N = " << n;
    EXPECT_EQ(l.grid[0], static_cast<unsigned>((n + 31) / 32));  // 32 columns per CTA
    EXPECT_EQ(l.grid[1], 1u);
    EXPECT_EQ(l.grid[2], cs.grid_z);
    const bool w4 = std::strstr(cs.kernel, "_w4") != nullptr, w8 = std::strstr(cs.kernel, "_w8");
    EXPECT_EQ(l.block[0], w4 ? 128u : w8 ? 256u : 512u) << cs.kernel;  // 32 threads per warp
  }
  kaio_qkv_int4_desc q;
  KT_OK(kaio_qkv_int4_desc_init(&q, sizeof q));
  const int64_t nq = 128, nkv = 32;
  kaio_tensor t[13] = {at(0, KAIO_DTYPE_F16, 2, k),
                       at(1, KAIO_DTYPE_U32, k / 8, nq), {}, at(2, KAIO_DTYPE_F16, k / 128, nq),
                       at(3, KAIO_DTYPE_I32, k / 8, nkv), {}, at(4, KAIO_DTYPE_F16, k / 128, nkv),
                       at(5, KAIO_DTYPE_U32, k / 8, nkv), {}, at(6, KAIO_DTYPE_F16, k / 128, nkv),
                       at(7, KAIO_DTYPE_F16, 2, nq), at(8, KAIO_DTYPE_F16, 2, nkv),
                       at(9, KAIO_DTYPE_F16, 2, nkv)};
  unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_qkv_project_int4(stream_.get(), t, 13, &q));
  EXPECT_EQ(kt::fake().launch_count(), before + 1) << "fused QKV must be one launch";
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_int4_gemv_f16_m8_g128_w8_pdl");  // 4 + 1 + 1 busy CTAs
  EXPECT_EQ(l.grid[0], 4u);  // the widest projection
  EXPECT_EQ(l.grid[1], 3u);
}

TEST_F(FakeQuant, Int8QkvIsOneLaunchOverThreeWeightSets) {
  kaio_qkv_int8_desc d;
  KT_OK(kaio_qkv_int8_desc_init(&d, sizeof d));
  kaio_tensor t[10] = {at(0, KAIO_DTYPE_F16, 12, 128),
                       at(1, KAIO_DTYPE_I8, 128, 96), at(2, KAIO_DTYPE_F32, 1, 1),
                       at(3, KAIO_DTYPE_I8, 128, 36), at(4, KAIO_DTYPE_F32, 1, 36),
                       at(5, KAIO_DTYPE_I8, 128, 36), at(6, KAIO_DTYPE_F32, 1, 36),
                       at(7, KAIO_DTYPE_F16, 12, 96), at(8, KAIO_DTYPE_F16, 12, 36),
                       at(9, KAIO_DTYPE_F16, 12, 36)};
  unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_qkv_project_int8(stream_.get(), t, 10, &d));
  EXPECT_EQ(kt::fake().launch_count(), before + 1);
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_int8w_gemv_f16_m16");
  EXPECT_EQ(l.grid[0], 3u);
  EXPECT_EQ(l.grid[1], 3u);
  EXPECT_EQ(l.grid[2], 1u);
}

// M > 64 (or > 32 with N > 4096) on the fake sm_90: one launch of the wgmma
// kernel for one-shot calls and op handles alike, no workspace; X and qweight
// as TMA maps. Fewer rows run the decode kernel.
TEST_F(FakeQuant, Int4PrefillOnSm90IsOneFusedLaunchWithoutWorkspace) {
  const int64_t m = 72, k = 256, n = 136;
  kaio_matmul_int4_desc d;
  KT_OK(kaio_matmul_int4_desc_init(&d, sizeof d));
  d.in_dtype = KAIO_DTYPE_BF16;
  d.out_dtype = KAIO_DTYPE_BF16;
  d.group_size = 64;
  kaio_tensor a = at(0, KAIO_DTYPE_BF16, m, k), qw = at(1, KAIO_DTYPE_U32, k / 8, n),
              qz = at(2, KAIO_DTYPE_U32, k / 64, n / 8), sc = at(3, KAIO_DTYPE_BF16, k / 64, n),
              c = at(4, KAIO_DTYPE_BF16, m, n);
  KT_OK(kaio_matmul_int4(s(), &a, &qw, &qz, &sc, &c, &d));
  Launch l = last_launch();
  // 2 column tiles on the fake GPU's 4 SMs: two 64-row tiles each fill them,
  // 4 K steps a CTA (the second tile loads rows 8-71 and stores 64-71)
  EXPECT_EQ(l.name, "kaio_int4_mm_sm90_bf16_m64_ss");
  EXPECT_EQ(l.grid[0], 2u);  // ceil(136 / 128) weight columns
  EXPECT_EQ(l.grid[1], 2u);  // ceil(72 / 64) rows
  EXPECT_EQ(l.grid[2], 1u);
  EXPECT_EQ(l.block[0], 384u);
  struct Record {
    uint64_t address, dim0, dim1, stride, box, flags, rest[10];
  };
  const uint64_t base = kaio_buffer_device_ptr(buf_.get());
  Record rx = launch_param<Record>(0), rq = launch_param<Record>(1);
  EXPECT_EQ(rx.address, base);
  EXPECT_EQ(rx.dim0, uint64_t{k});
  EXPECT_EQ(rx.dim1, uint64_t{m});
  EXPECT_EQ(rx.box, 64u | (uint64_t{64} << 32)) << "X's box: the tile's rows";
  EXPECT_EQ((rx.flags >> 8) & 0xFF, 3u);  // 128-byte swizzle
  EXPECT_EQ(rq.address, base + (1 << 16));
  EXPECT_EQ(rq.dim0, uint64_t{n});
  EXPECT_EQ(rq.dim1, uint64_t{k / 8});
  EXPECT_EQ(rq.box, 128u | (uint64_t{8} << 32));
  EXPECT_EQ(rq.flags & 0xFF, 2u);         // UINT32
  EXPECT_EQ((rq.flags >> 8) & 0xFF, 0u);  // no swizzle
  EXPECT_EQ(launch_param<uint64_t>(2), base + (4 << 16));  // C
  EXPECT_EQ(launch_param<uint64_t>(4), base + (3 << 16));  // scales
  EXPECT_EQ(launch_param<uint64_t>(6), base + (2 << 16));  // qzeros
  EXPECT_EQ(launch_param<uint32_t>(8), uint32_t{m});
  EXPECT_EQ(launch_param<uint32_t>(9), uint32_t{n});
  EXPECT_EQ(launch_param<uint32_t>(10), uint32_t{k});
  EXPECT_EQ(launch_param<uint32_t>(11), 64u);
  EXPECT_EQ(launch_param<uint32_t>(14), static_cast<uint32_t>(KAIO_DTYPE_BF16));
  KT_OK(kaio_matmul_int4(s(), &a, &qw, nullptr, &sc, &c, &d));
  EXPECT_EQ(launch_param<uint64_t>(6), 0u) << "no qzeros";
  // The same M and N at another K (no qzeros): A, qweight and scales from slot 8 on
  auto launch_at_k = [&](int64_t kk) {
    kaio_tensor ka = at(8, KAIO_DTYPE_BF16, m, kk), kqw = at(12, KAIO_DTYPE_U32, kk / 8, n),
                ksc = at(14, KAIO_DTYPE_BF16, kk / 64, n);
    KT_OK(kaio_matmul_int4(s(), &ka, &kqw, nullptr, &ksc, &c, &d));
  };
  // 16 K steps: 128-row tiles with K split over CTA pairs (8 steps each) fill
  // the 4 SMs; X's box has M rows, fewer than the tile's
  launch_at_k(1024);
  l = last_launch();
  EXPECT_EQ(l.name, "kaio_int4_mm_sm90_bf16_m128_k2_ss");
  EXPECT_EQ(l.grid[0], 2u);
  EXPECT_EQ(l.grid[1], 1u);  // ceil(72 / 128) rows
  EXPECT_EQ(l.grid[2], 2u);  // the K halves: a cluster of 2
  EXPECT_EQ(launch_param<Record>(0).box, 64u | (uint64_t{m} << 32))
      << "X's box: M rows where M is under the tile's";
  // One K step: the 64-row tiles again, unsplit
  launch_at_k(64);
  l = last_launch();
  EXPECT_EQ(l.name, "kaio_int4_mm_sm90_bf16_m64_ss");
  EXPECT_EQ(l.grid[2], 1u);
  // M = 32 (and 17-31): the decode kernel, two slices of 16 rows; M = 64 too
  // while N <= 4096 (four slices)
  for (const int64_t rows : {int64_t{32}, int64_t{64}}) {
    kaio_tensor ar = at(8, KAIO_DTYPE_BF16, rows, k), cr = at(16, KAIO_DTYPE_BF16, rows, n);
    KT_OK(kaio_matmul_int4(s(), &ar, &qw, &qz, &sc, &cr, &d));
    l = last_launch();
    EXPECT_EQ(l.name.rfind("kaio_int4_gemv_bf16_m16", 0), 0u) << l.name;
    EXPECT_EQ(l.grid[2], static_cast<unsigned>(rows / 16));
  }
  // M = 1000: 4 x 2 CTAs of 256 rows in two waves of the 4 SMs, no slower than
  // 8 x 2 of 128 rows in four: the 256-row tile
  kaio_tensor big_a = at(8, KAIO_DTYPE_BF16, 1000, k), big_c = at(16, KAIO_DTYPE_BF16, 1000, n);
  KT_OK(kaio_matmul_int4(s(), &big_a, &qw, &qz, &sc, &big_c, &d));
  l = last_launch();
  EXPECT_EQ(l.name, "kaio_int4_mm_sm90_bf16_m256_ss");
  EXPECT_EQ(l.grid[1], 4u);
  EXPECT_EQ(l.grid[2], 1u);
  EXPECT_EQ(launch_param<Record>(0).box, 64u | (uint64_t{256} << 32));

  d.m = m;
  d.n = n;
  d.k = k;
  unsigned long long allocs = kt::fake().live_allocations();
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_matmul_int4(&op, dev_.get(), &d));
  kt::Op guard(op);
  EXPECT_EQ(kt::fake().live_allocations(), allocs) << "no workspace on sm_90";
  kaio_tensor t[5] = {a, qw, {}, sc, c};
  unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op, s(), t, 5));
  EXPECT_EQ(kt::fake().launch_count(), before + 1);
  EXPECT_EQ(last_launch().name, "kaio_int4_mm_sm90_bf16_m64_ss");

  // Op handles run the fused kernel up to M = 4096 (no workspace); past it they
  // own a K x N workspace: dequantize into it, then the matmul (two launches).
  for (const int64_t rows : {int64_t{4096}, int64_t{4097}}) {
    d.m = rows;
    allocs = kt::fake().live_allocations();
    kaio_op *tall = nullptr;
    KT_OK(kaio_op_create_matmul_int4(&tall, dev_.get(), &d));
    kt::Op tall_guard(tall);
    const bool fused = rows <= 4096;
    EXPECT_EQ(kt::fake().live_allocations(), allocs + (fused ? 0 : 1)) << "M = " << rows;
    kaio_tensor tt[5] = {at(4, KAIO_DTYPE_BF16, rows, k), qw, {}, sc,   // 2 MiB of A past the weights
                         at(37, KAIO_DTYPE_BF16, rows, n)};
    before = kt::fake().launch_count();
    KT_OK(kaio_op_launch(tall, s(), tt, 5));
    EXPECT_EQ(kt::fake().launch_count(), before + (fused ? 1 : 2)) << "M = " << rows;
    if (fused) {
      EXPECT_EQ(last_launch().name, "kaio_int4_mm_sm90_bf16_m256_ss");
    }
  }
}

// Before sm_90: op handles with M > 16 dequantize into a workspace they own,
// then run the matmul; one-shot calls run the decode kernel over row tiles.
// Runs in a child (threadsafe death test: a fresh process) with compute
// capability 8.0; exits 0 when all holds, else with the failed check's code.
[[noreturn]] void int4_prefill_before_sm90() {
    const kt::FakeChild child("80", 1 << 22);
    kaio_device *dev = child.dev.get();
    kaio_stream *stream = child.stream.get();
    auto at = [&](int slot, kaio_dtype dt, int64_t rows, int64_t cols) {
      return child.at(dt, rows, cols, static_cast<uint64_t>(slot) << 16);
    };
    const int64_t m = 64, k = 256, n = 96;
    kaio_matmul_int4_desc d;
    if (kaio_matmul_int4_desc_init(&d, sizeof d) != KAIO_OK) std::_Exit(2);
    d.group_size = 64;
    kaio_tensor t[5] = {at(0, KAIO_DTYPE_F16, m, k), at(1, KAIO_DTYPE_U32, k / 8, n), {},
                        at(2, KAIO_DTYPE_F16, k / 64, n), at(3, KAIO_DTYPE_F32, m, n)};
    char name[128] = {0};
    unsigned grid[3], block[3], shared;
    if (kaio_matmul_int4(stream, &t[0], &t[1], nullptr, &t[3], &t[4], &d) != KAIO_OK)
      std::_Exit(3);
    if (kt::fake().last_launch(name, sizeof name, grid, block, &shared) != 0 ||
        std::string(name) != "kaio_int4_gemv_f16_m16" || grid[2] != 4)
      std::_Exit(4);  // one-shot: the decode kernel, ceil(64 / 16) row tiles
    d.m = m;
    d.n = n;
    d.k = k;
    const unsigned long long allocs = kt::fake().live_allocations();
    kaio_op *op = nullptr;
    if (kaio_op_create_matmul_int4(&op, dev, &d) != KAIO_OK) std::_Exit(5);
    if (kt::fake().live_allocations() != allocs + 1) std::_Exit(6);  // the workspace
    const unsigned long long before = kt::fake().launch_count();
    if (kaio_op_launch(op, stream, t, 5) != KAIO_OK ||
        kaio_op_launch(op, stream, t, 5) != KAIO_OK)
      std::_Exit(7);
    if (kt::fake().launch_count() != before + 4) std::_Exit(8);
    if (kt::fake().live_allocations() != allocs + 1) std::_Exit(9);  // launches allocate nothing
    if (kt::fake().last_launch(name, sizeof name, grid, block, &shared) != 0 ||
        std::string(name).find("kaio_matmul_") != 0)
      std::_Exit(10);
    kaio_op_destroy(op);
    if (kt::fake().live_allocations() != allocs) std::_Exit(11);
    std::_Exit(0);
}

TEST(FakeQuantSm80, Int4PrefillDequantizesThenRunsTheMatmul) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (!kt::on_fake_driver()) GTEST_SKIP() << "needs the fake driver: run through `meson test`";
  EXPECT_EXIT(int4_prefill_before_sm90(), ::testing::ExitedWithCode(0), "");
}

TEST_F(FakeQuant, RepackTransposesKaioStorage) {
  kaio_tensor src = at(0, KAIO_DTYPE_U32, 300, 16), dst = at(1, KAIO_DTYPE_U32, 16, 300);
  KT_OK(kaio_int4_repack_kaio(stream_.get(), &src, &dst));
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_int4_transpose_u32");
  EXPECT_EQ(l.grid[0], 2u);
  EXPECT_EQ(l.grid[1], 16u);
}

// ---------------------------------------------------------------------------
// Bad inputs

struct Case {
  const char *name;
  kaio_status expected;
  std::vector<const char *> message_parts;
  std::function<kaio_status(FakeQuant &)> call;
};

// A good int4 call (M 2, K 256, N 64, group 128, with qzeros) with one edit.
struct Int4Call {
  kaio_matmul_int4_desc d;
  kaio_tensor a, qw, qz, sc, c;
  explicit Int4Call(FakeQuant &f, int64_t k = 256, int64_t n = 64) {
    EXPECT_EQ(kaio_matmul_int4_desc_init(&d, sizeof d), KAIO_OK);
    a = f.at(0, KAIO_DTYPE_F16, 2, k);
    qw = f.at(1, KAIO_DTYPE_U32, k / 8, n);
    qz = f.at(2, KAIO_DTYPE_U32, k / 128, n / 8);
    sc = f.at(3, KAIO_DTYPE_F16, k / 128, n);
    c = f.at(4, KAIO_DTYPE_F32, 2, n);
  }
  kaio_status run(FakeQuant &f) { return kaio_matmul_int4(f.s(), &a, &qw, &qz, &sc, &c, &d); }
};

kaio_status int4_with(FakeQuant &f, const std::function<void(Int4Call &)> &edit) {
  Int4Call call(f);
  edit(call);
  return call.run(f);
}

kaio_status int8_with(FakeQuant &f, const std::function<void(kaio_matmul_int8_desc &,
                                                             kaio_tensor *)> &edit) {
  auto &q = f;
  kaio_matmul_int8_desc d;
  EXPECT_EQ(kaio_matmul_int8_desc_init(&d, sizeof d), KAIO_OK);
  kaio_tensor t[5] = {q.at(0, KAIO_DTYPE_I8, 4, 64), q.at(1, KAIO_DTYPE_I8, 32, 64),
                      {}, {}, q.at(2, KAIO_DTYPE_F32, 4, 32)};
  edit(d, t);
  return kaio_matmul_int8(q.s(), &t[0], &t[1], t[2].buffer ? &t[2] : nullptr,
                          t[3].buffer ? &t[3] : nullptr, &t[4], &d);
}

// A good int8 QKV call (M 2, K 64, N 32 each) with one edit to its views.
kaio_status qkv8_with(FakeQuant &f, const std::function<void(kaio_tensor *)> &edit) {
  kaio_qkv_int8_desc d;
  EXPECT_EQ(kaio_qkv_int8_desc_init(&d, sizeof d), KAIO_OK);
  kaio_tensor t[10] = {f.at(0, KAIO_DTYPE_F16, 2, 64),
                       f.at(1, KAIO_DTYPE_I8, 64, 32), f.at(2, KAIO_DTYPE_F32, 1, 1),
                       f.at(3, KAIO_DTYPE_I8, 64, 32), f.at(4, KAIO_DTYPE_F32, 1, 32),
                       f.at(5, KAIO_DTYPE_I8, 64, 32), f.at(6, KAIO_DTYPE_F32, 1, 1),
                       f.at(7, KAIO_DTYPE_F16, 2, 32), f.at(8, KAIO_DTYPE_F16, 2, 32),
                       f.at(9, KAIO_DTYPE_F16, 2, 32)};
  edit(t);
  return kaio_qkv_project_int8(f.s(), t, 10, &d);
}

std::vector<Case> cases() {
  using V = std::vector<const char *>;
  return {
      {"int4 group not dividing K", KAIO_ERROR_INVALID_ARGUMENT,
       V{"kaio_matmul_int4", "group_size", "96", "divides K"},
       [](FakeQuant &f) { return int4_with(f, [](Int4Call &c) { c.d.group_size = 96; }); }},
      {"int4 group larger than K", KAIO_ERROR_INVALID_ARGUMENT, V{"group_size", "512"},
       [](FakeQuant &f) { return int4_with(f, [](Int4Call &c) { c.d.group_size = 512; }); }},
      {"int4 group 16", KAIO_ERROR_INVALID_ARGUMENT, V{"group_size", "16"},
       [](FakeQuant &f) { return int4_with(f, [](Int4Call &c) { c.d.group_size = 16; }); }},
      {"int4 K not a multiple of 32", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_matmul_int4", "K is 40", "32"},
       [](FakeQuant &f) {
         Int4Call c(f, 40, 64);
         c.d.group_size = 40;
         return c.run(f);
       }},
      {"int4 N not a multiple of 8", KAIO_ERROR_INVALID_DIMENSION, V{"N", "60", "multiple of 8"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.d.n = 60; }); }},
      {"int4 qweight not K/8 rows", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_matmul_int4", "'qweight'", "256 x 64", "K/8 x N", "32 x 64"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.qw.rows = 256; }); }},
      {"int4 qweight f16", KAIO_ERROR_INVALID_DTYPE, V{"'qweight'", "f16", "u32 or i32"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.qw.dtype = KAIO_DTYPE_F16; }); }},
      {"int4 qzeros not N/8 columns", KAIO_ERROR_SHAPE_MISMATCH, V{"'qzeros'", "2 x 64", "K/group_size x N/8", "2 x 8"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.qz.cols = 64; }); }},
      {"int4 qzeros f32", KAIO_ERROR_INVALID_DTYPE, V{"'qzeros'", "f32"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.qz.dtype = KAIO_DTYPE_F32; }); }},
      {"int4 scales wrong groups", KAIO_ERROR_SHAPE_MISMATCH, V{"'scales'", "4 x 64", "K/group_size x N", "2 x 64"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.sc.rows = 4; }); }},
      {"int4 scales f32", KAIO_ERROR_INVALID_DTYPE, V{"'scales'", "f32", "f16"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.sc.dtype = KAIO_DTYPE_F32; }); }},
      {"int4 activations i8", KAIO_ERROR_INVALID_DTYPE, V{"kaio_matmul_int4", "in_dtype", "i8"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.d.in_dtype = KAIO_DTYPE_I8; }); }},
      {"int4 output i32", KAIO_ERROR_INVALID_DTYPE, V{"out_dtype", "i32"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.d.out_dtype = KAIO_DTYPE_I32; }); }},
      {"int4 signed format with qzeros", KAIO_ERROR_INVALID_ARGUMENT, V{"'qzeros'", "KAIO_INT4_SIGNED"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.d.format = KAIO_INT4_SIGNED; }); }},
      {"int4 zeros_offset 2", KAIO_ERROR_INVALID_ARGUMENT, V{"zeros_offset", "2"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.d.zeros_offset = 2; }); }},
      {"int4 unknown format", KAIO_ERROR_INVALID_ARGUMENT, V{"format", "7"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.d.format = 7; }); }},
      {"int4 misaligned activations", KAIO_ERROR_MISALIGNED, V{"'A'", "16-byte"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.a.offset_bytes += 8; }); }},
      {"int4 qweight row stride not a multiple of 4", KAIO_ERROR_MISALIGNED, V{"'qweight'", "row_stride 66"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.qw.row_stride = 66; }); }},
      {"int4 output of the wrong shape", KAIO_ERROR_SHAPE_MISMATCH, V{"'C'", "2 x 64"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.c.rows = 3; c.d.m = 2; }); }},
      {"int4 output over the weights", KAIO_ERROR_INVALID_ARGUMENT, V{"'qweight'", "'C'"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.c.offset_bytes = c.qw.offset_bytes + 4; }); }},
      {"int4 null scales", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_matmul_int4", "'scales'"},
       [](FakeQuant &f) {
         Int4Call c(f);
         return kaio_matmul_int4(f.s(), &c.a, &c.qw, &c.qz, nullptr, &c.c, &c.d);
       }},
      {"int4 desc reserved set", KAIO_ERROR_INVALID_ARGUMENT, V{"reserved"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.d.reserved = 1; }); }},
      {"int4 desc too small", KAIO_ERROR_BUFFER_TOO_SMALL, V{"struct_size", "kaio_matmul_int4_desc_init"},
       [](FakeQuant &f) { return int4_with(f, [&](Int4Call &c) { c.d.struct_size = 8; }); }},
      {"qkv wrong count", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_qkv_project_int4", "'count'", "13"},
       [](FakeQuant &f) {
         kaio_qkv_int4_desc d;
         EXPECT_EQ(kaio_qkv_int4_desc_init(&d, sizeof d), KAIO_OK);
         kaio_tensor t[5] = {};
         return kaio_qkv_project_int4(f.s(), t, 5, &d);
       }},
      {"qkv bad v scales", KAIO_ERROR_SHAPE_MISMATCH, V{"'scales_v'"},
       [](FakeQuant &f) {
         auto &q = f;
         kaio_qkv_int4_desc d;
         EXPECT_EQ(kaio_qkv_int4_desc_init(&d, sizeof d), KAIO_OK);
         kaio_tensor t[13] = {q.at(0, KAIO_DTYPE_F16, 1, 256),
                              q.at(1, KAIO_DTYPE_U32, 32, 64), {}, q.at(2, KAIO_DTYPE_F16, 2, 64),
                              q.at(3, KAIO_DTYPE_U32, 32, 64), {}, q.at(4, KAIO_DTYPE_F16, 2, 64),
                              q.at(5, KAIO_DTYPE_U32, 32, 64), {}, q.at(6, KAIO_DTYPE_F16, 3, 64),
                              q.at(7, KAIO_DTYPE_F16, 1, 64), q.at(8, KAIO_DTYPE_F16, 1, 64),
                              q.at(9, KAIO_DTYPE_F16, 1, 64)};
         return kaio_qkv_project_int4(q.s(), t, 13, &d);
       }},
      {"repack wrong dst shape", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_int4_repack_kaio", "'dst'", "K/8 x N"},
       [](FakeQuant &f) {
         auto &q = f;
         kaio_tensor s = q.at(0, KAIO_DTYPE_U32, 64, 32), d = q.at(1, KAIO_DTYPE_U32, 64, 32);
         return kaio_int4_repack_kaio(q.s(), &s, &d);
       }},
      {"qkv int8 weights f16", KAIO_ERROR_INVALID_DTYPE, V{"kaio_qkv_project_int8", "'w_k'", "f16", "i8"},
       [](FakeQuant &f) { return qkv8_with(f, [](kaio_tensor *t) { t[3].dtype = KAIO_DTYPE_F16; }); }},
      {"qkv int8 scale of the wrong length", KAIO_ERROR_SHAPE_MISMATCH, V{"'scale_v'", "1 x 5", "1 x 1"},
       [](FakeQuant &f) { return qkv8_with(f, [](kaio_tensor *t) { t[6].cols = 5; }); }},
      {"qkv int8 K not a multiple of 32", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_op_create_qkv_project_int8", "K is 48"},
       [](FakeQuant &f) {
         kaio_qkv_int8_desc d;
         EXPECT_EQ(kaio_qkv_int8_desc_init(&d, sizeof d), KAIO_OK);
         d.m = 1;
         d.k = 48;
         d.n_q = d.n_k = d.n_v = 32;
         kaio_op *op = nullptr;
         return kaio_op_create_qkv_project_int8(&op, f.d(), &d);
       }},
      {"int8 K not a multiple of 16", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_matmul_int8", "K is 40", "16"},
       [](FakeQuant &f) {
         return int8_with(f, [](kaio_matmul_int8_desc &, kaio_tensor *t) { t[0].cols = 40; t[1].cols = 40; });
       }},
      {"int8 B given K x N", KAIO_ERROR_SHAPE_MISMATCH, V{"'B'", "64 x 32", "N x K", "transpose"},
       [](FakeQuant &f) {
         return int8_with(f, [](kaio_matmul_int8_desc &, kaio_tensor *t) { t[1].rows = 64; t[1].cols = 32; });
       }},
      {"int8 A f16", KAIO_ERROR_INVALID_DTYPE, V{"'A'", "f16", "i8"},
       [](FakeQuant &f) {
         return int8_with(f, [](kaio_matmul_int8_desc &, kaio_tensor *t) { t[0].dtype = KAIO_DTYPE_F16; });
       }},
      {"int8 row scale of the wrong length", KAIO_ERROR_SHAPE_MISMATCH, V{"'sa'", "1 x 4"},
       [&](FakeQuant &f) {
         return int8_with(f, [&](kaio_matmul_int8_desc &, kaio_tensor *t) {
           t[2] = f.at(3, KAIO_DTYPE_F32, 1, 5);
         });
       }},
      {"int8 i32 output with a scale", KAIO_ERROR_INVALID_ARGUMENT, V{"i32", "sa and sb"},
       [&](FakeQuant &f) {
         return int8_with(f, [&](kaio_matmul_int8_desc &d, kaio_tensor *t) {
           d.out_dtype = KAIO_DTYPE_I32;
           t[4].dtype = KAIO_DTYPE_I32;
           t[3] = f.at(3, KAIO_DTYPE_F32, 1, 32);
         });
       }},
      {"int8 i32 output with alpha", KAIO_ERROR_INVALID_ARGUMENT, V{"alpha", "i32"},
       [](FakeQuant &f) {
         return int8_with(f, [](kaio_matmul_int8_desc &d, kaio_tensor *t) {
           d.out_dtype = KAIO_DTYPE_I32;
           d.alpha = 0.5f;
           t[4].dtype = KAIO_DTYPE_I32;
         });
       }},
      {"int8 misaligned B stride", KAIO_ERROR_MISALIGNED, V{"'B'", "row_stride 72"},
       [](FakeQuant &f) {
         return int8_with(f, [](kaio_matmul_int8_desc &, kaio_tensor *t) { t[1].row_stride = 72; });
       }},
      {"int8 variant sync", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_matmul_int8", "variant", "1"},
       [](FakeQuant &f) {
         return int8_with(f, [](kaio_matmul_int8_desc &d, kaio_tensor *) { d.variant = KAIO_MATMUL_SYNC; });
       }},
      {"int8 output u8", KAIO_ERROR_INVALID_DTYPE, V{"out_dtype", "u8"},
       [](FakeQuant &f) {
         return int8_with(f, [](kaio_matmul_int8_desc &d, kaio_tensor *) { d.out_dtype = KAIO_DTYPE_U8; });
       }},
      {"int8 op launch with 3 tensors", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_op_launch", "'count'", "{A, B, sa, sb, C}"},
       [](FakeQuant &f) {
         auto &q = f;
         kaio_matmul_int8_desc d;
         EXPECT_EQ(kaio_matmul_int8_desc_init(&d, sizeof d), KAIO_OK);
         d.m = 4;
         d.n = 32;
         d.k = 64;
         kaio_op *op = nullptr;
         EXPECT_EQ(kaio_op_create_matmul_int8(&op, q.d(), &d), KAIO_OK);
         kt::Op guard(op);
         kaio_tensor t[3] = {};
         return kaio_op_launch(op, q.s(), t, 3);
       }},
  };
}

class QuantBadInputTest : public FakeQuant, public ::testing::WithParamInterface<Case> {};

TEST_P(QuantBadInputTest, ReturnsItsStatusAndNamesTheArgument) {
  const Case &c = GetParam();
  unsigned long long launches = kt::fake().launch_count();
  kt::expect_rejected(c.call(*this), c.expected, c.message_parts, launches);
}

std::string case_name(const ::testing::TestParamInfo<Case> &info) {
  std::string n = info.param.name;
  for (char &ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Table, QuantBadInputTest, ::testing::ValuesIn(cases()), case_name);

}  // namespace
