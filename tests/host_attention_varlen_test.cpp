// Varlen attention on the fake driver: kernel choice, grid and arguments of
// the forward (sm_80 and sm_90a) and the backward, and every rejected input
// with its status, a message naming the function and argument, and no launch.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/fake_device_test.hpp"
#include "support/kaio_test.hpp"

namespace {

class FakeAttentionVarlen : public kt::FakeDeviceTest {
 protected:
  void SetUp() override {
    kt::FakeDeviceTest::SetUp();
    if (IsSkipped()) return;
    buf_ = kt::make_buffer(dev_.get(), 8 << 20);
  }

  using Launch = kt::Launch;
  static Launch last_launch() { return kt::last_launch(); }
  template <class T>
  static T param(size_t index) {
    return kt::launch_param<T>(index);
  }

  // B 3, total_q 150 (longest 100), total_k 120 (longest 77), Hq 4, Hkv 2,
  // D 64, in one 8 MiB buffer: Q 0, K 1 MiB, V 2 MiB, O 3 MiB, LSE 4 MiB,
  // cu_q 4.5 MiB, cu_k 4.5 MiB + 256, dO 5, dQ 6, dK 7, dV 7.5 MiB.
  static constexpr int64_t B = 3, Tq = 150, Tk = 120, Mq = 100, Mk = 77, Hq = 4, Hkv = 2, D = 64;
  kaio_tensor rows(uint64_t offset, kaio_dtype dt, int64_t n, int64_t heads) const {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), dt, n, heads * D);
    t.offset_bytes = offset;
    return t;
  }
  kaio_tensor cu(uint64_t offset) const {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), KAIO_DTYPE_I32, 1, B + 1);
    t.offset_bytes = offset;
    return t;
  }
  kaio_attention_varlen_desc desc() const {
    kaio_attention_varlen_desc d;
    EXPECT_EQ(kaio_attention_varlen_desc_init(&d, sizeof d), KAIO_OK);
    d.dtype = KAIO_DTYPE_BF16;
    d.batch = B;
    d.max_seqlen_q = Mq;
    d.max_seqlen_k = Mk;
    d.total_q = Tq;
    d.total_k = Tk;
    d.heads_q = Hq;
    d.heads_kv = Hkv;
    d.head_dim = D;
    return d;
  }
  struct Fwd {
    kaio_tensor t[7];
  };
  Fwd fwd() const {
    const kaio_dtype dt = KAIO_DTYPE_BF16;
    kaio_tensor lse = kaio_tensor_2d(buf_.get(), KAIO_DTYPE_F32, Hq, Tq);
    lse.offset_bytes = 4 << 20;
    return {{rows(0, dt, Tq, Hq), rows(1 << 20, dt, Tk, Hkv), rows(2 << 20, dt, Tk, Hkv),
             cu(9 << 19), cu((9 << 19) + 256), rows(3 << 20, dt, Tq, Hq), lse}};
  }
  struct Bwd {
    kaio_tensor t[11];
  };
  Bwd bwd() const {
    Fwd f = fwd();
    const kaio_dtype dt = KAIO_DTYPE_BF16;
    return {{rows(5 << 20, dt, Tq, Hq), f.t[0], f.t[1], f.t[2], f.t[3], f.t[4], f.t[5], f.t[6],
             rows(6 << 20, dt, Tq, Hq), rows(7 << 20, dt, Tk, Hkv),
             rows((15 << 20) / 2, dt, Tk, Hkv)}};
  }
  kaio_status call(const kaio_attention_varlen_desc &d, const kaio_tensor *t) const {
    return kaio_attention_varlen(stream_.get(), &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6],
                                 &d);
  }

  kt::Buffer buf_;
};

