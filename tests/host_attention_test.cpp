// Attention on the fake driver: kernel choice, grid and arguments of the
// forward and the three backward kernels, and every rejected input with its
// status, a message naming the function and the argument, and no launch.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/fake_device_test.hpp"
#include "support/kaio_test.hpp"

namespace {

class FakeAttention : public kt::FakeDeviceTest {
 protected:
  void SetUp() override {
    kt::FakeDeviceTest::SetUp();
    if (IsSkipped()) return;
    buf_ = kt::make_buffer(dev_.get(), 8 << 20);
  }

  struct Launch {
    std::string name;
    unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, shared = 0;
  };

  static Launch last_launch() {
    Launch l;
    char name[128] = {0};
    EXPECT_EQ(kt::fake().last_launch(name, sizeof name, l.grid, l.block, &l.shared), 0);
    l.name = name;
    return l;
  }

  template <class T>
  static T param(size_t index) {
    return kt::launch_param<T>(index);
  }

  // B 2, Sq 100, Sk 77, Hq 4, Hkv 2, D 64, laid out in one 8 MiB buffer:
  // Q at 0, K 1 MiB, V 2 MiB, O 3 MiB, LSE 4 MiB, dO 5 MiB, dQ 6 MiB, dK 7 MiB,
  // dV 7.5 MiB.
  static constexpr int64_t B = 2, Sq = 100, Sk = 77, Hq = 4, Hkv = 2, D = 64;
  kaio_tensor bshd(uint64_t offset, kaio_dtype dt, int64_t seq, int64_t heads) const {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), dt, B * seq, heads * D);
    t.offset_bytes = offset;
    return t;
  }
  kaio_attention_desc desc() const {
    kaio_attention_desc d;
    EXPECT_EQ(kaio_attention_desc_init(&d, sizeof d), KAIO_OK);
    d.dtype = KAIO_DTYPE_BF16;
    d.batch = B;
    d.seq_q = Sq;
    d.seq_k = Sk;
    d.heads_q = Hq;
    d.heads_kv = Hkv;
    d.head_dim = D;
    return d;
  }
  struct Fwd {
    kaio_tensor t[5];
  };
  Fwd fwd(kaio_dtype dt = KAIO_DTYPE_BF16) const {
    kaio_tensor lse = kaio_tensor_2d(buf_.get(), KAIO_DTYPE_F32, B * Hq, Sq);
    lse.offset_bytes = 4 << 20;
    return {{bshd(0, dt, Sq, Hq), bshd(1 << 20, dt, Sk, Hkv), bshd(2 << 20, dt, Sk, Hkv),
             bshd(3 << 20, dt, Sq, Hq), lse}};
  }
  struct Bwd {
    kaio_tensor t[9];
  };
  Bwd bwd() const {
    Fwd f = fwd();
    const kaio_dtype dt = KAIO_DTYPE_BF16;
    return {{bshd(5 << 20, dt, Sq, Hq), f.t[0], f.t[1], f.t[2], f.t[3], f.t[4],
             bshd(6 << 20, dt, Sq, Hq), bshd(7 << 20, dt, Sk, Hkv), bshd((15 << 20) / 2, dt, Sk, Hkv)}};
  }
  // From 1024 keys the sm_90a backward is the fused kernel: B 1, Sq 100,
  // Sk 4096, Hq 2, Hkv 1, D 64 (K, V, dK, dV 512 KiB each), tensor i at
  // i * 512 KiB.
  kaio_attention_desc fused_desc() const {
    kaio_attention_desc f = desc();
    f.batch = 1;
    f.seq_k = 4096;
    f.heads_q = 2;
    f.heads_kv = 1;
    return f;
  }
  Bwd fused_bwd() const {
    auto t2 = [&](uint64_t at, kaio_dtype dt, int64_t rows, int64_t cols) {
      kaio_tensor t = kaio_tensor_2d(buf_.get(), dt, rows, cols);
      t.offset_bytes = at << 19;
      return t;
    };
    return {{t2(0, KAIO_DTYPE_BF16, 100, 128), t2(1, KAIO_DTYPE_BF16, 100, 128),
             t2(2, KAIO_DTYPE_BF16, 4096, 64), t2(3, KAIO_DTYPE_BF16, 4096, 64),
             t2(4, KAIO_DTYPE_BF16, 100, 128), t2(5, KAIO_DTYPE_F32, 2, 100),
             t2(6, KAIO_DTYPE_BF16, 100, 128), t2(7, KAIO_DTYPE_BF16, 4096, 64),
             t2(8, KAIO_DTYPE_BF16, 4096, 64)}};
  }

  kt::Buffer buf_;
};

