// The runtime on the fake driver: lifetimes, copies, launch shapes and
// kernel arguments, user modules, and how driver failures surface. Runs on
// every machine.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

class FakeRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kt::on_fake_driver())
      GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host), which sets "
                      "LIBKAIO_CUDA_DRIVER";
  }
};

using kt::Launch;
using kt::last_launch;

using kt::launch_param;

TEST_F(FakeRuntime, ProbeReportsDriverAndDevices) {
  kaio_probe_info info{};
  info.struct_size = sizeof info;
  KT_OK(kaio_probe(&info));
  EXPECT_EQ(info.driver_status, KAIO_OK);
  EXPECT_EQ(info.driver_version, 13000);
  EXPECT_EQ(info.device_count, 2);
  int32_t n = 0;
  KT_OK(kaio_device_count(&n));
  EXPECT_EQ(n, 2);
}

TEST_F(FakeRuntime, DeviceInfoAndSharedHandles) {
  kt::Device a = kt::open_device(1);
  kt::Device b = kt::open_device(1);
  ASSERT_TRUE(a && b);
  // Each open is its own handle (destroyed on its own) to one shared device:
  // the same borrowed handle, context and module cache.
  EXPECT_NE(a.get(), b.get());
  kt::Stream sa = kt::make_stream(a.get()), sb = kt::make_stream(b.get());
  EXPECT_EQ(kaio_stream_device(sa.get()), kaio_stream_device(sb.get()));
  EXPECT_EQ(kaio_device_native_context(a.get()), kaio_device_native_context(b.get()));
  kaio_device_info info{};
  info.struct_size = sizeof info;
  KT_OK(kaio_device_get_info(a.get(), &info));
  EXPECT_EQ(info.ordinal, 1);
  EXPECT_EQ(info.cc_major, 9);
  EXPECT_EQ(info.cc_minor, 0);
  EXPECT_EQ(info.sm_count, 4);
  EXPECT_STREQ(info.name, "kaio fake device 1");
  EXPECT_NE(kaio_device_native_context(a.get()), nullptr);
}

TEST_F(FakeRuntime, ChildrenKeepTheirDeviceAlive) {
  unsigned long long before = kt::fake().live_allocations();
  kaio_device *d = nullptr;
  KT_OK(kaio_device_open(&d, 0));
  kaio_buffer *b = nullptr;
  KT_OK(kaio_buffer_create(&b, d, 1000));
  kaio_stream *s = nullptr;
  KT_OK(kaio_stream_create(&s, d, 0));
  kaio_device_destroy(d);  // the user's reference goes first
  uint32_t v = 0xA5A5A5A5u, back = 0;
  KT_OK(kaio_buffer_write(b, 996, &v, 4));
  KT_OK(kaio_buffer_read(b, 996, &back, 4));
  EXPECT_EQ(back, v);
  EXPECT_EQ(kaio_buffer_device(b), kaio_stream_device(s));
  kaio_stream_destroy(s);
  kaio_buffer_destroy(b);
  EXPECT_EQ(kt::fake().live_allocations(), before);
}

TEST_F(FakeRuntime, CopiesRoundTrip) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  kt::Buffer a = kt::make_buffer(d.get(), 256), b = kt::make_buffer(d.get(), 256);
  std::vector<uint8_t> src(256), dst(256, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  KT_OK(kaio_buffer_write_async(a.get(), s.get(), 0, src.data(), 256));
  KT_OK(kaio_buffer_copy(b.get(), 0, a.get(), 0, 256, s.get()));
  KT_OK(kaio_buffer_memset(b.get(), s.get(), 10, 0xEE, 5));
  KT_OK(kaio_buffer_read_async(b.get(), s.get(), 0, dst.data(), 256));
  KT_OK(kaio_stream_synchronize(s.get()));
  for (size_t i = 0; i < 256; ++i)
    EXPECT_EQ(dst[i], (i >= 10 && i < 15) ? 0xEE : src[i]) << "byte " << i;
}

TEST_F(FakeRuntime, WrapsForeignMemoryAndStreams) {
  kt::Device d = kt::open_device(0);
  kt::Buffer owner = kt::make_buffer(d.get(), 1024);
  kaio_buffer *view = nullptr;
  KT_OK(kaio_buffer_wrap(&view, d.get(), kaio_buffer_device_ptr(owner.get()) + 256, 768));
  EXPECT_EQ(kaio_buffer_size(view), 768u);
  kaio_buffer_destroy(view);  // foreign: must not free the owner's memory
  uint8_t byte = 3;
  KT_OK(kaio_buffer_write(owner.get(), 1023, &byte, 1));

  kt::Stream s = kt::make_stream(d.get());
  kaio_stream *wrapped = nullptr;
  KT_OK(kaio_stream_wrap(&wrapped, d.get(), kaio_stream_native(s.get())));
  EXPECT_EQ(kaio_stream_native(wrapped), kaio_stream_native(s.get()));
  KT_OK(kaio_stream_synchronize(wrapped));
  kaio_stream_destroy(wrapped);  // borrowed: the original stays usable
  KT_OK(kaio_stream_synchronize(s.get()));
  kaio_stream *legacy = nullptr;
  KT_OK(kaio_stream_wrap(&legacy, d.get(), nullptr));
  kaio_stream_destroy(legacy);
}