TEST_F(FakeAttentionVarlen, Sm80ForwardGridAndArguments) {
  const uint64_t base = kaio_buffer_device_ptr(buf_.get());
  for (kaio_attention_mask mask : {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL,
                                   KAIO_ATTENTION_CAUSAL_TOP_LEFT}) {
    kaio_attention_varlen_desc d = desc();
    d.mask = mask;
    d.variant = KAIO_ATTENTION_SM80;
    Fwd f = fwd();
    f.t[0].row_stride = Hq * D + 8;
    KT_OK(call(d, f.t));
    Launch l = last_launch();
    EXPECT_EQ(l.name, "kaio_attn_fwd_varlen_bf16_d64");
    EXPECT_EQ(l.grid[0], 2u);  // ceil(max_seqlen_q 100 / 64)
    EXPECT_EQ(l.grid[1], 12u);  // B * Hq
    EXPECT_EQ(l.block[0], 128u);
    EXPECT_EQ(param<uint64_t>(0), base);
    EXPECT_EQ(param<uint64_t>(3), base + (3 << 20));       // O
    EXPECT_EQ(param<uint64_t>(4), base + (4 << 20));           // LSE
    EXPECT_EQ(param<uint32_t>(7), uint32_t{Hq});
    EXPECT_EQ(param<uint32_t>(8), 2u);                          // group
    EXPECT_EQ(param<uint64_t>(10), uint64_t{Hq * D + 8});       // Q row stride
    EXPECT_EQ(param<uint64_t>(12), uint64_t{Hkv * D});          // K row stride
    EXPECT_EQ(param<uint64_t>(17), uint64_t{Tq});               // LSE row stride
    EXPECT_EQ(param<uint32_t>(19), static_cast<uint32_t>(mask));  // the mask, per sequence
    EXPECT_EQ(param<uint64_t>(22), base + (9 << 19));           // cu_seqlens_q
    EXPECT_EQ(param<uint64_t>(23), base + (9 << 19) + 256);     // cu_seqlens_k
    EXPECT_EQ(param<uint32_t>(24), uint32_t{Tq});
    EXPECT_EQ(param<uint32_t>(25), uint32_t{Tk});
    EXPECT_NE(param<uint64_t>(26), 0u);  // the device's op flag: bad cu_seqlens
  }
  // AUTO on the fake device (9.0): sm_90a for D 64, m128 for D 32, 64 rows for 256.
  for (int64_t dim : {32, 64, 256}) {
    kaio_attention_varlen_desc d = desc();
    d.head_dim = dim;
    kaio_op *op = nullptr;
    KT_OK(kaio_op_create_attention_varlen(&op, dev_.get(), &d));
    kt::Op guard(op);
    Fwd f = fwd();
    for (int i : {0, 1, 2, 5}) f.t[i].cols = f.t[i].cols / D * dim;
    f.t[6].buffer = nullptr;  // no LSE
    KT_OK(kaio_op_launch(op, stream_.get(), f.t, 7));
    Launch l = last_launch();
    EXPECT_EQ(l.name, dim == 64   ? "kaio_attn_fwd_varlen_sm90_bf16_d64"
                      : dim == 32 ? "kaio_attn_fwd_varlen_m128_bf16_d32"
                                  : "kaio_attn_fwd_varlen_bf16_d256");
    EXPECT_EQ(l.grid[0], dim == 256 ? 2u : 1u);
    EXPECT_EQ(param<uint64_t>(4), 0u);
  }
}

// The sm_90a kernel's maps cover the packed rows as one batch.
TEST_F(FakeAttentionVarlen, Sm90MapsCoverThePackedRows) {
  kaio_attention_varlen_desc d = desc();
  d.variant = KAIO_ATTENTION_SM90;
  d.mask = KAIO_ATTENTION_CAUSAL;
  Fwd f = fwd();
  KT_OK(call(d, f.t));
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_attn_fwd_varlen_sm90_bf16_d64");
  EXPECT_EQ(l.grid[0], 1u);
  EXPECT_EQ(l.grid[1], 12u);
  EXPECT_EQ(l.block[0], 384u);
  struct Record {
    uint64_t address, dim0, dim1, stride1, box01, flags, rank, dim2, stride2, box2, dim3,
        stride3, box3, rest[3];
  };
  Record rq = param<Record>(0), rk = param<Record>(1);
  EXPECT_EQ(rq.dim2, uint64_t{Tq});
  EXPECT_EQ(rq.dim3, 1u);
  EXPECT_EQ(rk.dim1, uint64_t{Hkv});
  EXPECT_EQ(rk.dim2, uint64_t{Tk});
  EXPECT_EQ(rk.dim3, 1u);
  EXPECT_EQ(param<uint32_t>(13), 1u);  // bottom-right, resolved per sequence in the kernel
  EXPECT_EQ(param<uint32_t>(18), uint32_t{Tq});
  EXPECT_EQ(param<uint32_t>(19), uint32_t{Tk});
  EXPECT_NE(param<uint64_t>(20), 0u);  // the device's op flag
}