TEST_F(FakeAttention, ForwardPicksKernelGridAndArguments) {
  for (kaio_attention_mask mask : {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL,
                                   KAIO_ATTENTION_CAUSAL_TOP_LEFT}) {
    kaio_attention_desc d = desc();
    d.mask = mask;
    d.variant = KAIO_ATTENTION_SM80;  // 64 query rows per CTA
    Fwd f = fwd();
    KT_OK(kaio_attention(stream_.get(), &f.t[0], &f.t[1], &f.t[2], &f.t[3], &f.t[4], &d));
    Launch l = last_launch();
    EXPECT_EQ(l.name, "kaio_attn_fwd_bf16_d64");
    EXPECT_EQ(l.grid[0], 2u);        // ceil(100 / 64) query tiles
    EXPECT_EQ(l.grid[1], 8u);        // B * Hq
    EXPECT_EQ(l.block[0], 128u);
    EXPECT_GT(l.shared, 0u);         // as the PTX annotation says
    EXPECT_EQ(param<uint32_t>(5), 100u);
    EXPECT_EQ(param<uint32_t>(6), 77u);
    EXPECT_EQ(param<uint32_t>(7), 4u);
    EXPECT_EQ(param<uint32_t>(8), 2u);                     // group = Hq / Hkv
    EXPECT_EQ(param<uint64_t>(9), uint64_t{100 * 4 * 64});  // Q batch stride
    EXPECT_EQ(param<uint64_t>(10), uint64_t{4 * 64});       // Q row stride
    EXPECT_EQ(param<uint64_t>(11), uint64_t{77 * 2 * 64});  // K batch stride
    EXPECT_FLOAT_EQ(param<float>(18), static_cast<float>(1.4426950408889634 / 8.0));
    EXPECT_EQ(param<uint32_t>(19), mask == KAIO_ATTENTION_MASK_NONE ? 0u : 1u);
    EXPECT_EQ(static_cast<int32_t>(param<uint32_t>(20)), mask == KAIO_ATTENTION_CAUSAL ? 77 - 100 : 0);
    EXPECT_EQ(param<uint32_t>(21), static_cast<uint32_t>(KAIO_DTYPE_BF16));
  }
  // AUTO, on the fake device (compute capability 9.0), takes the sm_90a
  // kernel for head dims 64 and 128, the 128-row sm_80 kernels for the other
  // dims up to 128 and the 64-row ones above.
  for (int64_t dim : {32, 64, 256}) {
    kaio_attention_desc d = desc();
    d.head_dim = dim;
    kaio_op *op = nullptr;
    KT_OK(kaio_op_create_attention(&op, dev_.get(), &d));
    kt::Op guard(op);
    Fwd f = fwd();
    for (int i = 0; i < 4; ++i) f.t[i].cols = f.t[i].cols / D * dim;
    KT_OK(kaio_op_launch(op, stream_.get(), f.t, 5));
    Launch l = last_launch();
    EXPECT_EQ(l.name, dim == 64   ? "kaio_attn_fwd_sm90_bf16_d64"
                      : dim == 32 ? "kaio_attn_fwd_m128_bf16_d32"
                                  : "kaio_attn_fwd_bf16_d256");
    EXPECT_EQ(l.grid[0], dim == 256 ? 2u : 1u);  // ceil(100 / 64) or ceil(100 / 128)
  }
  // A NULL-buffer LSE is skipped: the kernel gets a null pointer.
  kaio_attention_desc d = desc();
  d.variant = KAIO_ATTENTION_SM80_M128;
  d.out_dtype = KAIO_DTYPE_F32;
  d.softmax_scale = 0.5f;
  Fwd f = fwd();
  f.t[3].dtype = KAIO_DTYPE_F32;
  kaio_tensor no_lse = f.t[4];
  no_lse.buffer = nullptr;
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_attention(&op, dev_.get(), &d));
  kt::Op guard(op);
  f.t[4] = no_lse;
  KT_OK(kaio_op_launch(op, stream_.get(), f.t, 5));
  EXPECT_EQ(param<uint64_t>(4), 0u);
  EXPECT_FLOAT_EQ(param<float>(18), static_cast<float>(0.5 * 1.4426950408889634));
  EXPECT_EQ(param<uint32_t>(21), static_cast<uint32_t>(KAIO_DTYPE_F32));
}

