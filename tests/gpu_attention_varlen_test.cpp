// Varlen (packed-sequence) attention against an f64 CPU reference computed
// from the same rounded inputs, and against kaio_attention run on each
// sequence alone: mixed lengths in one batch (0, 1, 7, 63, 64, 65, 4097),
// len_q != len_k with bottom-right and top-left causal, GQA 1/4/8, f16 and
// bf16, D 64 and 128, every forward variant, the backward, tail rows that
// belong to no sequence, and cu_seqlens that are not valid prefix sums.
//
// Tolerances as tests/gpu_attention_test.cpp (relative Frobenius error per
// tensor over the rows checked): O f16 2e-3, bf16 1.2e-2; dQ/dK/dV f16 1e-2,
// bf16 5e-2; LSE absolute 2e-3. Rows of a 4097-long sequence are checked
// against the reference on a sample (every 37th row and the last 8), all
// rows against the sequence run alone, which must match bit for bit (the
// same kernel code on the same rows).
// Every output is poisoned with 0xFF bytes (NaN) first: rows outside every
// sequence must still hold it afterwards, rows inside must not.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

double o_tol(kaio_dtype dt) { return dt == KAIO_DTYPE_BF16 ? 1.2e-2 : 2e-3; }
double grad_tol(kaio_dtype dt) { return dt == KAIO_DTYPE_BF16 ? 5e-2 : 1e-2; }

struct Case {
  std::vector<int32_t> lq, lk;  // per-sequence lengths (lk empty: = lq)
  int64_t hq = 8, hkv = 2, d = 64;
  kaio_dtype dt = KAIO_DTYPE_F16;
  kaio_attention_mask mask = KAIO_ATTENTION_MASK_NONE;
  kaio_attention_variant variant = KAIO_ATTENTION_AUTO;
  int64_t tail = 5;               // rows after the last sequence, in no sequence
  std::vector<int32_t> cu_q, cu_k;  // explicit prefix sums (bad-input cases), else from lq/lk
  int64_t max_q = 0, max_k = 0;   // the desc's max_seqlen (0: the longest valid sequence)
};

std::string describe(const Case &c) {
  std::string s = std::string(kaio_dtype_name(c.dt)) + " D" + std::to_string(c.d) + " H" +
                  std::to_string(c.hq) + ":" + std::to_string(c.hkv) + " mask " +
                  std::to_string(c.mask) + " variant " + std::to_string(c.variant) + " lq";
  for (int32_t l : c.lq) s += " " + std::to_string(l);
  s += " lk";
  for (int32_t l : c.lk) s += " " + std::to_string(l);
  return s;
}

std::vector<int32_t> prefix(const std::vector<int32_t> &len) {
  std::vector<int32_t> cu{0};
  for (int32_t l : len) cu.push_back(cu.back() + l);
  return cu;
}

// The sequence bounds the kernels derive: [start, start + len), or empty.
struct Seq {
  int64_t q0 = 0, lq = 0, k0 = 0, lk = 0;
  bool bad = false;  // a side was invalid: empty, and the device's op flag raised
};
// Sequence b as the kernels see it: a side whose pair is not 0 <= start <=
// end <= total, or longer than its max_seqlen (mq / mk, 0: no limit), is empty.
Seq bounds(const std::vector<int32_t> &cq, const std::vector<int32_t> &ck, size_t b, int64_t tq,
           int64_t tk, int64_t mq = 0, int64_t mk = 0) {
  Seq s;
  auto ok = [](int32_t a, int32_t e, int64_t total, int64_t m) {
    return a >= 0 && a <= e && e <= total && (m == 0 || e - a <= m);
  };
  if (ok(cq[b], cq[b + 1], tq, mq)) s.q0 = cq[b], s.lq = cq[b + 1] - cq[b];
  else s.bad = true;
  if (ok(ck[b], ck[b + 1], tk, mk)) s.k0 = ck[b], s.lk = ck[b + 1] - ck[b];
  else s.bad = true;
  return s;
}