TEST_F(FakeRuntime, EventsTimeAndOrder) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get()), t = kt::make_stream(d.get());
  kaio_event *a = nullptr, *b = nullptr;
  KT_OK(kaio_event_create(&a, d.get(), 0));
  KT_OK(kaio_event_create(&b, d.get(), 0));
  kt::Event ea(a), eb(b);
  KT_OK(kaio_event_record(a, s.get()));
  KT_OK(kaio_event_record(b, s.get()));
  KT_OK(kaio_stream_wait_event(t.get(), b));
  KT_OK(kaio_event_synchronize(b));
  float ms = -1;
  KT_OK(kaio_event_elapsed_ms(&ms, a, b));
  EXPECT_GE(ms, 0.0f);
  kaio_event *untimed = nullptr;
  KT_OK(kaio_event_create(&untimed, d.get(), KAIO_EVENT_DISABLE_TIMING));
  kt::Event eu(untimed);
  KT_OK(kaio_event_record(untimed, s.get()));
  EXPECT_EQ(kaio_event_elapsed_ms(&ms, a, untimed), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("'end'"), std::string::npos) << kaio_last_error();
}

TEST_F(FakeRuntime, ElementwiseLaunchPassesViewsAndCount) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  const int64_t rows = 37, cols = 101;  // odd sizes: no vector-multiple
  kt::Buffer x = kt::make_buffer(d.get(), rows * cols * 2 + 64);
  kt::Buffer g = kt::make_buffer(d.get(), rows * cols * 2);
  kt::Buffer o = kt::make_buffer(d.get(), rows * cols * 2);
  kaio_tensor tx = kaio_tensor_2d(x.get(), KAIO_DTYPE_BF16, rows, cols);
  tx.offset_bytes = 62;  // element-aligned, not vector-aligned
  kaio_tensor tg = kaio_tensor_2d(g.get(), KAIO_DTYPE_BF16, rows, cols);
  kaio_tensor to = kaio_tensor_2d(o.get(), KAIO_DTYPE_BF16, rows, cols);
  KT_OK(kaio_silu_gate(s.get(), &tx, &tg, &to));
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_silu_gate_bf16_pdl");  // the fake is 9.0: the sm_90 twin
  EXPECT_EQ(l.block[0], 256u);
  EXPECT_GE(l.grid[0], 1u);
  EXPECT_EQ(launch_param<uint64_t>(0), kaio_buffer_device_ptr(x.get()) + 62);
  EXPECT_EQ(launch_param<uint64_t>(1), kaio_buffer_device_ptr(g.get()));
  EXPECT_EQ(launch_param<uint64_t>(2), kaio_buffer_device_ptr(o.get()));
  EXPECT_EQ(launch_param<uint64_t>(3), static_cast<uint64_t>(rows * cols));

  KT_OK(kaio_gelu(s.get(), &to, &to, KAIO_GELU_TANH));  // in place is allowed
  EXPECT_EQ(last_launch().name, "kaio_gelu_tanh_bf16_pdl");
}

TEST_F(FakeRuntime, RowOpsPickWarpOrBlockPerRow) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  kt::Buffer x = kt::make_buffer(d.get(), 1 << 20), w = kt::make_buffer(d.get(), 1 << 16),
             o = kt::make_buffer(d.get(), 1 << 20);
  struct {
    int64_t rows, cols;
    const char *kernel;
    unsigned grid;
  } shapes[] = {{17, 1024, "kaio_rmsnorm_f16_warp_pdl", 3}, {17, 1025, "kaio_rmsnorm_f16_block_pdl", 17},
                {1, 1, "kaio_rmsnorm_f16_warp_pdl", 1}};
  for (const auto &sh : shapes) {
    kaio_op *op = nullptr;
    KT_OK(kaio_op_create_rmsnorm(&op, d.get(), KAIO_DTYPE_F16, sh.rows, sh.cols, 1e-6f));
    kt::Op guard(op);
    kaio_tensor t[3] = {kaio_tensor_2d(x.get(), KAIO_DTYPE_F16, sh.rows, sh.cols),
                        kaio_tensor_2d(w.get(), KAIO_DTYPE_F16, 1, sh.cols),
                        kaio_tensor_2d(o.get(), KAIO_DTYPE_F16, sh.rows, sh.cols)};
    t[0].row_stride = sh.cols + 3;  // strided input, contiguous output
    KT_OK(kaio_op_launch(op, s.get(), t, 3));
    Launch l = last_launch();
    EXPECT_EQ(l.name, sh.kernel);
    EXPECT_EQ(l.grid[0], sh.grid);
    EXPECT_EQ(launch_param<uint32_t>(3), static_cast<uint32_t>(sh.rows));
    EXPECT_EQ(launch_param<uint32_t>(4), static_cast<uint32_t>(sh.cols));
    EXPECT_EQ(launch_param<uint64_t>(5), static_cast<uint64_t>(sh.cols + 3));
    EXPECT_EQ(launch_param<uint64_t>(6), static_cast<uint64_t>(sh.cols));
    EXPECT_FLOAT_EQ(launch_param<float>(7), 1e-6f);
  }
  kaio_tensor sx = kaio_tensor_2d(x.get(), KAIO_DTYPE_F32, 5, 3000);
  KT_OK(kaio_softmax(s.get(), &sx, &sx));
  EXPECT_EQ(last_launch().name, "kaio_softmax_f32_block_pdl");
}