// The sm_90a forward gets Q, K and V as 4-D tensor maps {D, H, S, B} of the
// BSHD views (one head's 128 rows per box), then the scalars.
TEST_F(FakeAttention, Sm90ForwardPassesFourDimensionalTensorMaps) {
  kaio_attention_desc d = desc();
  d.variant = KAIO_ATTENTION_SM90;
  d.mask = KAIO_ATTENTION_CAUSAL;
  Fwd f = fwd();
  f.t[0].row_stride = Hq * D + 8;  // padded Q rows
  KT_OK(kaio_attention(stream_.get(), &f.t[0], &f.t[1], &f.t[2], &f.t[3], &f.t[4], &d));
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_attn_fwd_sm90_bf16_d64");
  EXPECT_EQ(l.grid[0], 1u);  // ceil(100 / 128)
  EXPECT_EQ(l.grid[1], 8u);  // B * Hq
  EXPECT_EQ(l.block[0], 384u);
  EXPECT_GT(l.shared, 48u << 10);
  struct Record {
    uint64_t address, dim0, dim1, stride1, box01, flags, rank, dim2, stride2, box2, dim3,
        stride3, box3, rest[3];
  };
  const uint64_t base = kaio_buffer_device_ptr(buf_.get());
  Record rq = param<Record>(0), rk = param<Record>(1), rv = param<Record>(2);
  EXPECT_EQ(rq.address, base);
  EXPECT_EQ(rq.rank, 4u);
  EXPECT_EQ(rq.dim0, uint64_t{D});
  EXPECT_EQ(rq.dim1, uint64_t{Hq});
  EXPECT_EQ(rq.dim2, uint64_t{Sq});
  EXPECT_EQ(rq.dim3, uint64_t{B});
  EXPECT_EQ(rq.stride1, uint64_t{D * 2});
  EXPECT_EQ(rq.stride2, uint64_t{(Hq * D + 8) * 2});
  EXPECT_EQ(rq.stride3, uint64_t{Sq * (Hq * D + 8) * 2});
  EXPECT_EQ(rq.box01, 64u | (uint64_t{1} << 32));
  EXPECT_EQ(rq.box2, 128u);
  EXPECT_EQ(rq.box3, 1u);
  EXPECT_EQ(rq.flags & 0xFF, 9u);         // BFLOAT16
  EXPECT_EQ((rq.flags >> 8) & 0xFF, 3u);  // 128-byte swizzle
  EXPECT_EQ(rk.address, base + (1 << 20));
  EXPECT_EQ(rk.dim1, uint64_t{Hkv});
  EXPECT_EQ(rk.dim2, uint64_t{Sk});
  EXPECT_EQ(rk.stride2, uint64_t{Hkv * D * 2});
  EXPECT_EQ(rv.address, base + (2 << 20));
  EXPECT_EQ(rv.box2, 128u);
  EXPECT_EQ(param<uint64_t>(3), base + (3 << 20));  // O
  EXPECT_EQ(param<uint64_t>(4), base + (4 << 20));  // LSE
  EXPECT_EQ(param<uint32_t>(5), uint32_t{Sq});
  EXPECT_EQ(param<uint32_t>(6), uint32_t{Sk});
  EXPECT_EQ(param<uint32_t>(7), uint32_t{Hq});
  EXPECT_EQ(param<uint32_t>(8), 2u);                       // group
  EXPECT_EQ(param<uint64_t>(9), uint64_t{Sq * Hq * D});    // O batch stride
  EXPECT_EQ(param<uint64_t>(10), uint64_t{Hq * D});        // O row stride
  EXPECT_EQ(param<uint64_t>(11), uint64_t{Sq});            // LSE row stride
  EXPECT_FLOAT_EQ(param<float>(12), static_cast<float>(1.4426950408889634 / 8.0));
  EXPECT_EQ(param<uint32_t>(13), 1u);
  EXPECT_EQ(static_cast<int32_t>(param<uint32_t>(14)), int32_t{Sk - Sq});
  EXPECT_EQ(param<uint32_t>(15), static_cast<uint32_t>(KAIO_DTYPE_BF16));

  // SM90 takes head dims 64 and 128 only; elsewhere AUTO is the way.
  d.head_dim = 96;
  kaio_op *op = nullptr;
  EXPECT_EQ(kaio_op_create_attention(&op, dev_.get(), &d), KAIO_ERROR_UNSUPPORTED);
  EXPECT_EQ(op, nullptr);
  EXPECT_NE(std::string(kaio_last_error()).find("KAIO_ATTENTION_SM90"), std::string::npos);
  EXPECT_NE(std::string(kaio_last_error()).find("takes head dims 64 and 128."), std::string::npos)
      << kaio_last_error();
}