class GpuAttentionVarlen : public kt::GpuTest {
 protected:
  struct Dev {
    kt::Buffer buf;
    kaio_tensor view;
    size_t bytes = 0;
  };
  Dev make(kaio_dtype dt, int64_t rows, int64_t cols, const void *data) {
    Dev d;
    d.bytes = static_cast<size_t>(rows * cols * kaio_dtype_size(dt));
    d.buf = kt::make_buffer(dev(), d.bytes);
    if (data)
      EXPECT_EQ(kaio_buffer_write(d.buf.get(), 0, data, d.bytes), KAIO_OK);
    else
      EXPECT_EQ(kaio_buffer_memset(d.buf.get(), stream(), 0, 0xFF, d.bytes), KAIO_OK);
    d.view = kaio_tensor_2d(d.buf.get(), dt, rows, cols);
    return d;
  }
  std::vector<uint8_t> raw(const Dev &d) {
    std::vector<uint8_t> bytes(d.bytes);
    EXPECT_EQ(kaio_buffer_read(d.buf.get(), 0, bytes.data(), bytes.size()), KAIO_OK);
    return bytes;
  }
  bool is_sm90() {
    kaio_device_info info{};
    info.struct_size = sizeof info;
    EXPECT_EQ(kaio_device_get_info(dev(), &info), KAIO_OK);
    return info.cc_major == 9 && info.cc_minor == 0;
  }

  void run(const Case &c, bool backward);
};

bool visible(kaio_attention_mask m, int64_t i, int64_t j, int64_t lq, int64_t lk) {
  if (m == KAIO_ATTENTION_CAUSAL) return j <= i + (lk - lq);
  if (m == KAIO_ATTENTION_CAUSAL_TOP_LEFT) return j <= i;
  return true;
}

