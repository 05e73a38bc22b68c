// Paged prefill on the fake driver: kernel choice, grid and arguments, and
// every rejected input (desc, paged desc, each of the eight views) with its
// status, a message naming the function and argument, and no launch.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "support/fake_device_test.hpp"
#include "support/kaio_test.hpp"

namespace {

class FakeAttentionPagedPrefill : public kt::FakeDeviceTest {
 protected:
  void SetUp() override {
    kt::FakeDeviceTest::SetUp();
    if (IsSkipped()) return;
    buf_ = kt::make_buffer(dev_.get(), 8 << 20);
  }
  template <class T>
  static T param(size_t index) {
    return kt::launch_param<T>(index);
  }
  static std::string last_name(unsigned *grid) {
    char name[128] = {0};
    unsigned block[3], shared = 0;
    EXPECT_EQ(kt::fake().last_launch(name, sizeof name, grid, block, &shared), 0);
    return name;
  }

  // B 3, total_q 150 (longest 100), longest len_k 77, Hq 4, Hkv 2, D 64,
  // pages of 16, 8 pages; one 8 MiB buffer: Q 0, K pool 1 MiB, V pool 2 MiB,
  // O 3 MiB, LSE 4 MiB, cu_q 4.5 MiB, table + 256, seq_lens + 512.
  static constexpr int64_t B = 3, Tq = 150, Mq = 100, Mk = 77, Hq = 4, Hkv = 2, D = 64,
                           Pages = 8, Ps = 16, MaxPages = 6;
  static constexpr uint64_t kCu = 9 << 19;
  kaio_tensor view(uint64_t offset, kaio_dtype dt, int64_t rows, int64_t cols) const {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), dt, rows, cols);
    t.offset_bytes = offset;
    return t;
  }
  kaio_attention_varlen_desc desc() const {
    kaio_attention_varlen_desc d;
    EXPECT_EQ(kaio_attention_varlen_desc_init(&d, sizeof d), KAIO_OK);
    d.dtype = KAIO_DTYPE_BF16;
    d.mask = KAIO_ATTENTION_CAUSAL;
    d.batch = B;
    d.max_seqlen_q = Mq;
    d.max_seqlen_k = Mk;
    d.total_q = Tq;
    d.heads_q = Hq;
    d.heads_kv = Hkv;
    d.head_dim = D;
    return d;
  }
  kaio_attention_paged_desc pdesc() const {
    kaio_attention_paged_desc p;
    EXPECT_EQ(kaio_attention_paged_desc_init(&p, sizeof p), KAIO_OK);
    return p;
  }
  struct Views {
    kaio_tensor t[8];
  };
  Views views() const {
    const kaio_dtype dt = KAIO_DTYPE_BF16;
    return {{view(0, dt, Tq, Hq * D), view(1 << 20, dt, Pages * Ps, Hkv * D),
             view(2 << 20, dt, Pages * Ps, Hkv * D), view(kCu, KAIO_DTYPE_I32, 1, B + 1),
             view(kCu + 256, KAIO_DTYPE_I32, B, MaxPages), view(kCu + 512, KAIO_DTYPE_I32, 1, B),
             view(3 << 20, dt, Tq, Hq * D), view(4 << 20, KAIO_DTYPE_F32, Hq, Tq)}};
  }
  kaio_status call(const kaio_attention_varlen_desc &d, const kaio_attention_paged_desc &p,
                   const kaio_tensor *t) const {
    return kaio_attention_paged_prefill(stream_.get(), &t[0], &t[1], &t[2], &t[3], &t[4], &t[5],
                                        &t[6], &t[7], &d, &p);
  }

  kt::Buffer buf_;
};