// On a device that is not compute capability 9.0, SM90 is refused by name
// and AUTO falls back to the sm_80 kernels. The child re-runs the binary
// (threadsafe death tests), so the fake driver starts with the new CC.
TEST(FakeAttentionArch, Sm90VariantNeedsComputeCapability90) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (!kt::on_fake_driver()) GTEST_SKIP() << "needs the fake driver: run through `meson test`";
  EXPECT_EXIT(
      {
        setenv("KAIO_FAKE_CC", "80", 1);
        kaio_device *dev = nullptr;
        if (kaio_device_open(&dev, 0) != KAIO_OK) std::_Exit(2);
        kaio_attention_desc d;
        if (kaio_attention_desc_init(&d, sizeof d) != KAIO_OK) std::_Exit(6);
        d.batch = d.seq_q = d.seq_k = d.heads_q = d.heads_kv = 1;
        d.head_dim = 64;
        d.variant = KAIO_ATTENTION_SM90;
        kaio_op *op = nullptr;
        if (kaio_op_create_attention(&op, dev, &d) != KAIO_ERROR_UNSUPPORTED_ARCH) std::_Exit(3);
        if (!std::strstr(kaio_last_error(), "compute capability 8.0")) std::_Exit(4);
        d.variant = KAIO_ATTENTION_AUTO;
        if (kaio_op_create_attention(&op, dev, &d) != KAIO_OK) std::_Exit(5);
        kaio_op_destroy(op);
        kaio_device_destroy(dev);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// If the fused kernel's convert launch fails, dQ's sums stay in the
// workspace: the next launch zeroes the workspace's dQ rows and semaphores on
// its stream before the fused kernel, and the launch after that does not.
TEST_F(FakeAttention, FusedBackwardZeroesTheWorkspaceAfterAFailedConvert) {
  kaio_attention_desc f = fused_desc();
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_attention_backward(&op, dev_.get(), &f));
  kt::Op guard(op);
  const Bwd t = fused_bwd();
  unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op, stream_.get(), t.t, 9));
  EXPECT_EQ(kt::fake().launch_count() - before, 3u);
  EXPECT_EQ(last_launch().name, "kaio_attn_bwd_dq_convert_sm90_bf16_d64");
  const uint64_t dq_ws = param<uint64_t>(0), sem = param<uint64_t>(1);
  const uint64_t ws_bytes = sem + 2 * 2 * 4 - dq_ws;  // B*Hq heads x ceil(100 / 64) u32
  const unsigned long long memsets = kt::fake().memsets(nullptr, nullptr);
  kt::fake().fail_launch("dq_convert", 1);  // CUDA_ERROR_INVALID_VALUE
  EXPECT_NE(kaio_op_launch(op, stream_.get(), t.t, 9), KAIO_OK);
  EXPECT_EQ(kt::fake().memsets(nullptr, nullptr), memsets);
  EXPECT_EQ(last_launch().name, "kaio_attn_bwd_fused_sm90_bf16_d64");
  EXPECT_EQ(param<uint32_t>(25), 1u);  // ordered
  KT_OK(kaio_op_launch(op, stream_.get(), t.t, 9));
  unsigned long long dst = 0;
  size_t bytes = 0;
  EXPECT_EQ(kt::fake().memsets(&dst, &bytes), memsets + 1);
  EXPECT_EQ(dst, dq_ws);
  EXPECT_EQ(bytes, ws_bytes);
  KT_OK(kaio_op_launch(op, stream_.get(), t.t, 9));
  EXPECT_EQ(kt::fake().memsets(nullptr, nullptr), memsets + 1);
}

// The fused kernel (its last launch: dQ's convert) from 1024 keys, every
// mask; below, the dQ and dK/dV kernels. Causal GQA (Hq 2, Hkv 1 here) too,
// deterministic or not.
TEST_F(FakeAttention, FusedBackwardFromItsKeyCounts) {
  auto last_kernel = [&](int64_t keys, kaio_attention_mask mask, int32_t deterministic) {
    Bwd t = fused_bwd();
    for (int i : {2, 3, 7, 8}) t.t[i].rows = keys;
    kaio_attention_desc f = fused_desc();
    f.seq_k = keys;
    f.mask = mask;
    f.deterministic = deterministic;
    kaio_op *op = nullptr;
    EXPECT_EQ(kaio_op_create_attention_backward(&op, dev_.get(), &f), KAIO_OK);
    kt::Op guard(op);
    const unsigned long long memsets = kt::fake().memsets(nullptr, nullptr);
    EXPECT_EQ(kaio_op_launch(op, stream_.get(), t.t, 9), KAIO_OK);
    const std::string name = last_launch().name;
    // fused and deterministic 0: the dQ sums zeroed by a memset after convert
    const bool zeroed = deterministic == 0 && name.find("convert") != std::string::npos;
    EXPECT_EQ(kt::fake().memsets(nullptr, nullptr), memsets + (zeroed ? 1 : 0));
    return name;
  };
  const std::string fused = "kaio_attn_bwd_dq_convert_sm90_bf16_d64",
                    apart = "kaio_attn_bwd_dkdv_sm90_bf16_d64";
  for (int32_t det : {1, 0}) {
    SCOPED_TRACE(det);
    for (kaio_attention_mask mask :
         {KAIO_ATTENTION_CAUSAL, KAIO_ATTENTION_CAUSAL_TOP_LEFT, KAIO_ATTENTION_MASK_NONE}) {
      EXPECT_EQ(last_kernel(4096, mask, det), fused);
      EXPECT_EQ(last_kernel(1024, mask, det), fused);
      EXPECT_EQ(last_kernel(1023, mask, det), apart);
    }
  }
}