void GpuAttentionVarlen::run(const Case &c, bool backward) {
  SCOPED_TRACE(describe(c) + (backward ? " fwd+bwd" : " fwd"));
  const std::vector<int32_t> lk = c.lk.empty() ? c.lq : c.lk;
  const std::vector<int32_t> cq = c.cu_q.empty() ? prefix(c.lq) : c.cu_q;
  const std::vector<int32_t> ck = c.cu_k.empty() ? prefix(lk) : c.cu_k;
  const size_t B = cq.size() - 1;
  const int64_t Hq = c.hq, Hkv = c.hkv, D = c.d, G = Hq / Hkv, ldq = Hq * D, ldk = Hkv * D;
  const int64_t tq = (c.cu_q.empty() ? cq.back() : 0) + c.tail,
                tk = (c.cu_k.empty() ? ck.back() : 0) + c.tail;
  int64_t mq = 1, mk = 0;
  for (size_t b = 0; b < B; ++b) {
    mq = std::max(mq, bounds(cq, ck, b, tq, tk).lq);
    mk = std::max(mk, bounds(cq, ck, b, tq, tk).lk);
  }
  if (c.max_q) mq = c.max_q;
  if (c.max_k) mk = c.max_k;
  std::vector<Seq> seqs;
  bool flagged = false;
  for (size_t b = 0; b < B; ++b) {
    seqs.push_back(bounds(cq, ck, b, tq, tk, mq, mk));
    flagged |= seqs.back().bad;
  }
  // A bad pair is reported by the next sync of the stream (once), naming it.
  auto synced = [&] {
    const kaio_status st = kaio_stream_synchronize(stream());
    EXPECT_EQ(st, flagged ? KAIO_ERROR_OUT_OF_BOUNDS : KAIO_OK) << kaio_last_error();
    if (flagged) {
      EXPECT_NE(std::string(kaio_last_error()).find("cu_seqlens_"), std::string::npos)
          << kaio_last_error();
    }
    KT_OK(kaio_stream_synchronize(stream()));
  };
  const uint64_t seed = kt::test_seed() ^ static_cast<uint64_t>(tq * 7919 + tk * 31 + D + c.mask);
  kt::HostTensor hq = kt::random_tensor(c.dt, tq * ldq, -1, 1, seed);
  kt::HostTensor hk = kt::random_tensor(c.dt, tk * ldk, -1, 1, seed + 1);
  kt::HostTensor hv = kt::random_tensor(c.dt, tk * ldk, -1, 1, seed + 2);
  kt::HostTensor hdo = kt::random_tensor(c.dt, tq * ldq, -1, 1, seed + 3);
  Dev q = make(c.dt, tq, ldq, hq.bytes.data()), k = make(c.dt, tk, ldk, hk.bytes.data()),
      v = make(c.dt, tk, ldk, hv.bytes.data());
  Dev cuq = make(KAIO_DTYPE_I32, 1, B + 1, cq.data()), cuk = make(KAIO_DTYPE_I32, 1, B + 1, ck.data());
  Dev o = make(c.dt, tq, ldq, nullptr), lse = make(KAIO_DTYPE_F32, Hq, tq, nullptr);
  kaio_attention_varlen_desc d;
  KT_OK(kaio_attention_varlen_desc_init(&d, sizeof d));
  d.dtype = c.dt;
  d.mask = c.mask;
  d.variant = c.variant;
  d.batch = static_cast<int64_t>(B);
  d.max_seqlen_q = mq;
  d.max_seqlen_k = mk;
  d.total_q = tq;
  d.total_k = tk;
  d.heads_q = Hq;
  d.heads_kv = Hkv;
  d.head_dim = D;
  KT_OK(kaio_attention_varlen(stream(), &q.view, &k.view, &v.view, &cuq.view, &cuk.view, &o.view,
                              &lse.view, &d));
  synced();
  const std::vector<uint8_t> o_raw = raw(o), lse_raw = raw(lse);
  const std::vector<double> go = kt::decode(c.dt, o_raw), gl = kt::decode(KAIO_DTYPE_F32, lse_raw);

  // Which packed rows belong to a sequence: every other row stays poisoned.
  std::vector<char> in_q(tq, 0), in_k(tk, 0);
  for (const Seq &s : seqs) {
    for (int64_t i = 0; i < s.lq; ++i) in_q[s.q0 + i] = 1;
    for (int64_t j = 0; j < s.lk; ++j) in_k[s.k0 + j] = 1;
  }
  const size_t esz = kaio_dtype_size(c.dt);
  int64_t touched = 0, unwritten = 0;
  for (int64_t r = 0; r < tq; ++r)
    for (int64_t col = 0; col < ldq; ++col) {
      const bool nan = std::isnan(go[r * ldq + col]);
      if (!in_q[r]) touched += !(nan && o_raw[(r * ldq + col) * esz] == 0xFF);
      else unwritten += nan;
    }
  EXPECT_EQ(touched, 0) << "O rows outside every sequence were written";
  EXPECT_EQ(unwritten, 0) << "O rows inside a sequence were left unwritten";

  // f64 reference, per (sequence, head, row): O, LSE (and the gradients).
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  double e2 = 0, r2 = 0;
  int64_t lse_bad = 0, empty_bad = 0;
  std::vector<double> rdq(tq * ldq, 0.0), rdk(tk * ldk, 0.0), rdv(tk * ldk, 0.0);
  for (const Seq &s : seqs)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / G;
      std::vector<double> p(s.lk);
      for (int64_t i = 0; i < s.lq; ++i) {
        if (!backward && s.lq > 512 && i % 37 != 0 && i < s.lq - 8) continue;  // sampled
        const int64_t qr = s.q0 + i;
        double m = -INFINITY;
        for (int64_t j = 0; j < s.lk; ++j) {
          p[j] = -INFINITY;
          if (!visible(c.mask, i, j, s.lq, s.lk)) continue;
          double acc = 0;
          for (int64_t x = 0; x < D; ++x)
            acc += hq.values[qr * ldq + h * D + x] * hk.values[(s.k0 + j) * ldk + g * D + x];
          p[j] = acc * scale;
          m = std::max(m, p[j]);
        }
        const double got_lse = gl[h * tq + qr];
        if (m == -INFINITY) {
          lse_bad += !(std::isinf(got_lse) && got_lse < 0);
          for (int64_t x = 0; x < D; ++x) empty_bad += go[qr * ldq + h * D + x] != 0.0;
          continue;
        }
        double l = 0;
        for (int64_t j = 0; j < s.lk; ++j) l += p[j] = p[j] == -INFINITY ? 0.0 : std::exp(p[j] - m);
        lse_bad += !(std::fabs(got_lse - (m + std::log(l))) <= 2e-3);
        std::vector<double> ro(D, 0.0);
        for (int64_t j = 0; j < s.lk; ++j) {
          p[j] /= l;
          for (int64_t x = 0; x < D; ++x) ro[x] += p[j] * hv.values[(s.k0 + j) * ldk + g * D + x];
        }
        for (int64_t x = 0; x < D; ++x) {
          const double g = go[qr * ldq + h * D + x];
          e2 += (g - ro[x]) * (g - ro[x]);
          r2 += ro[x] * ro[x];
        }
        if (!backward) continue;
        double di = 0;
        for (int64_t x = 0; x < D; ++x) di += hdo.values[qr * ldq + h * D + x] * ro[x];
        for (int64_t j = 0; j < s.lk; ++j) {
          if (p[j] == 0) continue;
          double acc = 0;
          for (int64_t x = 0; x < D; ++x)
            acc += hdo.values[qr * ldq + h * D + x] * hv.values[(s.k0 + j) * ldk + g * D + x];
          const double ds = p[j] * (acc - di);
          for (int64_t x = 0; x < D; ++x) {
            rdq[qr * ldq + h * D + x] += scale * ds * hk.values[(s.k0 + j) * ldk + g * D + x];
            rdk[(s.k0 + j) * ldk + g * D + x] += scale * ds * hq.values[qr * ldq + h * D + x];
            rdv[(s.k0 + j) * ldk + g * D + x] += p[j] * hdo.values[qr * ldq + h * D + x];
          }
        }
      }
    }
  EXPECT_LE(r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2), o_tol(c.dt));
  EXPECT_EQ(lse_bad, 0);
  EXPECT_EQ(empty_bad, 0) << "rows that see no key must give exactly 0";

  // Each sequence alone through kaio_attention with the prefill kernels the
  // varlen op ran (its AUTO: sm_90a for D 64 / 128 on compute capability 9.0,
  // else SM80_M128 up to D 128; the contiguous op's AUTO would take the
  // decode kernels for short sequences): bit for bit.
  kaio_device_info info;
  info.struct_size = sizeof info;
  KT_OK(kaio_device_get_info(dev(), &info));
  const kaio_attention_variant alone =
      c.variant != KAIO_ATTENTION_AUTO              ? c.variant
      : info.cc_major == 9 && (D == 64 || D == 128) ? KAIO_ATTENTION_SM90
      : D <= 128                                    ? KAIO_ATTENTION_SM80_M128
                                                    : KAIO_ATTENTION_SM80;
  int64_t differ = 0;
  for (const Seq &s : seqs) {
    if (s.lq == 0 || s.lk == 0) continue;
    kaio_attention_desc a;
    KT_OK(kaio_attention_desc_init(&a, sizeof a));
    a.dtype = c.dt;
    a.mask = c.mask;
    a.variant = alone;
    a.batch = 1;
    a.seq_q = s.lq;
    a.seq_k = s.lk;
    a.heads_q = Hq;
    a.heads_kv = Hkv;
    a.head_dim = D;
    kaio_tensor sq = kaio_tensor_2d(q.buf.get(), c.dt, s.lq, ldq),
                sk = kaio_tensor_2d(k.buf.get(), c.dt, s.lk, ldk),
                sv = kaio_tensor_2d(v.buf.get(), c.dt, s.lk, ldk);
    sq.offset_bytes = static_cast<uint64_t>(s.q0 * ldq * esz);
    sk.offset_bytes = sv.offset_bytes = static_cast<uint64_t>(s.k0 * ldk * esz);
    Dev so = make(c.dt, s.lq, ldq, nullptr), sl = make(KAIO_DTYPE_F32, Hq, s.lq, nullptr);
    KT_OK(kaio_attention(stream(), &sq, &sk, &sv, &so.view, &sl.view, &a));
    KT_OK(kaio_stream_synchronize(stream()));
    const std::vector<uint8_t> so_raw = raw(so), sl_raw = raw(sl);
    differ += std::memcmp(so_raw.data(), o_raw.data() + s.q0 * ldq * esz, so_raw.size()) != 0;
    for (int64_t h = 0; h < Hq; ++h)
      differ += std::memcmp(sl_raw.data() + h * s.lq * 4, lse_raw.data() + (h * tq + s.q0) * 4,
                            s.lq * 4) != 0;
  }
  EXPECT_EQ(differ, 0) << "varlen O/LSE differ from the sequences run alone";
  if (!backward) return;

  Dev dout = make(c.dt, tq, ldq, hdo.bytes.data());
  Dev dq = make(c.dt, tq, ldq, nullptr), dk = make(c.dt, tk, ldk, nullptr),
      dv = make(c.dt, tk, ldk, nullptr);
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_attention_varlen_backward(&op, dev(), &d));
  kt::Op guard(op);
  const kaio_tensor t[] = {dout.view, q.view, k.view,  v.view,  cuq.view, cuk.view,
                           o.view,    lse.view, dq.view, dk.view, dv.view};
  KT_OK(kaio_op_launch(op, stream(), t, 11));
  synced();
  const struct {
    const char *name;
    Dev *dev;
    const std::vector<double> *ref;
    int64_t rows, ld;
    const std::vector<char> *in;
  } grads[] = {{"dQ", &dq, &rdq, tq, ldq, &in_q}, {"dK", &dk, &rdk, tk, ldk, &in_k},
               {"dV", &dv, &rdv, tk, ldk, &in_k}};
  for (const auto &g : grads) {
    const std::vector<double> got = kt::decode(c.dt, raw(*g.dev));
    double ge2 = 0, gr2 = 0;
    int64_t bad_rows = 0;
    for (int64_t r = 0; r < g.rows; ++r)
      for (int64_t x = 0; x < g.ld; ++x) {
        const double y = got[r * g.ld + x], ref = (*g.ref)[r * g.ld + x];
        if (!(*g.in)[r]) {
          bad_rows += !std::isnan(y);
          continue;
        }
        if (!std::isfinite(y)) {
          ++bad_rows;
          continue;
        }
        ge2 += (y - ref) * (y - ref);
        gr2 += ref * ref;
      }
    EXPECT_EQ(bad_rows, 0) << g.name << ": written outside the sequences, or non-finite inside";
    EXPECT_LE(gr2 > 0 ? std::sqrt(ge2 / gr2) : std::sqrt(ge2), grad_tol(c.dt)) << g.name;
  }
}