TEST_F(FakeRuntime, MatmulPicksItsKernelGridAndArguments) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  kt::Buffer a = kt::make_buffer(d.get(), 1 << 20), b = kt::make_buffer(d.get(), 1 << 20),
             c = kt::make_buffer(d.get(), 1 << 20);
  struct {
    kaio_matmul_variant variant;
    kaio_dtype in, out;
    kaio_trans ta, tb;
    const char *kernel;
  } cases[] = {
      {KAIO_MATMUL_SYNC, KAIO_DTYPE_F16, KAIO_DTYPE_F32, KAIO_TRANS_N, KAIO_TRANS_N, "kaio_matmul_sm80_sync_f16_nn"},
      {KAIO_MATMUL_ASYNC, KAIO_DTYPE_BF16, KAIO_DTYPE_BF16, KAIO_TRANS_N, KAIO_TRANS_T, "kaio_matmul_sm80_async_bf16_nt"},
      {KAIO_MATMUL_ASYNC, KAIO_DTYPE_F16, KAIO_DTYPE_F16, KAIO_TRANS_T, KAIO_TRANS_N, "kaio_matmul_sm80_async_f16_tn"},
      {KAIO_MATMUL_SYNC, KAIO_DTYPE_BF16, KAIO_DTYPE_F32, KAIO_TRANS_T, KAIO_TRANS_T, "kaio_matmul_sm80_sync_bf16_tt"},
  };
  const int64_t m = 304, n = 129, k = 72;  // a T-layout A has row_stride M: a multiple of 8
  for (const auto &cs : cases) {
    kaio_matmul_desc desc;
    KT_OK(kaio_matmul_desc_init(&desc, sizeof desc));
    desc.variant = cs.variant;
    desc.in_dtype = cs.in;
    desc.out_dtype = cs.out;
    desc.trans_a = cs.ta;
    desc.trans_b = cs.tb;
    desc.alpha = 2.0f;
    desc.beta = 0.5f;
    kaio_tensor ta = kaio_tensor_2d(a.get(), cs.in, cs.ta ? k : m, cs.ta ? m : k);
    kaio_tensor tb = kaio_tensor_2d(b.get(), cs.in, cs.tb ? n : k, cs.tb ? k : n);
    tb.row_stride = (cs.tb ? k : n) + 7;  // 136 / 79: only multiples of 8 pass
    if (tb.row_stride % 8) tb.row_stride += 8 - tb.row_stride % 8;
    kaio_tensor tc = kaio_tensor_2d(c.get(), cs.out, m, n);
    tc.row_stride = n + 3;  // C takes any stride
    KT_OK(kaio_matmul(s.get(), &ta, &tb, &tc, &desc));
    Launch l = last_launch();
    EXPECT_EQ(l.name, cs.kernel);
    EXPECT_EQ(l.grid[0], 2u);  // ceil(129 / 128)
    EXPECT_EQ(l.grid[1], 3u);  // ceil(304 / 128)
    EXPECT_EQ(l.block[0], 256u);
    // As the PTX declares it: static shared for sync, 64 KiB dynamic for async.
    EXPECT_EQ(l.shared, cs.variant == KAIO_MATMUL_SYNC ? 0u : 65536u);
    EXPECT_EQ(launch_param<uint32_t>(3), static_cast<uint32_t>(m));
    EXPECT_EQ(launch_param<uint32_t>(4), static_cast<uint32_t>(n));
    EXPECT_EQ(launch_param<uint32_t>(5), static_cast<uint32_t>(k));
    EXPECT_EQ(launch_param<uint64_t>(6), static_cast<uint64_t>(cs.ta ? m : k));
    EXPECT_EQ(launch_param<uint64_t>(7), static_cast<uint64_t>(tb.row_stride));
    EXPECT_EQ(launch_param<uint64_t>(8), static_cast<uint64_t>(n + 3));
    EXPECT_FLOAT_EQ(launch_param<float>(9), 2.0f);
    EXPECT_FLOAT_EQ(launch_param<float>(10), 0.5f);
    EXPECT_EQ(launch_param<uint32_t>(11), static_cast<uint32_t>(cs.out));
  }
}