TEST_F(FakeAttention, BackwardLaunchesPreprocessDqThenDkDv) {
  kaio_attention_desc d = desc();
  d.mask = KAIO_ATTENTION_CAUSAL;
  d.variant = KAIO_ATTENTION_SM80;
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_attention_backward(&op, dev_.get(), &d));
  kt::Op guard(op);
  Bwd b = bwd();
  const unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op, stream_.get(), b.t, 9));
  EXPECT_EQ(kt::fake().launch_count() - before, 3u);
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_attn_bwd_dkdv_bf16_d64");
  EXPECT_EQ(l.grid[0], 2u);  // ceil(77 / 64) key tiles
  EXPECT_EQ(l.grid[1], 4u);  // B * Hkv
  EXPECT_EQ(l.block[0], 128u);
  EXPECT_FLOAT_EQ(param<float>(25), 0.125f);  // scale 1/sqrt(64)
  EXPECT_EQ(static_cast<int32_t>(param<uint32_t>(28)), 77 - 100);
  // AUTO on the fake sm_90: the same Dv kernel, then the sm_90a dQ kernel
  // (Q, dO, K, V maps) and dK/dV kernel (K, V, Q, dO maps).
  d.variant = KAIO_ATTENTION_AUTO;
  kaio_op *op90 = nullptr;
  KT_OK(kaio_op_create_attention_backward(&op90, dev_.get(), &d));
  kt::Op guard90(op90);
  const unsigned long long before90 = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op90, stream_.get(), b.t, 9));
  EXPECT_EQ(kt::fake().launch_count() - before90, 3u);
  l = last_launch();
  EXPECT_EQ(l.name, "kaio_attn_bwd_dkdv_sm90_bf16_d64");
  EXPECT_EQ(l.grid[0], 1u);  // ceil(77 / 128) key blocks
  EXPECT_EQ(l.grid[1], 4u);  // B * Hkv
  EXPECT_EQ(l.block[0], 384u);
  struct Record {
    uint64_t address, dim0, dim1, stride1, box01, flags, rank, dim2, stride2, box2, rest[6];
  };
  const uint64_t base = kaio_buffer_device_ptr(buf_.get());
  EXPECT_EQ(param<Record>(0).address, base + (1 << 20));  // K
  EXPECT_EQ(param<Record>(0).box2, 128u);
  EXPECT_EQ(param<Record>(2).address, base);             // Q
  EXPECT_EQ(param<Record>(2).box2, 64u);
  EXPECT_EQ(param<Record>(3).address, base + (5 << 20));  // dO
  EXPECT_EQ(param<uint64_t>(6), base + (7 << 20));        // dK
  EXPECT_EQ(param<uint64_t>(7), base + (15 << 20) / 2);   // dV
  EXPECT_EQ(param<uint32_t>(11), 2u);                     // group
  EXPECT_FLOAT_EQ(param<float>(17), 0.125f);
  EXPECT_EQ(static_cast<int32_t>(param<uint32_t>(20)), 77 - 100);
  {
    // From 1024 keys: the fused sm_90a kernel (dK, dV, and dQ's f32 sums in
    // the workspace), then dQ out of the workspace.
    kaio_attention_desc f = fused_desc();
    kaio_op *opf = nullptr;
    KT_OK(kaio_op_create_attention_backward(&opf, dev_.get(), &f));
    kt::Op guardf(opf);
    const Bwd t = fused_bwd();
    const unsigned long long beforef = kt::fake().launch_count();
    KT_OK(kaio_op_launch(opf, stream_.get(), t.t, 9));
    EXPECT_EQ(kt::fake().launch_count() - beforef, 3u);
    Launch lf = last_launch();
    EXPECT_EQ(lf.name, "kaio_attn_bwd_dq_convert_sm90_bf16_d64");
    EXPECT_EQ(lf.grid[0], 7u);  // ceil(100 / 16) query rows
    EXPECT_EQ(lf.grid[1], 2u);  // B * Hq
    EXPECT_EQ(lf.block[0], 256u);
    // the f32 dQ rows: B*Hq heads of 128 rows (Sq rounded up to 64), then the semaphores
    EXPECT_EQ(param<uint64_t>(1) - param<uint64_t>(0), uint64_t{2 * 128 * 64 * 4});
    EXPECT_EQ(param<uint64_t>(2), base + (6 << 19));  // dQ
    EXPECT_EQ(param<uint32_t>(3), 100u);
    EXPECT_EQ(param<uint32_t>(4), 2u);
    EXPECT_EQ(param<uint32_t>(5), 128u);
    EXPECT_FLOAT_EQ(param<float>(8), 0.125f);
  }
  // Head dim 256 has no backward kernel.
  d.head_dim = 256;
  kaio_op *bad = nullptr;
  EXPECT_EQ(kaio_op_create_attention_backward(&bad, dev_.get(), &d), KAIO_ERROR_UNSUPPORTED);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(std::string(kaio_last_error()).find("head_dim"), std::string::npos);
}

TEST_F(FakeAttention, KaioRank2OpsUseTheForwardKernelTopLeft) {
  kaio_tensor q = kaio_tensor_2d(buf_.get(), KAIO_DTYPE_F16, 33, 128);
  kaio_tensor k = kaio_tensor_2d(buf_.get(), KAIO_DTYPE_F16, 1000, 128);
  k.offset_bytes = 1 << 20;
  kaio_tensor v = k;
  v.offset_bytes = 2 << 20;
  kaio_tensor o = kaio_tensor_2d(buf_.get(), KAIO_DTYPE_F32, 33, 128);
  o.offset_bytes = 3 << 20;
  KT_OK(kaio_attention_tc_causal(stream_.get(), &q, &k, &v, &o));
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_attn_fwd_sm90_f16_d128");  // the fake device is an sm_90
  EXPECT_EQ(l.grid[0], 1u);
  EXPECT_EQ(l.grid[1], 1u);
  EXPECT_EQ(param<uint32_t>(13), 1u);
  EXPECT_EQ(param<uint32_t>(14), 0u);  // top-left
  EXPECT_EQ(param<uint32_t>(15), static_cast<uint32_t>(KAIO_DTYPE_F32));
  KT_OK(kaio_attention_tc(stream_.get(), &q, &k, &v, &o));
  EXPECT_EQ(param<uint32_t>(13), 0u);
}