const std::vector<int32_t> kMixed = {0, 1, 7, 63, 64, 65, 4097, 100};

// Mixed lengths including 0, 1, 7, 64 +- 1 and 4097, self-attention, both
// dtypes, D 64 and 128, no mask and causal, every forward variant.
TEST_F(GpuAttentionVarlen, MixedLengthsEveryVariant) {
  for (kaio_attention_variant var :
       {KAIO_ATTENTION_AUTO, KAIO_ATTENTION_SM80_M128, KAIO_ATTENTION_SM80})
    for (kaio_dtype dt : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16})
      for (int64_t dim : {64, 128})
        for (kaio_attention_mask m : {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL}) {
          Case c;
          c.lq = kMixed;
          c.dt = dt;
          c.d = dim;
          c.mask = m;
          c.variant = var;
          run(c, false);
        }
}

// len_q != len_k per sequence (both ways, and len_k 0): bottom-right causal
// per sequence, top-left, none; GQA 1, 4 and 8.
TEST_F(GpuAttentionVarlen, CrossLengthsMasksAndGqa) {
  for (kaio_attention_variant var : {KAIO_ATTENTION_AUTO, KAIO_ATTENTION_SM80_M128})
    for (int64_t hkv : {8, 2, 1})
      for (kaio_attention_mask m : {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL,
                                    KAIO_ATTENTION_CAUSAL_TOP_LEFT}) {
        Case c;
        c.lq = {5, 100, 33, 0, 64, 200, 9};
        c.lk = {50, 17, 33, 10, 0, 129, 300};
        c.hkv = hkv;
        c.dt = hkv == 2 ? KAIO_DTYPE_BF16 : KAIO_DTYPE_F16;
        c.d = hkv == 1 ? 128 : 64;
        c.mask = m;
        c.variant = var;
        run(c, false);
      }
}