TEST_F(FakeRuntime, DecodeShapedMatmulUsesTheGemvKernels) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  kt::Buffer a = kt::make_buffer(d.get(), 1 << 16), b = kt::make_buffer(d.get(), 1 << 20),
             c = kt::make_buffer(d.get(), 1 << 20);
  struct {
    int64_t m;
    kaio_dtype in;
    kaio_matmul_variant variant;
    kaio_trans tb;
    const char *kernel;
  } cases[] = {
      {1, KAIO_DTYPE_F16, KAIO_MATMUL_AUTO, KAIO_TRANS_T, "kaio_matmul_gemv_f16_m1"},
      {5, KAIO_DTYPE_BF16, KAIO_MATMUL_AUTO, KAIO_TRANS_T, "kaio_matmul_gemv_bf16_m8"},
      {16, KAIO_DTYPE_F16, KAIO_MATMUL_AUTO, KAIO_TRANS_T, "kaio_matmul_gemv_f16_m16"},
      // cc 9.0; one K step on the fake driver's 4 SMs: 64 x 64 tiles
      {17, KAIO_DTYPE_F16, KAIO_MATMUL_AUTO, KAIO_TRANS_T, "kaio_matmul_sm90_f16_nt_m64"},
      {3, KAIO_DTYPE_F16, KAIO_MATMUL_ASYNC, KAIO_TRANS_T, "kaio_matmul_sm80_async_f16_nt"},
      {3, KAIO_DTYPE_F16, KAIO_MATMUL_AUTO, KAIO_TRANS_N, "kaio_matmul_sm90_f16_nn_m64"},
  };
  const int64_t n = 1000, k = 64;
  for (const auto &cs : cases) {
    kaio_matmul_desc desc;
    KT_OK(kaio_matmul_desc_init(&desc, sizeof desc));
    desc.in_dtype = cs.in;
    desc.variant = cs.variant;
    desc.trans_b = cs.tb;
    kaio_tensor ta = kaio_tensor_2d(a.get(), cs.in, cs.m, k);
    kaio_tensor tb = cs.tb ? kaio_tensor_2d(b.get(), cs.in, n, k) : kaio_tensor_2d(b.get(), cs.in, k, n);
    if (!cs.tb) tb.row_stride = 1000;
    kaio_tensor tc = kaio_tensor_2d(c.get(), KAIO_DTYPE_F32, cs.m, n);
    KT_OK(kaio_matmul(s.get(), &ta, &tb, &tc, &desc));
    Launch l = last_launch();
    EXPECT_EQ(l.name, cs.kernel) << "M = " << cs.m;
    if (l.name.find("gemv") != std::string::npos) {
      EXPECT_EQ(l.grid[1], 1u);  // columns spread along x, per the kernel's annotation
      EXPECT_EQ(launch_param<uint32_t>(3), static_cast<uint32_t>(cs.m));
    }
    if (l.name.find("_m64") != std::string::npos) {
      // persistent, two CTAs an SM: min(16 tiles, 2 x 4 SMs) of 256 threads
      EXPECT_EQ(l.grid[0], 8u);
      EXPECT_EQ(l.block[0], 256u);
    }
  }
}