TEST_F(FakeAttention, KaioF32FlashOpsPickTheirKernelsAndRejectBadViews) {
  const int64_t S = 100, D = 100;
  auto sd = [&](uint64_t offset, int64_t rows, int64_t cols) {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), KAIO_DTYPE_F32, rows, cols);
    t.offset_bytes = offset;
    return t;
  };
  kaio_tensor q = sd(0, S, D), k = sd(1 << 20, S, D), v = sd(2 << 20, S, D), o = sd(3 << 20, S, D),
              lse = sd(4 << 20, 1, S), dout = sd(5 << 20, S, D), dq = sd(6 << 20, S, D),
              dk = sd(7 << 20, S, D), dv = sd((15 << 20) / 2, S, D);
  KT_OK(kaio_attention_flash_causal_with_stats(stream_.get(), &q, &k, &v, &o, &lse));
  Launch l = last_launch();
  // D 100 runs on the D <= 128 split-TF32 kernel, with the backward's parameter list
  EXPECT_EQ(l.name, "kaio_attn_f32x3_fwd_d128");
  EXPECT_EQ(l.grid[0], 4u);      // ceil(100 / 32)
  EXPECT_EQ(l.block[0], 256u);   // four groups of 2 warps
  const uint64_t base = kaio_buffer_device_ptr(buf_.get());
  EXPECT_EQ(param<uint64_t>(4), base + (3u << 20));  // out
  EXPECT_EQ(param<uint64_t>(5), base + (4u << 20));  // lse
  EXPECT_EQ(param<uint32_t>(17), 100u);  // seq
  EXPECT_EQ(param<uint32_t>(18), 100u);  // dim
  EXPECT_FLOAT_EQ(param<float>(19), static_cast<float>(1.0 / std::sqrt(100.0)));
  EXPECT_EQ(param<uint32_t>(20), 1u);    // causal
  KT_OK(kaio_attention_flash(stream_.get(), &q, &k, &v, &o));
  EXPECT_EQ(param<uint64_t>(5), 0u);     // no lse
  EXPECT_EQ(param<uint32_t>(20), 0u);
  {  // D > 128: the CUDA-core kernels, forward and two backward launches
    kaio_tensor q2 = sd(0, S, 200), k2 = sd(1 << 20, S, 200), v2 = sd(2 << 20, S, 200),
                o2 = sd(3 << 20, S, 200), do2 = sd(5 << 20, S, 200), dq2 = sd(6 << 20, S, 200),
                dk2 = sd(7 << 20, S, 200), dv2 = sd((15 << 20) / 2, S, 200);
    KT_OK(kaio_attention_flash_causal_with_stats(stream_.get(), &q2, &k2, &v2, &o2, &lse));
    EXPECT_EQ(last_launch().name, "kaio_attn_f32_fwd_d256");
    EXPECT_EQ(last_launch().block[0], 256u);  // two groups of 4 warps
    EXPECT_EQ(param<uint32_t>(9), 100u);      // seq
    EXPECT_EQ(param<uint32_t>(10), 200u);     // dim
    EXPECT_EQ(param<uint32_t>(12), 1u);       // causal
    const unsigned long long n0 = kt::fake().launch_count();
    KT_OK(kaio_attention_flash_backward(stream_.get(), &do2, &q2, &k2, &v2, &o2, &lse, &dq2, &dk2,
                                        &dv2));
    EXPECT_EQ(kt::fake().launch_count() - n0, 2u);
    EXPECT_EQ(last_launch().name, "kaio_attn_f32_dkdv_d256");
  }
  const unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_attention_flash_backward(stream_.get(), &dout, &q, &k, &v, &o, &lse, &dq, &dk, &dv));
  // D <= 128: rowsum into dq's column 0, dK/dV, then dQ on the split-TF32 kernels
  EXPECT_EQ(kt::fake().launch_count() - before, 3u);
  EXPECT_EQ(last_launch().name, "kaio_attn_f32x3_dq_d128");
  EXPECT_EQ(last_launch().grid[0], 4u);
  EXPECT_EQ(last_launch().block[0], 512u);  // 8 groups of 2 warps
  EXPECT_EQ(param<uint64_t>(6), base + (6u << 20));  // dq
  EXPECT_EQ(param<uint32_t>(17), 100u);  // seq
  EXPECT_EQ(param<uint32_t>(20), 0u);    // causal

  const unsigned long long n = kt::fake().launch_count();
  kaio_tensor wide = sd(0, S, 257), kwide = sd(1 << 20, S, 257), vwide = sd(2 << 20, S, 257),
              owide = sd(3 << 20, S, 257);
  EXPECT_EQ(kaio_attention_flash(stream_.get(), &wide, &kwide, &vwide, &owide), KAIO_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(kaio_last_error()).find("D <= 256"), std::string::npos);
  kaio_tensor half = q;
  half.dtype = KAIO_DTYPE_F16;
  EXPECT_EQ(kaio_attention_flash(stream_.get(), &half, &k, &v, &o), KAIO_ERROR_INVALID_DTYPE);
  EXPECT_NE(std::string(kaio_last_error()).find("'q'"), std::string::npos);
  EXPECT_EQ(kaio_attention_flash_with_stats(stream_.get(), &q, &k, &v, &o, nullptr),
            KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("'lse'"), std::string::npos);
  kaio_tensor short_k = sd(1 << 20, S - 1, D);
  EXPECT_EQ(kaio_attention_flash(stream_.get(), &q, &short_k, &v, &o), KAIO_ERROR_SHAPE_MISMATCH);
  EXPECT_NE(std::string(kaio_last_error()).find("'k'"), std::string::npos);
  EXPECT_EQ(kaio_attention_flash(stream_.get(), &q, &k, &v, &q), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("overlap"), std::string::npos);
  EXPECT_EQ(kaio_attention_flash_causal_backward(stream_.get(), &dout, &q, &k, &v, &o, &lse, &dq,
                                                 &dq, &dv),
            KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("overlap"), std::string::npos);
  EXPECT_EQ(kt::fake().launch_count(), n);
}