// The sm_80 backward on packed sequences: dQ, dK, dV against the reference,
// rows of no sequence left untouched.
TEST_F(GpuAttentionVarlen, BackwardMixedLengths) {
  for (kaio_dtype dt : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16})
    for (int64_t dim : {64, 128})
      for (kaio_attention_mask m : {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL}) {
        Case c;
        c.lq = {0, 1, 7, 64, 65, 130, 20};
        c.lk = {3, 1, 7, 63, 65, 90, 0};
        c.dt = dt;
        c.d = dim;
        c.mask = m;
        c.variant = KAIO_ATTENTION_SM80;
        run(c, true);
      }
}

// cu_seqlens that are not prefix sums: decreasing, past total, negative.
// Those sequences are empty (nothing written); the valid ones are right.
TEST_F(GpuAttentionVarlen, BadCuSeqlensAreEmptySequences) {
  for (kaio_attention_variant var : {KAIO_ATTENTION_AUTO, KAIO_ATTENTION_SM80}) {
    Case c;
    c.cu_q = {0, 50, 30, 2000000, -5, 60, 70};
    c.cu_k = {0, 40, 45, 45, 1 << 30, 80, 90};
    c.tail = 100;  // total_q = total_k = 100
    c.mask = KAIO_ATTENTION_CAUSAL;
    c.variant = var;
    run(c, var == KAIO_ATTENTION_SM80);
  }
  // Sequences longer than the desc's max_seqlen_q / _k (which sized the
  // grid): empty and reported, not cut short.
  for (kaio_attention_variant var : {KAIO_ATTENTION_AUTO, KAIO_ATTENTION_SM80}) {
    Case c;
    c.lq = {20, 90, 7};
    c.lk = {30, 25, 100};
    c.max_q = 64;
    c.max_k = 64;
    c.mask = KAIO_ATTENTION_CAUSAL;
    c.variant = var;
    run(c, var == KAIO_ATTENTION_SM80);
  }
}

// Small enough for compute-sanitizer memcheck: every kernel, short and empty
// sequences, a bad cu entry, tail rows.
TEST_F(GpuAttentionVarlen, SanitizerSmall) {
  Case c;
  c.lq = {0, 1, 7, 65, 3};
  c.lk = {2, 1, 9, 64, 0};
  c.mask = KAIO_ATTENTION_CAUSAL;
  c.variant = KAIO_ATTENTION_SM80_M128;
  run(c, true);
  c.variant = KAIO_ATTENTION_SM80;
  c.dt = KAIO_DTYPE_BF16;
  run(c, false);
  if (is_sm90()) {
    c.variant = KAIO_ATTENTION_SM90;
    c.d = 128;
    run(c, false);
  }
  Case bad;
  bad.cu_q = {0, 9, 1 << 30, 12, 20};  // sequence 3: valid queries, no keys
  bad.cu_k = {0, 5, 7, -3, 12};
  bad.tail = 24;
  run(bad, true);
}

}  // namespace