TEST_F(FakeRuntime, HopperMatmulPassesTensorMapsOfTheViews) {
  kt::Device d = kt::open_device(0);  // the fake device is compute capability 9.0
  kt::Stream s = kt::make_stream(d.get());
  const int64_t m = 1000, n = 600, k = 72, lda = 80, ldb = 88;
  kt::Buffer a = kt::make_buffer(d.get(), m * lda * 2), b = kt::make_buffer(d.get(), n * ldb * 2),
             c = kt::make_buffer(d.get(), m * n * 2);
  kaio_matmul_desc desc;
  KT_OK(kaio_matmul_desc_init(&desc, sizeof desc));
  desc.in_dtype = KAIO_DTYPE_BF16;
  desc.out_dtype = KAIO_DTYPE_BF16;
  desc.trans_b = KAIO_TRANS_T;
  kaio_tensor ta = kaio_tensor_2d(a.get(), KAIO_DTYPE_BF16, m, k);
  ta.row_stride = lda;
  kaio_tensor tb = kaio_tensor_2d(b.get(), KAIO_DTYPE_BF16, n, k);
  tb.row_stride = ldb;
  kaio_tensor tc = kaio_tensor_2d(c.get(), KAIO_DTYPE_BF16, m, n);
  KT_OK(kaio_matmul(s.get(), &ta, &tb, &tc, &desc));
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_matmul_sm90_bf16_nt");
  EXPECT_EQ(l.grid[0], 4u);  // persistent: min(8 x 3 tiles, 4 SMs)
  EXPECT_EQ(l.block[0], 384u);
  EXPECT_EQ(l.shared, 197696u);
  struct Record {
    uint64_t address, dim0, dim1, stride, box, flags, rest[10];
  };
  Record ra = launch_param<Record>(0), rb = launch_param<Record>(1);
  EXPECT_EQ(ra.address, kaio_buffer_device_ptr(a.get()));
  EXPECT_EQ(ra.dim0, static_cast<uint64_t>(k));
  EXPECT_EQ(ra.dim1, static_cast<uint64_t>(m));
  EXPECT_EQ(ra.stride, static_cast<uint64_t>(lda * 2));
  EXPECT_EQ(ra.box, 64u | (uint64_t{128} << 32));
  EXPECT_EQ(ra.flags & 0xFF, 9u);         // BFLOAT16
  EXPECT_EQ((ra.flags >> 8) & 0xFF, 3u);  // 128-byte swizzle
  EXPECT_EQ(rb.dim1, static_cast<uint64_t>(n));
  EXPECT_EQ(rb.stride, static_cast<uint64_t>(ldb * 2));
  EXPECT_EQ(rb.box, 64u | (uint64_t{256} << 32));
  EXPECT_EQ(launch_param<uint64_t>(2), kaio_buffer_device_ptr(c.get()));
  EXPECT_EQ(launch_param<uint32_t>(5), static_cast<uint32_t>(k));
  EXPECT_EQ(launch_param<uint32_t>(9), static_cast<uint32_t>(KAIO_DTYPE_BF16));
  EXPECT_EQ(launch_param<uint32_t>(12), 64u);  // kchunk: K steps per f32 accumulation chunk
}

// Few tiles and a long K: a prepared Hopper matmul splits K over the idle SMs
// (the fake device has 4); with the wide tiles (no _sk kernel), it sums the
// splits in a second kernel. One-shot calls own no workspace and never split
// through it; they take the 128 x 128 tiles instead. N 384: too many tiles
// of any width for clusters of 2 or more CTAs on 4 SMs (below).
// An nn.Linear product (A M x K, B N x K, C M x N, one dtype throughout),
// alpha 0.5, beta 2, for the Hopper split-K plans below.
struct LinearProduct {
  kt::Buffer a, b, c;
  kaio_matmul_desc desc;
  kaio_tensor t[3];

  LinearProduct(kaio_device *d, int64_t m, int64_t n, int64_t k, kaio_dtype dt)
      : a(kt::make_buffer(d, m * k * 2)), b(kt::make_buffer(d, n * k * 2)),
        c(kt::make_buffer(d, m * n * 2)) {
    EXPECT_EQ(kaio_matmul_desc_init(&desc, sizeof desc), KAIO_OK);
    desc.in_dtype = desc.out_dtype = dt;
    desc.trans_b = KAIO_TRANS_T;
    desc.alpha = 0.5f;
    desc.beta = 2.0f;
    desc.m = m;
    desc.n = n;
    desc.k = k;
    t[0] = kaio_tensor_2d(a.get(), dt, m, k);
    t[1] = kaio_tensor_2d(b.get(), dt, n, k);
    t[2] = kaio_tensor_2d(c.get(), dt, m, n);
  }
};

TEST_F(FakeRuntime, HopperMatmulSplitsLongKOverIdleSmsInPreparedOps) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  const int64_t m = 128, n = 384, k = 16384;
  LinearProduct p(d.get(), m, n, k, KAIO_DTYPE_F16);
  const kt::Buffer &c = p.c;
  const kaio_matmul_desc &desc = p.desc;
  const kaio_tensor *t = p.t;

  KT_OK(kaio_matmul(s.get(), &t[0], &t[1], &t[2], &desc));
  Launch one = last_launch();
  EXPECT_EQ(one.name, "kaio_matmul_sm90_f16_nt_n128") << "three 128-wide tiles beat two 256-wide";
  EXPECT_EQ(one.grid[0], 3u);
  EXPECT_EQ(launch_param<uint32_t>(10), 256u) << "one split: every K step";
  EXPECT_EQ(launch_param<uint64_t>(2), kaio_buffer_device_ptr(c.get()));

  kaio_op *raw = nullptr;
  KT_OK(kaio_op_create_matmul(&raw, d.get(), &desc));
  kt::Op op(raw);
  const unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op.get(), s.get(), t, 3));
  EXPECT_EQ(kt::fake().launch_count() - before, 2u);
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_splitk_reduce");
  EXPECT_EQ(l.grid[0], 2u) << "two blocks of 256 columns a row";
  EXPECT_EQ(l.grid[1], static_cast<unsigned>(m));
  EXPECT_EQ(l.block[0], 256u);
  EXPECT_NE(launch_param<uint64_t>(0), kaio_buffer_device_ptr(c.get())) << "partials go to a workspace";
  EXPECT_EQ(launch_param<uint64_t>(1), kaio_buffer_device_ptr(c.get()));
  EXPECT_EQ(launch_param<uint32_t>(2), static_cast<uint32_t>(m));
  EXPECT_EQ(launch_param<uint32_t>(3), static_cast<uint32_t>(n));
  EXPECT_EQ(launch_param<uint64_t>(4), static_cast<uint64_t>(n));
  EXPECT_EQ(launch_param<uint32_t>(5), 2u) << "4 SMs, two tiles: 2 splits of 128 K steps";
  EXPECT_EQ(launch_param<uint64_t>(6), static_cast<uint64_t>(m * n));
  EXPECT_EQ(launch_param<float>(7), 0.5f);
  EXPECT_EQ(launch_param<float>(8), 2.0f);
  EXPECT_EQ(launch_param<uint32_t>(9), static_cast<uint32_t>(KAIO_DTYPE_F16));
}