TEST_F(FakeAttentionVarlen, BackwardLaunchesPreprocessDqThenDkDv) {
  kaio_attention_varlen_desc d = desc();
  d.mask = KAIO_ATTENTION_CAUSAL;
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_attention_varlen_backward(&op, dev_.get(), &d));
  kt::Op guard(op);
  Bwd b = bwd();
  const unsigned long long before = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op, stream_.get(), b.t, 11));
  EXPECT_EQ(kt::fake().launch_count(), before + 3);
  Launch l = last_launch();
  EXPECT_EQ(l.name, "kaio_attn_bwd_dkdv_varlen_bf16_d64");
  EXPECT_EQ(l.grid[0], 2u);   // ceil(max_seqlen_k 77 / 64)
  EXPECT_EQ(l.grid[1], 6u);   // B * Hkv
  const uint64_t base = kaio_buffer_device_ptr(buf_.get());
  EXPECT_EQ(param<uint64_t>(6), base + (7 << 20));         // dK
  EXPECT_EQ(param<uint64_t>(7), base + (15 << 20) / 2);    // dV
  EXPECT_EQ(param<uint32_t>(27), 1u);
  EXPECT_EQ(param<uint32_t>(32), uint32_t{Tq});
  EXPECT_NE(param<uint64_t>(34), 0u);  // the device's op flag
  // max_seqlen_k 0: dQ (zeros) only.
  d.max_seqlen_k = 0;
  kaio_op *op0 = nullptr;
  KT_OK(kaio_op_create_attention_varlen_backward(&op0, dev_.get(), &d));
  kt::Op guard0(op0);
  const unsigned long long before0 = kt::fake().launch_count();
  KT_OK(kaio_op_launch(op0, stream_.get(), b.t, 11));
  EXPECT_EQ(kt::fake().launch_count(), before0 + 2);
  EXPECT_EQ(last_launch().name, "kaio_attn_bwd_dq_varlen_bf16_d64");
}

struct BadCase {
  const char *name;
  kaio_status expected;
  std::vector<const char *> parts;
  std::function<kaio_status(kaio_attention_varlen_desc, kaio_tensor *)> edit_and_call;
};

