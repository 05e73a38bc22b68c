// RoPE on the fake driver: kernel choice, grid and arguments (the inv_freq
// table against the test's own HF reference), and every rejected desc field
// and view with its status, a message naming the function, the argument and
// the fix, and no launch.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"
#include "support/rope_ref.hpp"

namespace {

class FakeRope : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kt::on_fake_driver())
      GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host), which sets "
                      "LIBKAIO_CUDA_DRIVER";
    dev_ = kt::open_device(0);
    stream_ = kt::make_stream(dev_.get());
    buf_ = kt::make_buffer(dev_.get(), 4 << 20);
  }
  // Llama-ish: Hq 6, Hk 2, D 64, T 10; Q at 0, K at 1 MiB, positions at 2 MiB.
  static constexpr int64_t T = 10, Hq = 6, Hk = 2, D = 64;
  kaio_rope_desc desc() const {
    kaio_rope_desc d;
    EXPECT_EQ(kaio_rope_desc_init(&d, sizeof d), KAIO_OK);
    d.heads_q = Hq;
    d.heads_k = Hk;
    d.head_dim = D;
    return d;
  }
  kaio_tensor view(uint64_t offset, kaio_dtype dt, int64_t rows, int64_t cols) const {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), dt, rows, cols);
    t.offset_bytes = offset;
    return t;
  }
  kaio_tensor q(kaio_dtype dt = KAIO_DTYPE_BF16) const { return view(0, dt, T, Hq * D); }
  kaio_tensor k(kaio_dtype dt = KAIO_DTYPE_BF16) const { return view(1 << 20, dt, T, Hk * D); }
  kaio_tensor pos() const { return view(2 << 20, KAIO_DTYPE_I32, 1, T); }
  std::string last_name() const { return kt::last_launch().name; }
  // The table the last launch passed (parameter 15), half entries.
  std::vector<float> table(int half) const {
    float t[256];
    EXPECT_EQ(kt::fake().last_launch_param(15, t, sizeof t), 0);
    return std::vector<float>(t, t + half);
  }
  kt::Device dev_;
  kt::Stream stream_;
  kt::Buffer buf_;
};

TEST_F(FakeRope, PicksTheVectorKernelAndPassesHfsTable) {
  kaio_rope_desc d = desc();
  d.theta = 500000.0;
  d.scaling = KAIO_ROPE_SCALING_LLAMA3;
  d.factor = 8.0;
  kaio_tensor qv = q(), kv = k(), pv = pos();
  KT_OK(kaio_rope(stream_.get(), &qv, &kv, &pv, &d));
  kt::Launch l = kt::last_launch();
  EXPECT_EQ(l.name, "kaio_rope_half_split_bf16_vec_pdl");  // the fake is 9.0: the sm_90 twin
  EXPECT_EQ(l.block[0], 256u);
  EXPECT_EQ(kt::launch_param<uint32_t>(10), 4u);   // units: 32 pairs / 8
  EXPECT_EQ(kt::launch_param<uint32_t>(11), 1u);   // head lanes: 10 tokens split the heads
  EXPECT_EQ(kt::launch_param<uint32_t>(12), 64u);  // tokens per block
  EXPECT_EQ(l.grid[0], 1u);
  const uint32_t chunk = kt::launch_param<uint32_t>(13);
  EXPECT_EQ(l.grid[1], (Hq + Hk + chunk - 1) / chunk);
  EXPECT_EQ(kt::launch_param<uint64_t>(3), static_cast<uint64_t>(Hq * D * 2));  // q stride bytes
  const kt::RopeRef ref = kt::rope_ref_f32(d);
  const std::vector<float> got = table(32);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(got[i], static_cast<float>(ref.inv_freq[i])) << "inv_freq[" << i << "]";
  EXPECT_EQ(kt::launch_param<float>(14), 1.0f);
}