// Where the 128 x 128 or 128 x 64 tiles split K and a cluster of the split's
// CTAs fits the GPU, the CTAs of a tile (one cluster, along grid z) sum
// their partials through distributed shared memory: one launch, no
// workspace, so one-shot calls split too. (On a driver that cannot load the
// cluster kernels, PTX 8.1, the _sk kernels split instead:
// host_old_driver_test.cpp.)
TEST_F(FakeRuntime, HopperMatmulSplitsKOverAClusterWithoutWorkspace) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  LinearProduct p(d.get(), 128, 128, 4096, KAIO_DTYPE_BF16);
  const kt::Buffer &c = p.c;
  const kaio_tensor *t = p.t;
  kaio_op *raw = nullptr;
  KT_OK(kaio_op_create_matmul(&raw, d.get(), &p.desc));
  kt::Op op(raw);
  for (int run = 0; run < 3; ++run) {
    const unsigned long long before = kt::fake().launch_count();
    if (run < 2)
      KT_OK(kaio_op_launch(op.get(), s.get(), t, 3));
    else
      KT_OK(kaio_matmul(s.get(), &t[0], &t[1], &t[2], &p.desc));
    EXPECT_EQ(kt::fake().launch_count() - before, 1u) << "no reduction launch";
    Launch l = last_launch();
    EXPECT_EQ(l.name, "kaio_matmul_sm90_bf16_nt_n128_k4") << "one 128-wide tile, 4 splits";
    EXPECT_EQ(l.grid[0], 1u);
    EXPECT_EQ(l.grid[1], 1u);
    EXPECT_EQ(l.grid[2], 4u) << "the cluster's CTAs along z";
    EXPECT_EQ(launch_param<uint64_t>(2), kaio_buffer_device_ptr(c.get())) << "C from the kernel";
    EXPECT_EQ(launch_param<float>(7), 0.5f);
    EXPECT_EQ(launch_param<float>(8), 2.0f);
    EXPECT_EQ(launch_param<uint32_t>(9), static_cast<uint32_t>(KAIO_DTYPE_BF16));
    EXPECT_EQ(launch_param<uint32_t>(10), 16u) << "4 splits of 16 K steps";
    EXPECT_EQ(launch_param<uint32_t>(12), 64u) << "K chunks of 64 steps";
  }
}

