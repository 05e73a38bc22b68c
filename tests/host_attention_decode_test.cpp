// Decode and paged attention on the fake driver: kernel choice, grid (key
// splits for a prepared op, none one-shot) in one launch, and every
// rejected input of the paged ABI and the DECODE variant with its status, a
// message naming the function and the argument, and no launch.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

class FakeDecode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kt::on_fake_driver())
      GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host), which sets "
                      "LIBKAIO_CUDA_DRIVER";
    dev_ = kt::open_device(0);
    stream_ = kt::make_stream(dev_.get());
    buf_ = kt::make_buffer(dev_.get(), 8 << 20);
  }

  static std::string last_name(unsigned grid[3]) {
    char name[128] = {0};
    unsigned block[3], shared = 0;
    EXPECT_EQ(kt::fake().last_launch(name, sizeof name, grid, block, &shared), 0);
    return name;
  }

  // B 2, Sq 1, Sk 100, Hq 8, Hkv 2, D 128, pages of 16 (16 pages in the pool).
  static constexpr int64_t B = 2, Sq = 1, Sk = 100, Hq = 8, Hkv = 2, D = 128, Page = 16,
                           Pages = 16;
  kaio_tensor at(uint64_t offset, kaio_dtype dt, int64_t rows, int64_t cols) const {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), dt, rows, cols);
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
  kaio_attention_paged_desc paged() const {
    kaio_attention_paged_desc p;
    EXPECT_EQ(kaio_attention_paged_desc_init(&p, sizeof p), KAIO_OK);
    return p;
  }
  // {Q, K, V, O, LSE} contiguous
  struct Fwd {
    kaio_tensor t[5];
  };
  Fwd fwd() const {
    const kaio_dtype dt = KAIO_DTYPE_BF16;
    return {{at(0, dt, B * Sq, Hq * D), at(1 << 20, dt, B * Sk, Hkv * D),
             at(2 << 20, dt, B * Sk, Hkv * D), at(3 << 20, dt, B * Sq, Hq * D),
             at(4 << 20, KAIO_DTYPE_F32, B * Hq, Sq)}};
  }
  // {Q, K pool, V pool, block_table, seq_lens, O, LSE}
  struct Paged {
    kaio_tensor t[7];
  };
  Paged pg() const {
    const kaio_dtype dt = KAIO_DTYPE_BF16;
    return {{at(0, dt, B * Sq, Hq * D), at(1 << 20, dt, Pages * Page, Hkv * D),
             at(2 << 20, dt, Pages * Page, Hkv * D), at(5 << 20, KAIO_DTYPE_I32, B, 7),
             at(6 << 20, KAIO_DTYPE_I32, 1, B), at(3 << 20, dt, B * Sq, Hq * D),
             at(4 << 20, KAIO_DTYPE_F32, B * Hq, Sq)}};
  }
  kt::Device dev_;
  kt::Stream stream_;
  kt::Buffer buf_;
};

// AUTO with Sq <= 16: the decode kernel; a prepared op splits the keys (the
// last CTA of each block merges them: no second launch), the one-shot call
// does not split.
TEST_F(FakeDecode, AutoTakesDecodePreparedSplitsOneShotDoesNot) {
  kaio_attention_desc d = desc();
  Fwd f = fwd();
  unsigned grid[3];
  KT_OK(kaio_attention(stream_.get(), &f.t[0], &f.t[1], &f.t[2], &f.t[3], &f.t[4], &d));
  EXPECT_EQ(last_name(grid), "kaio_attn_decode_bf16_d128_pdl");  // 9.0: the twin
  EXPECT_EQ(grid[0], 1u);
  EXPECT_EQ(grid[1], 1u);            // 4 heads x 1 row in one CTA
  EXPECT_EQ(grid[2], unsigned{B * Hkv});
  // 2 KV heads in all (Hkv 1), fewer CTAs than the fake's 4 SMs: split
  d.seq_k = 4096;  // K and V: 2 MiB each, in buffers of their own
  d.heads_kv = 1;
  kt::Buffer kv = kt::make_buffer(dev_.get(), 8 << 20);
  f.t[1] = kaio_tensor_2d(kv.get(), KAIO_DTYPE_BF16, B * 4096, D);
  f.t[2] = f.t[1];
  f.t[2].offset_bytes = 4 << 20;
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_attention(&op, dev_.get(), &d));
  kt::Op guard(op);
  const unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op, stream_.get(), f.t, 5));
  EXPECT_EQ(kt::fake().launch_count(), before + 1);
  EXPECT_EQ(last_name(grid), "kaio_attn_decode_bf16_d128_pdl");
  EXPECT_GT(grid[0], 1u);
  // Sq 17 goes to the prefill kernels; the DECODE variant refuses it
  d.seq_q = 17;
  f.t[0].rows = f.t[3].rows = B * 17;
  f.t[4].cols = 17;
  KT_OK(kaio_attention(stream_.get(), &f.t[0], &f.t[1], &f.t[2], &f.t[3], &f.t[4], &d));
  EXPECT_EQ(last_name(grid).find("kaio_attn_decode"), std::string::npos);
}