TEST_F(FakeRope, PrefillLetsAWarpTakeNeighbouringHeadsOfOneToken) {
  // 1024 tokens fill the fake's 4 SMs without splitting the 6 heads: a
  // token's 4 units x 4 head lanes (lanes <= heads, lanes x units <= 32).
  const kaio_rope_desc d = desc();
  constexpr int64_t tokens = 1024;
  kaio_tensor qv = view(0, KAIO_DTYPE_BF16, tokens, Hq * D), pv = view(2 << 20, KAIO_DTYPE_I32, 1, tokens);
  KT_OK(kaio_rope(stream_.get(), &qv, nullptr, &pv, &d));
  const kt::Launch l = kt::last_launch();
  EXPECT_EQ(kt::launch_param<uint32_t>(10), 4u);   // units
  EXPECT_EQ(kt::launch_param<uint32_t>(11), 4u);   // head lanes
  EXPECT_EQ(kt::launch_param<uint32_t>(12), 16u);  // tokens per block: 256 / (4 x 4)
  EXPECT_EQ(kt::launch_param<uint32_t>(13), 6u);   // one chunk of every head
  EXPECT_EQ(l.grid[0], 64u);
  EXPECT_EQ(l.grid[1], 1u);
}

TEST_F(FakeRope, YarnTableAndAttentionFactorMatchTheReference) {
  for (double mscale : {0.0, 0.707}) {
    kaio_rope_desc d = desc();
    d.scaling = KAIO_ROPE_SCALING_YARN;
    d.factor = 4.0;
    d.original_max_position_embeddings = 4096;
    d.mscale = mscale;
    d.mscale_all_dim = mscale;
    d.rotary_dim = 48;
    kaio_op *raw = nullptr;
    KT_OK(kaio_op_create_rope(&raw, dev_.get(), &d));
    kt::Op op(raw);
    const kaio_tensor t[3] = {q(), k(), pos()};
    KT_OK(kaio_op_launch(op.get(), stream_.get(), t, 3));
    const kt::RopeRef ref = kt::rope_ref_f32(d);
    const std::vector<float> got = table(24);
    for (int i = 0; i < 24; ++i) EXPECT_EQ(got[i], static_cast<float>(ref.inv_freq[i])) << i;
    EXPECT_EQ(kt::launch_param<float>(14), static_cast<float>(ref.attention));
    EXPECT_EQ(kt::launch_param<uint32_t>(9), 24u);  // half
  }
}

TEST_F(FakeRope, OddLayoutsRunTheElementKernelAndAbsentTensorsHaveNoHeads) {
  kaio_rope_desc d = desc();
  d.dtype = KAIO_DTYPE_F16;
  d.head_dim = 80;
  d.rotary_dim = 40;  // half split: the second half starts 20 * 2 = 40 bytes in
  kaio_tensor qv = view(0, KAIO_DTYPE_F16, T, Hq * 80), pv = pos();
  KT_OK(kaio_rope(stream_.get(), &qv, nullptr, &pv, &d));
  EXPECT_EQ(last_name(), "kaio_rope_half_split_f16_scalar_pdl");
  EXPECT_EQ(kt::launch_param<uint32_t>(10), 20u);  // one pair per thread
  EXPECT_EQ(kt::launch_param<uint32_t>(7), 0u);    // heads_k: K absent
  EXPECT_EQ(kt::launch_param<uint64_t>(1), 0u);
  // K only: Q's heads are 0 for the kernel. Interleaved pairs of 40 dims
  // are 80 bytes: whole 16-byte vectors.
  d.style = KAIO_ROPE_INTERLEAVED;
  kaio_tensor kv = view(1 << 20, KAIO_DTYPE_F16, T, Hk * 80);
  kaio_tensor none{};
  KT_OK(kaio_rope(stream_.get(), &none, &kv, &pv, &d));
  EXPECT_EQ(last_name(), "kaio_rope_interleaved_f16_vec_pdl");
  EXPECT_EQ(kt::launch_param<uint32_t>(10), 5u);  // 4 pairs per thread
  EXPECT_EQ(kt::launch_param<uint32_t>(6), 0u);
  EXPECT_EQ(kt::launch_param<uint32_t>(7), static_cast<uint32_t>(Hk));
}