TEST_F(FakeRuntime, MatmulBackwardRunsTwoTransposedProductsAndRoundsF32Grads) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  const int64_t m = 24, n = 40, k = 16;
  kt::Buffer dc = kt::make_buffer(d.get(), m * n * 4), a = kt::make_buffer(d.get(), m * k * 2),
             b = kt::make_buffer(d.get(), k * n * 2), da = kt::make_buffer(d.get(), m * k * 4),
             db = kt::make_buffer(d.get(), k * n * 4);
  kaio_matmul_backward_desc desc;
  KT_OK(kaio_matmul_backward_desc_init(&desc, sizeof desc));
  desc.grad_dtype = KAIO_DTYPE_F32;
  desc.variant = KAIO_MATMUL_ASYNC;  // the sm_80 kernels' argument layout is checked below
  desc.m = m;
  desc.n = n;
  desc.k = k;
  desc.beta = 1.0f;
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_matmul_backward(&op, d.get(), &desc));
  kt::Op guard(op);
  kaio_tensor t[] = {kaio_tensor_2d(dc.get(), KAIO_DTYPE_F32, m, n),
                     kaio_tensor_2d(a.get(), KAIO_DTYPE_F16, m, k),
                     kaio_tensor_2d(b.get(), KAIO_DTYPE_F16, k, n),
                     kaio_tensor_2d(da.get(), KAIO_DTYPE_F32, m, k),
                     kaio_tensor_2d(db.get(), KAIO_DTYPE_F32, k, n)};
  unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op, s.get(), t, 5));
  EXPECT_EQ(kt::fake().launch_count(), before + 3);  // round dC, dA, dB
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_matmul_sm80_async_f16_tn");  // dB = A^T · dC
  EXPECT_EQ(launch_param<uint32_t>(3), static_cast<uint32_t>(k));
  EXPECT_EQ(launch_param<uint32_t>(4), static_cast<uint32_t>(n));
  EXPECT_EQ(launch_param<uint32_t>(5), static_cast<uint32_t>(m));
  EXPECT_EQ(launch_param<uint64_t>(0), kaio_buffer_device_ptr(a.get()));
  EXPECT_FLOAT_EQ(launch_param<float>(10), 1.0f);

  t[4].buffer = nullptr;  // dA only
  before = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op, s.get(), t, 5));
  EXPECT_EQ(kt::fake().launch_count(), before + 2);
  EXPECT_EQ(last_launch().name, "kaio_matmul_sm80_async_f16_nt");  // dA = dC · B^T

  t[0].dtype = KAIO_DTYPE_F16;  // the op was made for an f32 dC
  EXPECT_EQ(kaio_op_launch(op, s.get(), t, 5), KAIO_ERROR_INVALID_DTYPE);
  t[0].dtype = KAIO_DTYPE_F32;  // the one-shot form never allocates a workspace
  EXPECT_EQ(kaio_matmul_tc_backward(s.get(), &t[0], &t[1], &t[2], &t[3], &t[4]),
            KAIO_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(kaio_last_error()).find("kaio_op_create_matmul_backward"),
            std::string::npos);
}

TEST_F(FakeRuntime, UserKernelArgumentsArePackedAsGiven) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  const char *ptx =
      ".version 7.0\n.target sm_80\n.address_size 64\n"
      ".visible .entry scale(.param .u64 p, .param .f32 s, .param .u32 n)\n{ ret; }\n";
  kaio_module *m = nullptr;
  KT_OK(kaio_module_load_ptx(&m, d.get(), ptx));
  kaio_kernel *k = nullptr;
  KT_OK(kaio_module_get_kernel(&k, m, "scale"));
  kaio_module_destroy(m);  // the kernel keeps its module
  kt::Kernel kernel(k);
  kaio_kernel_attributes attrs{};
  attrs.struct_size = sizeof attrs;
  KT_OK(kaio_kernel_get_attributes(k, &attrs));
  EXPECT_EQ(attrs.param_bytes, 16);
  EXPECT_GT(attrs.registers, 0);
  struct {
    uint64_t p;
    float s;
    uint32_t n;
  } args = {0x1234, 2.5f, 77};
  kaio_launch_config c = {{3, 0, 0}, {128, 0, 0}, 0, 0};  // zero y, z mean 1
  KT_OK(kaio_kernel_launch(k, s.get(), &c, &args, sizeof args));
  Launch l = last_launch();
  EXPECT_EQ(l.name, "scale");
  EXPECT_EQ(l.grid[0], 3u);
  EXPECT_EQ(l.grid[1], 1u);
  EXPECT_EQ(l.block[2], 1u);
  EXPECT_EQ(launch_param<uint64_t>(0), 0x1234u);
  EXPECT_FLOAT_EQ(launch_param<float>(1), 2.5f);
  EXPECT_EQ(launch_param<uint32_t>(2), 77u);
}

TEST_F(FakeRuntime, ArgumentStructTailPaddingIsAccepted) {
  kt::Device d = kt::open_device(0);
  kt::Stream s = kt::make_stream(d.get());
  const char *ptx = ".version 7.0\n.target sm_80\n.address_size 64\n"
                    ".visible .entry k(.param .u64 p, .param .u32 n)\n{ ret; }\n";
  kaio_module *m = nullptr;
  KT_OK(kaio_module_load_ptx(&m, d.get(), ptx));
  kt::Module gm(m);
  kaio_kernel *k = nullptr;
  KT_OK(kaio_module_get_kernel(&k, m, "k"));
  kt::Kernel gk(k);
  struct {
    uint64_t p;
    uint32_t n;  // 4 bytes of tail padding follow: sizeof is 16, the params 12
  } args = {42, 7};
  kaio_launch_config c = {{1, 1, 1}, {32, 1, 1}, 0, 0};
  KT_OK(kaio_kernel_launch(k, s.get(), &c, &args, sizeof args));
  EXPECT_EQ(launch_param<uint32_t>(1), 7u);
  EXPECT_EQ(kaio_kernel_launch(k, s.get(), &c, &args, 20), KAIO_ERROR_INVALID_ARGUMENT);
}