TEST_F(FakeAttentionPagedPrefill, GridAndArguments) {
  const uint64_t base = kaio_buffer_device_ptr(buf_.get());
  struct {
    kaio_attention_variant variant;
    int64_t dim;
    const char *name;
    unsigned gx;
  } runs[] = {{KAIO_ATTENTION_SM80_M128, 64, "kaio_attn_fwd_paged_m128_bf16_d64", 1},
              {KAIO_ATTENTION_SM80, 64, "kaio_attn_fwd_paged_bf16_d64", 2},
              {KAIO_ATTENTION_AUTO, 256, "kaio_attn_fwd_paged_bf16_d256", 2}};
  for (const auto &r : runs) {
    kaio_attention_varlen_desc d = desc();
    d.variant = r.variant;
    d.head_dim = r.dim;
    kaio_attention_paged_desc p = pdesc();
    p.page_size = Ps;
    kaio_op *op = nullptr;
    KT_OK(kaio_op_create_attention_paged_prefill(&op, dev_.get(), &d, &p));
    kt::Op guard(op);
    Views v = views();
    for (int i : {0, 1, 2, 6}) v.t[i].cols = v.t[i].cols / D * r.dim;
    v.t[4].row_stride = MaxPages + 2;
    v.t[4].rows = B;
    KT_OK(kaio_op_launch(op, stream_.get(), v.t, 8));
    unsigned grid[3];
    EXPECT_EQ(last_name(grid), r.name);
    EXPECT_EQ(grid[0], r.gx);
    EXPECT_EQ(grid[1], unsigned{B * Hq});
    EXPECT_EQ(param<uint64_t>(1), base + (1 << 20));  // K pool
    EXPECT_EQ(param<uint32_t>(6), uint32_t{Mk});      // the length bound
    EXPECT_EQ(param<uint32_t>(8), 2u);                // group
    EXPECT_EQ(param<uint32_t>(19), 1u);               // bottom-right, per sequence
    EXPECT_EQ(param<uint64_t>(22), base + kCu);       // cu_seqlens_q
    EXPECT_EQ(param<uint64_t>(23), base + kCu + 256); // block_table
    EXPECT_EQ(param<uint64_t>(24), base + kCu + 512); // seq_lens
    EXPECT_NE(param<uint64_t>(25), 0u);               // the device's op flag
    EXPECT_EQ(param<uint64_t>(26), uint64_t{MaxPages + 2});
    EXPECT_EQ(param<uint32_t>(27), uint32_t{Tq});
    EXPECT_EQ(param<uint32_t>(28), uint32_t{Pages});
    EXPECT_EQ(param<uint32_t>(29), 4u);               // log2 16
  }
  // The one-shot call reports through the same flag: the device's.
  const uint64_t flag = param<uint64_t>(25);
  Views v = views();
  kaio_attention_varlen_desc d = desc();
  d.variant = KAIO_ATTENTION_SM80;
  KT_OK(call(d, pdesc(), v.t));
  EXPECT_EQ(param<uint64_t>(25), flag);
}

// AUTO on the fake device (9.0) with D 64 or 128: the sm_90a kernel, its K
// and V maps over the pools as one batch of pages * page_size rows, boxes of
// min(page_size, 128) rows; the paged parameters after the varlen kernel's scalars.
TEST_F(FakeAttentionPagedPrefill, Sm90MapsCoverThePools) {
  const uint64_t base = kaio_buffer_device_ptr(buf_.get());
  struct Record {
    uint64_t address, dim0, dim1, stride1, box01, flags, rank, dim2, stride2, box2, dim3,
        stride3, box3, rest[3];
  };
  for (int32_t ps : {16, 256}) {
    kaio_attention_varlen_desc d = desc();
    kaio_attention_paged_desc p = pdesc();
    p.page_size = ps;
    Views v = views();
    const int64_t pages = ps == 16 ? Pages : 2;
    v.t[1].rows = v.t[2].rows = pages * ps;
    v.t[4].cols = ps == 16 ? MaxPages : 1;  // ceil(Mk / page_size) columns or more
    KT_OK(call(d, p, v.t));
    unsigned grid[3];
    EXPECT_EQ(last_name(grid), "kaio_attn_fwd_paged_sm90_bf16_d64");
    EXPECT_EQ(grid[0], 1u);
    EXPECT_EQ(grid[1], unsigned{B * Hq});
    const Record rk = param<Record>(1), rv = param<Record>(2);
    EXPECT_EQ(rk.address, base + (1 << 20));
    EXPECT_EQ(rv.address, base + (2 << 20));
    EXPECT_EQ(rk.dim1, uint64_t{Hkv});
    EXPECT_EQ(rk.dim2, static_cast<uint64_t>(pages * ps));
    EXPECT_EQ(rk.dim3, 1u);
    EXPECT_EQ(rk.box2, static_cast<uint64_t>(std::min(ps, 128)));
    EXPECT_EQ(rv.box2, rk.box2);
    EXPECT_EQ(param<Record>(0).box2, 128u);          // Q: 128 rows per CTA
    EXPECT_EQ(param<uint32_t>(6), uint32_t{Mk});     // the length bound
    EXPECT_EQ(param<uint32_t>(13), 1u);              // bottom-right, per sequence
    EXPECT_EQ(param<uint64_t>(16), base + kCu);      // cu_seqlens_q
    EXPECT_EQ(param<uint64_t>(17), base + kCu + 256);  // block_table
    EXPECT_EQ(param<uint64_t>(18), base + kCu + 512);  // seq_lens
    EXPECT_NE(param<uint64_t>(19), 0u);              // one-shot too: the device's op flag
    EXPECT_EQ(param<uint32_t>(21), uint32_t{Tq});
    EXPECT_EQ(param<uint32_t>(22), static_cast<uint32_t>(pages));
    EXPECT_EQ(param<uint32_t>(23), ps == 16 ? 4u : 8u);
  }
}