TEST_F(FakeDecode, PagedLaunchesThePagedKernel) {
  kaio_attention_desc d = desc();
  kaio_attention_paged_desc p = paged();
  Paged v = pg();
  unsigned grid[3];
  KT_OK(kaio_attention_paged(stream_.get(), &v.t[0], &v.t[1], &v.t[2], &v.t[3], &v.t[4], &v.t[5],
                             nullptr, &d, &p));
  EXPECT_EQ(last_name(grid), "kaio_attn_decode_paged_bf16_d128_pdl");
  EXPECT_EQ(grid[0], 1u);
  const uint64_t flag = kt::launch_param<uint64_t>(9);
  EXPECT_NE(flag, 0u);  // one-shot too: the device's op flag
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_attention_paged(&op, dev_.get(), &d, &p));
  kt::Op guard(op);
  KT_OK(kaio_op_launch(op, stream_.get(), v.t, 7));
  EXPECT_EQ(kt::launch_param<uint64_t>(9), flag);
  KT_OK(kaio_stream_synchronize(stream_.get()));
}

struct BadCase {
  const char *name;
  kaio_status expected;
  std::vector<const char *> parts;
  std::function<kaio_status(kaio_attention_desc, kaio_attention_paged_desc, kaio_tensor *)> call;
};