TEST_F(FakeRuntime, PreparedOpRunsOnAnyStreamOfItsDevice) {
  kt::Device d = kt::open_device(0);
  kt::Stream s1 = kt::make_stream(d.get()), s2 = kt::make_stream(d.get());
  kt::Buffer b = kt::make_buffer(d.get(), 4 * 64);
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_gelu(&op, d.get(), KAIO_DTYPE_F32, 4, 16, KAIO_GELU_ERF));
  kt::Op guard(op);
  kaio_tensor t[2] = {kaio_tensor_2d(b.get(), KAIO_DTYPE_F32, 4, 16),
                      kaio_tensor_2d(b.get(), KAIO_DTYPE_F32, 4, 16)};
  unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op, s1.get(), t, 2));
  KT_OK(kaio_op_launch(op, s2.get(), t, 2));
  EXPECT_EQ(kt::fake().launch_count(), before + 2);
  EXPECT_EQ(last_launch().name, "kaio_gelu_erf_f32_pdl");
}

// Driver failures are per process (the driver loads once), so each runs in a
// fresh child process with its own environment.
class DriverFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (!kt::on_fake_driver())
      GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host)";
  }
};

// Exits 0 when `call` yields `expected` and the message has `part`.
[[noreturn]] void expect_in_child(kaio_status expected, const char *part, kaio_status got) {
  std::string msg = kaio_last_error();
  bool ok = got == expected && msg.find(part) != std::string::npos;
  if (!ok) std::fprintf(stderr, "got %s: %s\n", kaio_status_name(got), msg.c_str());
  std::_Exit(ok ? 0 : 1);
}

TEST_F(DriverFailure, MissingLibraryIsDriverNotFound) {
  EXPECT_EXIT(
      {
        setenv("LIBKAIO_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
        kaio_device *d = nullptr;
        expect_in_child(KAIO_ERROR_DRIVER_NOT_FOUND, "/nonexistent/libcuda.so.1",
                        kaio_device_open(&d, 0));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(DriverFailure, ProbeReportsMissingDriverWithoutFailing) {
  EXPECT_EXIT(
      {
        setenv("LIBKAIO_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
        kaio_probe_info i{};
        i.struct_size = sizeof i;
        kaio_status s = kaio_probe(&i);
        bool ok = s == KAIO_OK && i.driver_status == KAIO_ERROR_DRIVER_NOT_FOUND &&
                  i.device_count == 0 && std::strstr(i.message, "cannot open");
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(DriverFailure, MissingEntryPointIsDriverTooOld) {
  EXPECT_EXIT(
      {
        // The dlsym fallback would find the versioned exports; this fake has none.
        const char *proc_only = std::getenv("KAIO_TEST_FAKE_PROC_ONLY");
        if (!proc_only) std::_Exit(3);
        setenv("LIBKAIO_CUDA_DRIVER", proc_only, 1);
        setenv("KAIO_FAKE_MISSING", "cuMemAlloc,cuStreamGetCtx", 1);
        int32_t n = 0;
        expect_in_child(KAIO_ERROR_DRIVER_TOO_OLD, "cuMemAlloc_v2, cuStreamGetCtx",
                        kaio_device_count(&n));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(DriverFailure, OptionalEntryPointMayBeMissing) {
  EXPECT_EXIT(
      {
        const char *proc_only = std::getenv("KAIO_TEST_FAKE_PROC_ONLY");
        if (!proc_only) std::_Exit(3);
        setenv("LIBKAIO_CUDA_DRIVER", proc_only, 1);
        setenv("KAIO_FAKE_MISSING", "cuFuncGetParamInfo", 1);
        int32_t n = 0;
        expect_in_child(KAIO_OK, "", kaio_device_count(&n));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(DriverFailure, NoDeviceIsReported) {
  EXPECT_EXIT(
      {
        setenv("KAIO_FAKE_DEVICES", "0", 1);
        kaio_device *d = nullptr;
        expect_in_child(KAIO_ERROR_NO_DEVICE, "no CUDA device", kaio_device_open(&d, 0));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(DriverFailure, InitFailureKeepsTheDriverCode) {
  EXPECT_EXIT(
      {
        setenv("KAIO_FAKE_INIT_ERROR", "999", 1);
        kaio_device *d = nullptr;
        kaio_status s = kaio_device_open(&d, 0);
        if (kaio_last_error_driver_code() != 999) std::_Exit(2);
        expect_in_child(KAIO_ERROR_NO_DEVICE, "cuInit failed", s);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(DriverFailure, OldArchitectureIsUnsupportedArch) {
  EXPECT_EXIT(
      {
        setenv("KAIO_FAKE_CC", "75", 1);
        kaio_device *d = nullptr;
        if (kaio_device_open(&d, 0) != KAIO_OK) std::_Exit(2);
        kaio_op *op = nullptr;
        expect_in_child(KAIO_ERROR_UNSUPPORTED_ARCH, "needs compute capability 8.0",
                        kaio_op_create_softmax(&op, d, KAIO_DTYPE_F32, 2, 2));
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