TEST_F(FakeRope, FusedQkvColumnRangesAreAccepted) {
  // One [T, (Hq + 2 Hk) D] output: Q, K and V side by side in each row.
  kaio_rope_desc d = desc();
  const int64_t stride = (Hq + 2 * Hk) * D;
  kaio_tensor qv = view(0, KAIO_DTYPE_BF16, T, Hq * D);
  qv.row_stride = stride;
  kaio_tensor kv = view(Hq * D * 2, KAIO_DTYPE_BF16, T, Hk * D);
  kv.row_stride = stride;
  kaio_tensor pv = pos();
  KT_OK(kaio_rope(stream_.get(), &qv, &kv, &pv, &d));
  EXPECT_EQ(kt::launch_param<uint64_t>(4), static_cast<uint64_t>(stride * 2));
  // K shifted one column into Q's range shares elements.
  const unsigned long long launches = kt::fake().launch_count();
  kv.offset_bytes -= 2;
  kt::expect_rejected(kaio_rope(stream_.get(), &qv, &kv, &pv, &d), KAIO_ERROR_INVALID_ARGUMENT,
                      {"kaio_rope", "'q' and 'k'", "disjoint"}, launches);
}

TEST_F(FakeRope, RejectsEveryBadDescField) {
  struct Case {
    const char *what;
    std::function<void(kaio_rope_desc &)> edit;
    kaio_status status;
    std::vector<const char *> parts;
  };
  const std::vector<Case> cases = {
      {"style", [](auto &d) { d.style = 7; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->style is 7", "KAIO_ROPE_HALF_SPLIT"}},
      {"dtype", [](auto &d) { d.dtype = KAIO_DTYPE_I8; }, KAIO_ERROR_INVALID_DTYPE, {"desc->dtype is i8"}},
      {"scaling", [](auto &d) { d.scaling = 9; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->scaling is 9"}},
      {"reserved", [](auto &d) { d.reserved = 1; }, KAIO_ERROR_INVALID_ARGUMENT, {"reserved", "kaio_rope_desc_init"}},
      {"reserved2", [](auto &d) { d.reserved2[3] = 1; }, KAIO_ERROR_INVALID_ARGUMENT, {"reserved"}},
      {"heads_q<0", [](auto &d) { d.heads_q = -1; }, KAIO_ERROR_INVALID_DIMENSION, {"desc->heads_q is -1"}},
      {"heads_k big", [](auto &d) { d.heads_k = 70000; }, KAIO_ERROR_INVALID_DIMENSION, {"desc->heads_k is 70000"}},
      {"no heads", [](auto &d) { d.heads_q = d.heads_k = 0; }, KAIO_ERROR_INVALID_DIMENSION, {"heads_q + desc->heads_k is 0"}},
      {"head_dim", [](auto &d) { d.head_dim = 0; }, KAIO_ERROR_INVALID_DIMENSION, {"desc->head_dim is 0"}},
      {"rotary odd", [](auto &d) { d.rotary_dim = 33; }, KAIO_ERROR_INVALID_DIMENSION, {"desc->rotary_dim is 33", "even"}},
      {"rotary > D", [](auto &d) { d.rotary_dim = 66; }, KAIO_ERROR_INVALID_DIMENSION, {"desc->rotary_dim is 66"}},
      {"odd D, rot 0", [](auto &d) { d.head_dim = 65; }, KAIO_ERROR_INVALID_DIMENSION, {"rotary_dim is 0 (65"}},
      {"rotary > 512", [](auto &d) { d.head_dim = 1024; d.rotary_dim = 514; }, KAIO_ERROR_UNSUPPORTED, {"at most 512"}},
      {"theta", [](auto &d) { d.theta = 1.0; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->theta is 1", "rope_theta"}},
      {"theta nan", [](auto &d) { d.theta = NAN; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->theta is nan"}},
      {"factor", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_LINEAR; d.factor = 0; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->factor is 0"}},
      {"factor inf", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_YARN; d.factor = INFINITY; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->factor is inf"}},
      {"orig len", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_LLAMA3; d.original_max_position_embeddings = 0; }, KAIO_ERROR_INVALID_ARGUMENT, {"original_max_position_embeddings is 0"}},
      {"low freq", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_LLAMA3; d.low_freq_factor = -1; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->low_freq_factor is -1"}},
      {"high freq", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_LLAMA3; d.high_freq_factor = 1; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->high_freq_factor is 1"}},
      {"beta_fast", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_YARN; d.beta_fast = 0; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->beta_fast is 0"}},
      {"beta_slow", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_YARN; d.beta_slow = -2; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->beta_slow is -2"}},
      {"attention", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_YARN; d.attention_factor = -1; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->attention_factor is -1"}},
      {"mscale", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_YARN; d.mscale = NAN; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->mscale is nan"}},
      {"mscale_all_dim", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_YARN; d.mscale_all_dim = -1; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->mscale_all_dim is -1"}},
      {"truncate", [](auto &d) { d.scaling = KAIO_ROPE_SCALING_YARN; d.truncate = 2; }, KAIO_ERROR_INVALID_ARGUMENT, {"desc->truncate is 2"}},
  };
  kaio_tensor qv = q(), kv = k(), pv = pos();
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    kaio_rope_desc d = desc();
    c.edit(d);
    const unsigned long long launches = kt::fake().launch_count();
    std::vector<const char *> parts = c.parts;
    parts.push_back("kaio_rope:");
    kt::expect_rejected(kaio_rope(stream_.get(), &qv, &kv, &pv, &d), c.status, parts, launches);
    kaio_op *op = reinterpret_cast<kaio_op *>(1);
    parts.back() = "kaio_op_create_rope:";
    kt::expect_rejected(kaio_op_create_rope(&op, dev_.get(), &d), c.status, parts, launches);
    EXPECT_EQ(op, nullptr);
  }
  // Scaling fields a scaling does not use are ignored.
  kaio_rope_desc d = desc();
  d.factor = -5;
  d.beta_fast = 0;
  KT_OK(kaio_rope(stream_.get(), &qv, &kv, &pv, &d));
  // desc NULL, struct_size too small.
  const unsigned long long launches = kt::fake().launch_count();
  kt::expect_rejected(kaio_rope(stream_.get(), &qv, &kv, &pv, nullptr), KAIO_ERROR_INVALID_ARGUMENT,
                      {"kaio_rope", "'desc' is NULL"}, launches);
  d.struct_size = 8;
  kt::expect_rejected(kaio_rope(stream_.get(), &qv, &kv, &pv, &d), KAIO_ERROR_BUFFER_TOO_SMALL,
                      {"kaio_rope", "struct_size is 8", "kaio_rope_desc_init"}, launches);
  EXPECT_EQ(kaio_rope_desc_init(nullptr, sizeof d), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kaio_rope_desc_init(&d, 4), KAIO_ERROR_BUFFER_TOO_SMALL);
}

TEST_F(FakeRope, RejectsEveryBadViewWithoutLaunching) {
  const kaio_rope_desc d = desc();
  kaio_op *raw = nullptr;
  KT_OK(kaio_op_create_rope(&raw, dev_.get(), &d));
  kt::Op op(raw);
  struct Case {
    const char *what;
    std::function<void(kaio_tensor *)> edit;
    kaio_status status;
    std::vector<const char *> parts;
  };
  const std::vector<Case> cases = {
      {"q dtype", [](kaio_tensor *t) { t[0].dtype = KAIO_DTYPE_F16; }, KAIO_ERROR_INVALID_DTYPE, {"'q'"}},
      {"k cols", [](kaio_tensor *t) { t[1].cols = 64; }, KAIO_ERROR_SHAPE_MISMATCH, {"'k' has 64 cols", "heads_k"}},
      {"rows differ", [](kaio_tensor *t) { t[1].rows = 9; }, KAIO_ERROR_SHAPE_MISMATCH, {"'q' has 10 rows", "'k' 9"}},
      {"both absent", [](kaio_tensor *t) { t[0].buffer = t[1].buffer = nullptr; }, KAIO_ERROR_INVALID_ARGUMENT, {"both 'q' and 'k' are absent"}},
      {"pos dtype", [](kaio_tensor *t) { t[2].dtype = KAIO_DTYPE_U32; }, KAIO_ERROR_INVALID_DTYPE, {"'positions'"}},
      {"pos shape", [](kaio_tensor *t) { t[2].rows = T; t[2].cols = 1; }, KAIO_ERROR_SHAPE_MISMATCH, {"'positions'"}},
      {"pos overlaps q", [](kaio_tensor *t) { t[2].offset_bytes = 0; }, KAIO_ERROR_INVALID_ARGUMENT, {"'positions' and 'q' overlap"}},
      {"q past end", [](kaio_tensor *t) { t[0].offset_bytes = (4 << 20) - 64; }, KAIO_ERROR_OUT_OF_BOUNDS, {"'q'"}},
      {"q misaligned", [](kaio_tensor *t) { t[0].offset_bytes = 1; }, KAIO_ERROR_MISALIGNED, {"'q'"}},
      {"k on q", [](kaio_tensor *t) { t[1].offset_bytes = 0; }, KAIO_ERROR_INVALID_ARGUMENT, {"'q' and 'k' share elements"}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    kaio_tensor t[3] = {q(), k(), pos()};
    c.edit(t);
    const unsigned long long launches = kt::fake().launch_count();
    std::vector<const char *> parts = c.parts;
    parts.push_back("kaio_op_launch:");
    kt::expect_rejected(kaio_op_launch(op.get(), stream_.get(), t, 3), c.status, parts, launches);
  }
  // A tensor with 0 heads in the desc must be absent.
  kaio_rope_desc qonly = desc();
  qonly.heads_k = 0;
  kaio_tensor qv = q(), kv = k(), pv = pos();
  const unsigned long long launches = kt::fake().launch_count();
  kt::expect_rejected(kaio_rope(stream_.get(), &qv, &kv, &pv, &qonly), KAIO_ERROR_INVALID_ARGUMENT,
                      {"kaio_rope", "'k' has a buffer but desc->heads_k is 0"}, launches);
  kt::expect_rejected(kaio_rope(stream_.get(), &qv, &kv, nullptr, &qonly),
                      KAIO_ERROR_INVALID_ARGUMENT, {"kaio_rope", "'positions' is NULL"}, launches);
  kt::expect_rejected(kaio_op_launch(op.get(), stream_.get(), nullptr, 3),
                      KAIO_ERROR_INVALID_ARGUMENT, {"{Q, K, positions}"}, launches);
  const kaio_tensor two[2] = {q(), k()};
  kt::expect_rejected(kaio_op_launch(op.get(), stream_.get(), two, 2),
                      KAIO_ERROR_INVALID_ARGUMENT, {"'count' is 2"}, launches);
}

// The KV-cache form: V at 2.5 MiB, slots at 3 MiB, caches of 32 rows at 3.25
// and 3.5 MiB.
class FakeRopeKvCache : public FakeRope {
 protected:
  kaio_tensor v() const { return view(5 << 19, KAIO_DTYPE_BF16, T, Hk * D); }
  kaio_tensor slots() const { return view(3 << 20, KAIO_DTYPE_I32, 1, T); }
  kaio_tensor kc() const { return view(13 << 18, KAIO_DTYPE_BF16, 32, Hk * D); }
  kaio_tensor vc() const { return view(14 << 18, KAIO_DTYPE_BF16, 32, Hk * D); }
  // The one-shot call with view `which` of {q, k, v, positions, slots, kc, vc} replaced.
  kaio_status call_with(int which, const kaio_tensor *t, const kaio_rope_desc &d) {
    kaio_tensor a[7] = {q(), k(), v(), pos(), slots(), kc(), vc()};
    const kaio_tensor *p[7];
    for (int i = 0; i < 7; ++i) p[i] = &a[i];
    p[which] = t;
    return kaio_rope_kv_cache_write(stream_.get(), p[0], p[1], p[2], p[3], p[4], p[5], p[6], &d);
  }
};

TEST_F(FakeRopeKvCache, LaunchesTheCacheKernelWithTheFlag) {
  const kaio_rope_desc d = desc();
  KT_OK(call_with(0, nullptr, d));  // no Q
  kt::Launch l = kt::last_launch();
  EXPECT_EQ(l.name, "kaio_rope_cache_half_split_bf16_vec_pdl");
  EXPECT_EQ(kt::launch_param<uint64_t>(0), 0u);                          // Q absent
  EXPECT_EQ(kt::launch_param<uint32_t>(11), 1u);                         // no head lanes
  EXPECT_EQ(kt::launch_param<uint32_t>(22), 32u);                        // cache rows
  EXPECT_EQ(kt::launch_param<uint32_t>(23), unsigned(Hk * D * 2 / 16));  // V's 16-byte chunks
  EXPECT_EQ(kt::launch_param<uint32_t>(24), 0u);                         // no tail: rot == D
  EXPECT_NE(kt::launch_param<uint64_t>(25), 0u);                         // the device's op flag
  kaio_tensor t[7] = {q(), k(), v(), pos(), slots(), kc(), vc()};
  kaio_op *raw = nullptr;
  kaio_rope_desc partial = d;
  partial.rotary_dim = 32;
  KT_OK(kaio_op_create_rope_kv_cache_write(&raw, dev_.get(), &partial));
  kt::Op op(raw);
  KT_OK(kaio_op_launch(op.get(), stream_.get(), t, 7));
  EXPECT_EQ(kt::launch_param<uint32_t>(24), 32u);  // dims 32..63 copied as they are
  KT_OK(kaio_stream_synchronize(stream_.get()));
}

TEST_F(FakeRopeKvCache, FusedQkvColumnRangesAreAccepted) {
  // One [T, (Hq + 2 Hk) D] output: Q rotated in place beside the K it rotates
  // into the cache and the V it copies.
  const kaio_rope_desc d = desc();
  const int64_t stride = (Hq + 2 * Hk) * D;
  kaio_tensor qv = view(0, KAIO_DTYPE_BF16, T, Hq * D), kv = view(Hq * D * 2, KAIO_DTYPE_BF16, T, Hk * D),
              vv = view((Hq + Hk) * D * 2, KAIO_DTYPE_BF16, T, Hk * D);
  qv.row_stride = kv.row_stride = vv.row_stride = stride;
  const kaio_tensor p = pos(), s = slots(), kcv = kc(), vcv = vc();
  KT_OK(kaio_rope_kv_cache_write(stream_.get(), &qv, &kv, &vv, &p, &s, &kcv, &vcv, &d));
  // V moved 8 columns (16 bytes, still aligned) into Q's range shares elements.
  const unsigned long long launches = kt::fake().launch_count();
  vv.offset_bytes = Hq * D * 2 - 16;
  kt::expect_rejected(kaio_rope_kv_cache_write(stream_.get(), &qv, &kv, &vv, &p, &s, &kcv, &vcv, &d),
                      KAIO_ERROR_INVALID_ARGUMENT,
                      {"kaio_rope_kv_cache_write", "'q' and 'v' share elements", "fused QKV"}, launches);
}

TEST_F(FakeRopeKvCache, RejectsBadViewsWithoutLaunching) {
  const kaio_rope_desc d = desc();
  struct Case {
    int which;
    kaio_tensor view;
    kaio_status status;
    std::vector<const char *> parts;
  };
  kaio_tensor absent{};
  kaio_tensor narrow_cache = kc();
  narrow_cache.cols = Hk * D - 8;
  kaio_tensor short_vc = vc();
  short_vc.rows = 16;
  kaio_tensor odd_v = v();
  odd_v.offset_bytes += 8;
  kaio_tensor cache_on_k = kc();
  cache_on_k.offset_bytes = 1 << 20;
  kaio_tensor wide_slots = slots();
  wide_slots.cols = T + 1;
  const Case cases[] = {
      {1, absent, KAIO_ERROR_INVALID_ARGUMENT, {"'k' is absent", "kaio_rope"}},
      {6, absent, KAIO_ERROR_INVALID_ARGUMENT, {"'v_cache'", "neither"}},
      {5, narrow_cache, KAIO_ERROR_SHAPE_MISMATCH, {"'k_cache'", "heads_k * head_dim"}},
      {6, short_vc, KAIO_ERROR_SHAPE_MISMATCH, {"'v_cache'"}},
      {2, odd_v, KAIO_ERROR_MISALIGNED, {"'v'", "16-byte"}},
      {5, cache_on_k, KAIO_ERROR_INVALID_ARGUMENT, {"k_cache"}},
      {4, wide_slots, KAIO_ERROR_SHAPE_MISMATCH, {"'slot_mapping'"}},
  };
  for (const Case &c : cases) {
    std::vector<const char *> parts = c.parts;
    parts.insert(parts.begin(), "kaio_rope_kv_cache_write");
    const unsigned long long before = kt::fake().launch_count();
    kt::expect_rejected(call_with(c.which, &c.view, d), c.status, parts, before);
  }
  kaio_rope_desc no_k = d;
  no_k.heads_k = 0;
  kaio_op *op = nullptr;
  const unsigned long long before = kt::fake().launch_count();
  kt::expect_rejected(kaio_op_create_rope_kv_cache_write(&op, dev_.get(), &no_k),
                      KAIO_ERROR_INVALID_DIMENSION, {"kaio_op_create_rope_kv_cache_write", "heads_k"},
                      before);
}

}  // namespace