struct BadCase {
  const char *name;
  kaio_status expected;
  std::vector<const char *> parts;
  std::function<kaio_status(kaio_attention_varlen_desc, kaio_attention_paged_desc, kaio_tensor *)>
      edit_and_call;
};

TEST_F(FakeAttentionPagedPrefill, RejectsBadInput) {
  using V = std::vector<const char *>;
  using Dsc = kaio_attention_varlen_desc;
  using Pd = kaio_attention_paged_desc;
  auto c = [this](const Dsc &d, const Pd &p, kaio_tensor *t) { return call(d, p, t); };
  kaio_device *dv = dev_.get();
  kaio_stream *st = stream_.get();
  std::vector<BadCase> cases = {
      {"total_k set", KAIO_ERROR_INVALID_DIMENSION, V{"kaio_attention_paged_prefill", "total_k", "0"},
       [&](Dsc d, Pd p, kaio_tensor *t) { d.total_k = 100; return c(d, p, t); }},
      {"page size 8", KAIO_ERROR_INVALID_ARGUMENT, V{"page_size", "8", "16"},
       [&](Dsc d, Pd p, kaio_tensor *t) { p.page_size = 8; return c(d, p, t); }},
      {"page size 0", KAIO_ERROR_INVALID_ARGUMENT, V{"page_size"},
       [&](Dsc d, Pd p, kaio_tensor *t) { p.page_size = 0; return c(d, p, t); }},
      {"page size 512", KAIO_ERROR_INVALID_ARGUMENT, V{"page_size", "512"},
       [&](Dsc d, Pd p, kaio_tensor *t) { p.page_size = 512; return c(d, p, t); }},
      {"paged reserved", KAIO_ERROR_INVALID_ARGUMENT, V{"paged->reserved"},
       [&](Dsc d, Pd p, kaio_tensor *t) { p.reserved[1] = 1; return c(d, p, t); }},
      {"sm90 variant with D 256", KAIO_ERROR_UNSUPPORTED, V{"KAIO_ATTENTION_SM90", "64 and 128"},
       [&](Dsc d, Pd p, kaio_tensor *t) {
         d.variant = KAIO_ATTENTION_SM90;
         d.head_dim = 256;
         for (int i : {0, 1, 2, 6}) t[i].cols = t[i].cols / D * 256;
         return c(d, p, t);
       }},
      {"m128 with D 256", KAIO_ERROR_UNSUPPORTED, V{"SM80_M128"},
       [&](Dsc d, Pd p, kaio_tensor *t) {
         d.variant = KAIO_ATTENTION_SM80_M128;
         d.head_dim = 256;
         return c(d, p, t);
       }},
      {"head dim 80", KAIO_ERROR_UNSUPPORTED, V{"head_dim", "80"},
       [&](Dsc d, Pd p, kaio_tensor *t) { d.head_dim = 80; return c(d, p, t); }},
      {"f32 dtype", KAIO_ERROR_INVALID_DTYPE, V{"dtype"},
       [&](Dsc d, Pd p, kaio_tensor *t) { d.dtype = KAIO_DTYPE_F32; return c(d, p, t); }},
      {"negative max_seqlen_k", KAIO_ERROR_INVALID_DIMENSION, V{"max_seqlen_k", "-1"},
       [&](Dsc d, Pd p, kaio_tensor *t) { d.max_seqlen_k = -1; return c(d, p, t); }},
      {"max_seqlen_k past the table", KAIO_ERROR_SHAPE_MISMATCH, V{"'block_table'", "max_seqlen_k"},
       [&](Dsc d, Pd p, kaio_tensor *t) { d.max_seqlen_k = MaxPages * Ps + 1; return c(d, p, t); }},
      {"Q rows", KAIO_ERROR_SHAPE_MISMATCH, V{"'Q'"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[0].rows -= 1; return c(d, p, t); }},
      {"K pool partial page", KAIO_ERROR_SHAPE_MISMATCH, V{"'K pool'", "page_size"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[1].rows -= 1; return c(d, p, t); }},
      {"K pool cols", KAIO_ERROR_SHAPE_MISMATCH, V{"'K pool'"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[1].cols = Hq * D; return c(d, p, t); }},
      {"K pool misaligned", KAIO_ERROR_MISALIGNED, V{"'K pool'", "16-byte"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[1].offset_bytes += 2; return c(d, p, t); }},
      {"V pool dtype", KAIO_ERROR_INVALID_DTYPE, V{"'V pool'"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[2].dtype = KAIO_DTYPE_F16; return c(d, p, t); }},
      {"V pool rows differ", KAIO_ERROR_SHAPE_MISMATCH, V{"V pool", "same pages"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[2].rows -= Ps; return c(d, p, t); }},
      {"cu_seqlens_q length", KAIO_ERROR_SHAPE_MISMATCH, V{"'cu_seqlens_q'"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[3].cols = B; return c(d, p, t); }},
      {"block_table dtype", KAIO_ERROR_INVALID_DTYPE, V{"'block_table'"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[4].dtype = KAIO_DTYPE_U32; return c(d, p, t); }},
      {"block_table rows", KAIO_ERROR_SHAPE_MISMATCH, V{"'block_table'", "desc->batch"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[4].rows = B - 1; return c(d, p, t); }},
      {"seq_lens length", KAIO_ERROR_SHAPE_MISMATCH, V{"'seq_lens'"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[5].cols = B + 1; return c(d, p, t); }},
      {"seq_lens dtype", KAIO_ERROR_INVALID_DTYPE, V{"'seq_lens'"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[5].dtype = KAIO_DTYPE_F32; return c(d, p, t); }},
      {"O rows", KAIO_ERROR_SHAPE_MISMATCH, V{"'O'"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[6].rows += 1; return c(d, p, t); }},
      {"O overlaps the table", KAIO_ERROR_INVALID_ARGUMENT, V{"'O'", "'block_table'", "overlap"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[6].offset_bytes = kCu + 192; return c(d, p, t); }},
      {"LSE layout", KAIO_ERROR_SHAPE_MISMATCH, V{"'LSE'"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[7].rows = B * Hq; return c(d, p, t); }},
      {"LSE overlaps the K pool", KAIO_ERROR_INVALID_ARGUMENT, V{"'LSE'", "'K pool'"},
       [&](Dsc d, Pd p, kaio_tensor *t) { t[7].offset_bytes = 1 << 20; return c(d, p, t); }},
      {"NULL block_table", KAIO_ERROR_INVALID_ARGUMENT, V{"'block_table'", "NULL"},
       [&](Dsc d, Pd p, kaio_tensor *t) {
         return kaio_attention_paged_prefill(st, &t[0], &t[1], &t[2], &t[3], nullptr, &t[5],
                                             &t[6], &t[7], &d, &p);
       }},
      {"NULL seq_lens", KAIO_ERROR_INVALID_ARGUMENT, V{"'seq_lens'", "NULL"},
       [&](Dsc d, Pd p, kaio_tensor *t) {
         return kaio_attention_paged_prefill(st, &t[0], &t[1], &t[2], &t[3], &t[4], nullptr,
                                             &t[6], &t[7], &d, &p);
       }},
      {"null desc", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_attention_paged_prefill", "'desc'"},
       [&](Dsc, Pd p, kaio_tensor *t) {
         return kaio_attention_paged_prefill(st, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6],
                                             &t[7], nullptr, &p);
       }},
      {"null paged desc", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_attention_paged_prefill", "'paged'"},
       [&](Dsc d, Pd, kaio_tensor *t) {
         return kaio_attention_paged_prefill(st, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6],
                                             &t[7], &d, nullptr);
       }},
      {"op creation", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_op_create_attention_paged_prefill", "page_size"},
       [&](Dsc d, Pd p, kaio_tensor *) {
         p.page_size = 24;
         kaio_op *op = nullptr;
         kaio_status s = kaio_op_create_attention_paged_prefill(&op, dv, &d, &p);
         EXPECT_EQ(op, nullptr);
         return s;
       }},
  };
  for (const auto &bc : cases) {
    SCOPED_TRACE(bc.name);
    Views v = views();
    const unsigned long long before = kt::fake().launch_count();
    kaio_status s = bc.edit_and_call(desc(), pdesc(), v.t);
    EXPECT_EQ(s, bc.expected) << kaio_status_name(s) << ": " << kaio_last_error();
    const std::string msg = kaio_last_error();
    for (const char *part : bc.parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
    EXPECT_EQ(kt::fake().launch_count(), before);
  }
  // The op checks its eight views at launch.
  kaio_op *op = nullptr;
  const Dsc d = desc();
  const Pd p = pdesc();
  KT_OK(kaio_op_create_attention_paged_prefill(&op, dv, &d, &p));
  kt::Op guard(op);
  Views v = views();
  EXPECT_EQ(kaio_op_launch(op, st, v.t, 7), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("block_table, seq_lens, O, LSE"), std::string::npos);
}

}  // namespace