struct BadCase {
  const char *name;
  kaio_status expected;
  std::vector<const char *> parts;
  std::function<kaio_status(const kaio_attention_desc &, kaio_tensor *)> edit_and_call;
};

TEST_F(FakeAttention, RejectsBadInputsWithoutLaunching) {
  kaio_stream *s = stream_.get();
  kaio_device *dv = dev_.get();
  auto fwd_call = [s](const kaio_attention_desc &d, kaio_tensor *t) {
    return kaio_attention(s, &t[0], &t[1], &t[2], &t[3], &t[4], &d);
  };
  auto create = [dv](const kaio_attention_desc &d, bool backward) {
    kaio_op *op = nullptr;
    kaio_status st = backward ? kaio_op_create_attention_backward(&op, dv, &d)
                              : kaio_op_create_attention(&op, dv, &d);
    EXPECT_EQ(op, nullptr);
    kaio_op_destroy(op);
    return st;
  };
  using V = std::vector<const char *>;
  std::vector<BadCase> cases = {
      {"head ratio", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_attention", "heads_q", "heads_kv", "multiple"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.heads_kv = 3; return fwd_call(d, t); }},
      {"head dim 80", KAIO_ERROR_UNSUPPORTED,
       V{"kaio_attention", "head_dim", "80", "take 32, 64, 96, 128 or 256. Pad"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.head_dim = 80; return fwd_call(d, t); }},
      {"f32 inputs", KAIO_ERROR_INVALID_DTYPE, V{"kaio_attention", "dtype", "f32"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.dtype = KAIO_DTYPE_F32; return fwd_call(d, t); }},
      {"i8 output", KAIO_ERROR_INVALID_DTYPE, V{"out_dtype", "i8"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.out_dtype = KAIO_DTYPE_I8; return fwd_call(d, t); }},
      {"negative scale", KAIO_ERROR_INVALID_ARGUMENT, V{"softmax_scale", "-1"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.softmax_scale = -1.0f; return fwd_call(d, t); }},
      {"NaN scale", KAIO_ERROR_INVALID_ARGUMENT, V{"softmax_scale", "nan"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.softmax_scale = std::nanf(""); return fwd_call(d, t); }},
      {"unknown mask", KAIO_ERROR_INVALID_ARGUMENT, V{"mask", "7"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.mask = 7; return fwd_call(d, t); }},
      {"zero seq_q", KAIO_ERROR_INVALID_DIMENSION, V{"seq_q", "0"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.seq_q = 0; return fwd_call(d, t); }},
      {"grid y overflow", KAIO_ERROR_INVALID_DIMENSION, V{"batch * heads_q", "65536"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.batch = 16384; d.heads_q = 4; d.heads_kv = 1; return fwd_call(d, t); }},
      {"unknown variant", KAIO_ERROR_INVALID_ARGUMENT, V{"variant", "9"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.variant = 9; return fwd_call(d, t); }},
      {"m128 variant with head dim 256", KAIO_ERROR_UNSUPPORTED, V{"KAIO_ATTENTION_SM80_M128", "256"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.variant = KAIO_ATTENTION_SM80_M128; d.head_dim = 256; return fwd_call(d, t); }},
      {"reserved field", KAIO_ERROR_INVALID_ARGUMENT, V{"reserved"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.reserved = 1; return fwd_call(d, t); }},
      {"small struct_size", KAIO_ERROR_BUFFER_TOO_SMALL, V{"struct_size", "kaio_attention_desc_init"},
       [&](kaio_attention_desc d, kaio_tensor *t) { d.struct_size = 8; return fwd_call(d, t); }},
      {"Q rows", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_attention", "'Q'"},
       [&](kaio_attention_desc d, kaio_tensor *t) { t[0].rows -= 1; return fwd_call(d, t); }},
      {"K cols (heads_kv)", KAIO_ERROR_SHAPE_MISMATCH, V{"'K'"},
       [&](kaio_attention_desc d, kaio_tensor *t) { t[1].cols = Hq * D; return fwd_call(d, t); }},
      {"V dtype", KAIO_ERROR_INVALID_DTYPE, V{"'V'"},
       [&](kaio_attention_desc d, kaio_tensor *t) { t[2].dtype = KAIO_DTYPE_F16; return fwd_call(d, t); }},
      {"Q misaligned", KAIO_ERROR_MISALIGNED, V{"'Q'", "16-byte"},
       [&](kaio_attention_desc d, kaio_tensor *t) { t[0].offset_bytes += 2; return fwd_call(d, t); }},
      {"K stride", KAIO_ERROR_MISALIGNED, V{"'K'", "row_stride"},
       [&](kaio_attention_desc d, kaio_tensor *t) { t[1].row_stride = Hkv * D + 4; return fwd_call(d, t); }},
      {"O overlaps Q", KAIO_ERROR_INVALID_ARGUMENT, V{"'O'", "'Q'", "overlap"},
       [&](kaio_attention_desc d, kaio_tensor *t) { t[3].offset_bytes = 0; return fwd_call(d, t); }},
      {"LSE shape", KAIO_ERROR_SHAPE_MISMATCH, V{"'LSE'"},
       [&](kaio_attention_desc d, kaio_tensor *t) { t[4].cols = Sq + 1; return fwd_call(d, t); }},
      {"LSE dtype", KAIO_ERROR_INVALID_DTYPE, V{"'LSE'"},
       [&](kaio_attention_desc d, kaio_tensor *t) { t[4].dtype = KAIO_DTYPE_F16; return fwd_call(d, t); }},
      {"null desc", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_attention", "'desc'"},
       [&](kaio_attention_desc, kaio_tensor *t) { return kaio_attention(s, &t[0], &t[1], &t[2], &t[3], &t[4], nullptr); }},
      {"null q", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_attention", "'q'"},
       [&](kaio_attention_desc d, kaio_tensor *t) { return kaio_attention(s, nullptr, &t[1], &t[2], &t[3], &t[4], &d); }},
      {"backward o_dtype", KAIO_ERROR_INVALID_DTYPE, V{"kaio_op_create_attention_backward", "o_dtype"},
       [&](kaio_attention_desc d, kaio_tensor *) { d.o_dtype = KAIO_DTYPE_F16; return create(d, true); }},
      {"backward head ratio", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_op_create_attention_backward", "heads_q"},
       [&](kaio_attention_desc d, kaio_tensor *) { d.heads_q = 5; return create(d, true); }},
      {"backward head dim 256", KAIO_ERROR_UNSUPPORTED,
       V{"kaio_op_create_attention_backward", "head_dim is 256", "take 32, 64, 96 or 128. Pad"},
       [&](kaio_attention_desc d, kaio_tensor *) { d.head_dim = 256; return create(d, true); }},
      {"create unset shape", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_op_create_attention", "batch"},
       [&](kaio_attention_desc d, kaio_tensor *) { d.batch = 0; return create(d, false); }},
      {"attention_tc Dv != D", KAIO_ERROR_UNSUPPORTED, V{"kaio_attention_tc", "Dv"},
       [&](kaio_attention_desc, kaio_tensor *t) {
         kaio_tensor q = kaio_tensor_2d(t[0].buffer, KAIO_DTYPE_F16, 8, 64);
         kaio_tensor v = q;
         v.cols = 32;
         kaio_tensor o = kaio_tensor_2d(t[0].buffer, KAIO_DTYPE_F32, 8, 32);
         o.offset_bytes = 1 << 20;
         return kaio_attention_tc(s, &q, &q, &v, &o);
       }},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.name);
    Fwd f = fwd();
    const unsigned long long before = kt::fake().launch_count();
    kaio_status st = c.edit_and_call(desc(), f.t);
    EXPECT_EQ(st, c.expected) << kaio_status_name(st) << ": " << kaio_last_error();
    const std::string msg = kaio_last_error();
    for (const char *part : c.parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
    EXPECT_EQ(kt::fake().launch_count(), before);
  }
  // The backward op checks its nine views at launch.
  kaio_attention_desc d = desc();
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_attention_backward(&op, dv, &d));
  kt::Op guard(op);
  Bwd b = bwd();
  EXPECT_EQ(kaio_op_launch(op, s, b.t, 5), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("{dO, Q, K, V, O, LSE, dQ, dK, dV}"), std::string::npos);
  b.t[7] = b.t[1];  // dK onto Q
  b.t[7].rows = B * Sk;
  b.t[7].cols = Hkv * D;
  EXPECT_EQ(kaio_op_launch(op, s, b.t, 9), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("overlap"), std::string::npos);
}

}  // namespace