TEST_F(FakeDecode, RejectsBadInputsWithoutLaunching) {
  kaio_stream *s = stream_.get();
  kaio_device *dv = dev_.get();
  auto one = [s](const kaio_attention_desc &d, const kaio_attention_paged_desc &p, kaio_tensor *t) {
    return kaio_attention_paged(s, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], &d, &p);
  };
  auto create = [dv](const kaio_attention_desc &d, const kaio_attention_paged_desc &p) {
    kaio_op *op = nullptr;
    kaio_status st = kaio_op_create_attention_paged(&op, dv, &d, &p);
    EXPECT_EQ(op, nullptr);
    kaio_op_destroy(op);
    return st;
  };
  using V = std::vector<const char *>;
  using Ds = kaio_attention_desc;
  using P = kaio_attention_paged_desc;
  std::vector<BadCase> cases = {
      {"page size 17", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_attention_paged", "page_size", "17", "16, 32, 64, 128 or 256"},
       [&](Ds d, P p, kaio_tensor *t) { p.page_size = 17; return one(d, p, t); }},
      {"page size 512 (create)", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_op_create_attention_paged", "page_size", "512"},
       [&](Ds d, P p, kaio_tensor *) { p.page_size = 512; return create(d, p); }},
      {"paged reserved", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_attention_paged", "paged->reserved", "kaio_attention_paged_desc_init"},
       [&](Ds d, P p, kaio_tensor *t) { p.reserved[1] = 1; return one(d, p, t); }},
      {"paged struct_size", KAIO_ERROR_BUFFER_TOO_SMALL, V{"struct_size", "kaio_attention_paged_desc_init"},
       [&](Ds d, P p, kaio_tensor *t) { p.struct_size = 4; return one(d, p, t); }},
      {"null paged desc", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_attention_paged", "desc"},
       [&](Ds d, P, kaio_tensor *t) { return kaio_attention_paged(s, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], &d, nullptr); }},
      {"paged SM80 variant", KAIO_ERROR_UNSUPPORTED, V{"kaio_op_create_attention_paged", "variant", "KAIO_ATTENTION_DECODE"},
       [&](Ds d, P p, kaio_tensor *) { d.variant = KAIO_ATTENTION_SM80; return create(d, p); }},
      {"paged seq_q 17", KAIO_ERROR_UNSUPPORTED, V{"kaio_attention_paged", "seq_q", "17", "at most 16"},
       [&](Ds d, P p, kaio_tensor *t) { d.seq_q = 17; return one(d, p, t); }},
      {"paged head dim 32", KAIO_ERROR_UNSUPPORTED, V{"kaio_op_create_attention_paged", "head_dim", "32", "64, 128 or 256"},
       [&](Ds d, P p, kaio_tensor *) { d.head_dim = 32; return create(d, p); }},
      {"decode variant seq_q 17", KAIO_ERROR_UNSUPPORTED, V{"kaio_attention", "KAIO_ATTENTION_DECODE", "17"},
       [&](Ds d, P, kaio_tensor *t) { d.variant = KAIO_ATTENTION_DECODE; d.seq_q = 17; return kaio_attention(s, &t[0], &t[1], &t[2], &t[5], &t[6], &d); }},
      {"decode variant backward", KAIO_ERROR_UNSUPPORTED, V{"kaio_op_create_attention_backward", "no backward"},
       [&](Ds d, P, kaio_tensor *) {
         d.variant = KAIO_ATTENTION_DECODE;
         kaio_op *op = nullptr;
         kaio_status st = kaio_op_create_attention_backward(&op, dv, &d);
         kaio_op_destroy(op);
         return st;
       }},
      {"K pool rows not whole pages", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_attention_paged", "'K pool'", "page pool"},
       [&](Ds d, P p, kaio_tensor *t) { t[1].rows -= 1; return one(d, p, t); }},
      {"K pool cols", KAIO_ERROR_SHAPE_MISMATCH, V{"'K pool'", "heads_kv * head_dim"},
       [&](Ds d, P p, kaio_tensor *t) { t[1].cols = Hq * D; return one(d, p, t); }},
      {"V pool rows differ", KAIO_ERROR_SHAPE_MISMATCH, V{"V pool", "same pages"},
       [&](Ds d, P p, kaio_tensor *t) { t[2].rows -= Page; return one(d, p, t); }},
      {"V pool dtype", KAIO_ERROR_INVALID_DTYPE, V{"'V pool'"},
       [&](Ds d, P p, kaio_tensor *t) { t[2].dtype = KAIO_DTYPE_F16; return one(d, p, t); }},
      {"K pool stride", KAIO_ERROR_MISALIGNED, V{"'K pool'", "row_stride"},
       [&](Ds d, P p, kaio_tensor *t) { t[1].row_stride = Hkv * D + 4; return one(d, p, t); }},
      {"block_table dtype", KAIO_ERROR_INVALID_DTYPE, V{"'block_table'"},
       [&](Ds d, P p, kaio_tensor *t) { t[3].dtype = KAIO_DTYPE_F32; return one(d, p, t); }},
      {"block_table rows", KAIO_ERROR_SHAPE_MISMATCH, V{"'block_table'", "desc->batch"},
       [&](Ds d, P p, kaio_tensor *t) { t[3].rows = B + 1; return one(d, p, t); }},
      {"block_table too few pages for seq_k", KAIO_ERROR_SHAPE_MISMATCH, V{"'block_table'", "ceil(desc->seq_k / page_size) = 7"},
       [&](Ds d, P p, kaio_tensor *t) { t[3].cols = 6; return one(d, p, t); }},
      {"seq_lens shape", KAIO_ERROR_SHAPE_MISMATCH, V{"'seq_lens'"},
       [&](Ds d, P p, kaio_tensor *t) { t[4].cols = B + 1; return one(d, p, t); }},
      {"seq_lens dtype", KAIO_ERROR_INVALID_DTYPE, V{"'seq_lens'"},
       [&](Ds d, P p, kaio_tensor *t) { t[4].dtype = KAIO_DTYPE_U32; return one(d, p, t); }},
      {"O overlaps the K pool", KAIO_ERROR_INVALID_ARGUMENT, V{"'O'", "'K pool'", "overlap"},
       [&](Ds d, P p, kaio_tensor *t) { t[5].offset_bytes = 1 << 20; return one(d, p, t); }},
      {"LSE shape", KAIO_ERROR_SHAPE_MISMATCH, V{"'LSE'"},
       [&](Ds d, P p, kaio_tensor *t) { t[6].cols = 2; return one(d, p, t); }},
      {"Q rows", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_attention_paged", "'Q'"},
       [&](Ds d, P p, kaio_tensor *t) { t[0].rows += 1; return one(d, p, t); }},
      {"null block_table", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_attention_paged", "'block_table'"},
       [&](Ds d, P p, kaio_tensor *t) { return kaio_attention_paged(s, &t[0], &t[1], &t[2], nullptr, &t[4], &t[5], &t[6], &d, &p); }},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.name);
    Paged v = pg();
    const unsigned long long before = kt::fake().launch_count();
    kaio_status st = c.call(desc(), paged(), v.t);
    EXPECT_EQ(st, c.expected) << kaio_status_name(st) << ": " << kaio_last_error();
    const std::string msg = kaio_last_error();
    for (const char *part : c.parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
    EXPECT_EQ(kt::fake().launch_count(), before);
  }
  // The prepared op checks its 7 views at launch.
  kaio_attention_desc d = desc();
  kaio_attention_paged_desc p = paged();
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_attention_paged(&op, dv, &d, &p));
  kt::Op guard(op);
  Paged v = pg();
  EXPECT_EQ(kaio_op_launch(op, s, v.t, 5), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("{Q, K pool, V pool, block_table, seq_lens, O, LSE}"),
            std::string::npos);
}

}  // namespace