TEST_F(FakeAttentionVarlen, RejectsBadInputsWithoutLaunching) {
  using V = std::vector<const char *>;
  using Dsc = kaio_attention_varlen_desc;
  auto fwd_call = [this](const Dsc &d, kaio_tensor *t) { return call(d, t); };
  kaio_device *dv = dev_.get();
  std::vector<BadCase> cases = {
      {"f32 inputs", KAIO_ERROR_INVALID_DTYPE, V{"kaio_attention_varlen", "dtype", "f32"},
       [&](Dsc d, kaio_tensor *t) { d.dtype = KAIO_DTYPE_F32; return fwd_call(d, t); }},
      {"unknown mask", KAIO_ERROR_INVALID_ARGUMENT, V{"mask", "7"},
       [&](Dsc d, kaio_tensor *t) { d.mask = 7; return fwd_call(d, t); }},
      {"reserved", KAIO_ERROR_INVALID_ARGUMENT, V{"reserved", "kaio_attention_varlen_desc_init"},
       [&](Dsc d, kaio_tensor *t) { d.reserved2 = 1; return fwd_call(d, t); }},
      {"small struct_size", KAIO_ERROR_BUFFER_TOO_SMALL, V{"struct_size", "kaio_attention_varlen_desc_init"},
       [&](Dsc d, kaio_tensor *t) { d.struct_size = 8; return fwd_call(d, t); }},
      {"zero batch", KAIO_ERROR_INVALID_DIMENSION, V{"desc->batch", "0"},
       [&](Dsc d, kaio_tensor *t) { d.batch = 0; return fwd_call(d, t); }},
      {"max_seqlen_q past total_q", KAIO_ERROR_INVALID_DIMENSION, V{"max_seqlen_q", "151", "150"},
       [&](Dsc d, kaio_tensor *t) { d.max_seqlen_q = 151; return fwd_call(d, t); }},
      {"zero max_seqlen_q", KAIO_ERROR_INVALID_DIMENSION, V{"max_seqlen_q", "0"},
       [&](Dsc d, kaio_tensor *t) { d.max_seqlen_q = 0; return fwd_call(d, t); }},
      {"negative max_seqlen_k", KAIO_ERROR_INVALID_DIMENSION, V{"max_seqlen_k", "-1"},
       [&](Dsc d, kaio_tensor *t) { d.max_seqlen_k = -1; return fwd_call(d, t); }},
      {"head ratio", KAIO_ERROR_SHAPE_MISMATCH, V{"heads_q", "heads_kv", "multiple"},
       [&](Dsc d, kaio_tensor *t) { d.heads_kv = 3; return fwd_call(d, t); }},
      {"head dim 80", KAIO_ERROR_UNSUPPORTED, V{"head_dim", "80", "Pad"},
       [&](Dsc d, kaio_tensor *t) { d.head_dim = 80; return fwd_call(d, t); }},
      {"sm90 head dim 96", KAIO_ERROR_UNSUPPORTED, V{"KAIO_ATTENTION_SM90", "64 and 128"},
       [&](Dsc d, kaio_tensor *t) { d.variant = KAIO_ATTENTION_SM90; d.head_dim = 96; return fwd_call(d, t); }},
      {"sm90 backward", KAIO_ERROR_UNSUPPORTED, V{"kaio_op_create_attention_varlen_backward", "KAIO_ATTENTION_SM90", "backward"},
       [&](Dsc d, kaio_tensor *) {
         d.variant = KAIO_ATTENTION_SM90;
         kaio_op *op = nullptr;
         kaio_status st = kaio_op_create_attention_varlen_backward(&op, dv, &d);
         EXPECT_EQ(op, nullptr);
         return st;
       }},
      {"backward head dim 256", KAIO_ERROR_UNSUPPORTED, V{"head_dim", "256", "backward"},
       [&](Dsc d, kaio_tensor *) {
         d.head_dim = 256;
         kaio_op *op = nullptr;
         return kaio_op_create_attention_varlen_backward(&op, dv, &d);
       }},
      {"grid y", KAIO_ERROR_INVALID_DIMENSION, V{"batch * heads_q", "65536"},
       [&](Dsc d, kaio_tensor *t) { d.batch = 16384; d.heads_kv = 1; return fwd_call(d, t); }},
      {"rows times heads", KAIO_ERROR_INVALID_DIMENSION, V{"total_q * heads_q"},
       [&](Dsc d, kaio_tensor *t) { d.total_q = d.max_seqlen_q = 1LL << 30; return fwd_call(d, t); }},
      {"zero scale is default, negative is not", KAIO_ERROR_INVALID_ARGUMENT, V{"softmax_scale"},
       [&](Dsc d, kaio_tensor *t) { d.softmax_scale = -2.0f; return fwd_call(d, t); }},
      {"Q rows", KAIO_ERROR_SHAPE_MISMATCH, V{"kaio_attention_varlen", "'Q'"},
       [&](Dsc d, kaio_tensor *t) { t[0].rows -= 1; return fwd_call(d, t); }},
      {"K misaligned", KAIO_ERROR_MISALIGNED, V{"'K'", "16-byte"},
       [&](Dsc d, kaio_tensor *t) { t[1].offset_bytes += 2; return fwd_call(d, t); }},
      {"cu_seqlens_q dtype", KAIO_ERROR_INVALID_DTYPE, V{"'cu_seqlens_q'"},
       [&](Dsc d, kaio_tensor *t) { t[3].dtype = KAIO_DTYPE_U32; return fwd_call(d, t); }},
      {"cu_seqlens_k length", KAIO_ERROR_SHAPE_MISMATCH, V{"'cu_seqlens_k'"},
       [&](Dsc d, kaio_tensor *t) { t[4].cols = B; return fwd_call(d, t); }},
      {"NULL cu_seqlens_q", KAIO_ERROR_INVALID_ARGUMENT, V{"'cu_seqlens_q'", "NULL"},
       [&](Dsc d, kaio_tensor *t) {
         return kaio_attention_varlen(stream_.get(), &t[0], &t[1], &t[2], nullptr, &t[4], &t[5],
                                      &t[6], &d);
       }},
      {"O overlaps cu_seqlens", KAIO_ERROR_INVALID_ARGUMENT, V{"'O'", "'cu_seqlens_q'", "overlap"},
       [&](Dsc d, kaio_tensor *t) { t[5].offset_bytes = (9 << 19) - 64; return fwd_call(d, t); }},
      {"LSE layout [Hq, total_q]", KAIO_ERROR_SHAPE_MISMATCH, V{"'LSE'"},
       [&](Dsc d, kaio_tensor *t) { t[6].rows = B * Hq; return fwd_call(d, t); }},
      {"null desc", KAIO_ERROR_INVALID_ARGUMENT, V{"kaio_attention_varlen", "'desc'"},
       [&](Dsc, kaio_tensor *t) {
         return kaio_attention_varlen(stream_.get(), &t[0], &t[1], &t[2], &t[3], &t[4], &t[5],
                                      &t[6], nullptr);
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
  // The backward op checks its eleven views at launch.
  kaio_op *op = nullptr;
  const kaio_attention_varlen_desc dd = desc();
  KT_OK(kaio_op_create_attention_varlen_backward(&op, dv, &dd));
  kt::Op guard(op);
  Bwd b = bwd();
  EXPECT_EQ(kaio_op_launch(op, stream_.get(), b.t, 7), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("cu_seqlens_q, cu_seqlens_k, O, LSE, dQ"),
            std::string::npos);
  b.t[9] = b.t[2];  // dK onto K
  EXPECT_EQ(kaio_op_launch(op, stream_.get(), b.t, 11), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("overlap"), std::string::npos);
}

}  // namespace
