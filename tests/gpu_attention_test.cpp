// FlashAttention forward and backward against an f64 CPU reference computed
// from the same rounded inputs: f16 and bf16; every head dim; B = 2 with
// GQA 4:2 (plus MHA and MQA); S in {1, 17, 128, 1000} and Sq != Sk both
// ways; no mask, bottom-right and top-left causal; O, LSE, dQ, dK, dV; f32
// outputs; padded row strides; KAIO's rank-2 attention_tc ops; and a
// bit-for-bit determinism check of the backward.
//
// Inputs are uniform in [-1, 1]. Every output is poisoned with NaN (0xFF
// bytes) before each run, so an element left unwritten fails the test.
// Tolerances, relative Frobenius error ||out - ref|| / ||ref|| per tensor:
//   O:        f16 2e-3, bf16 1.2e-2. P = softmax is rounded to the input
//             dtype before P·V (2^-11 / 2^-8 relative per element, averaging
//             out over the keys) and O once more on output when 16-bit.
//   dQ/dK/dV: f16 1e-2, bf16 5e-2. dS = P ∘ (dP − rowsum(dO ∘ O)) is rounded
//             to the input dtype for the dQ and dK products and O enters
//             the rowsum rounded: a few 16-bit roundings per element.
//   LSE:      absolute 2e-3 (f32 sums of exact products, ex2/lg2.approx).
// Rows that see no key must give O = 0 exactly and LSE = -inf.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

struct Shape {
  int64_t b = 2, sq = 17, sk = 17, hq = 4, hkv = 2, d = 64;
  kaio_dtype dt = KAIO_DTYPE_F16;
  kaio_dtype out = 0;  // 0: dt
  kaio_attention_mask mask = KAIO_ATTENTION_MASK_NONE;
  int64_t pad = 0;  // extra elements per row of every BSHD view (multiple of 8)
  kaio_attention_variant variant = KAIO_ATTENTION_AUTO;
};

std::string describe(const Shape &s) {
  const char *m[] = {"none", "causal", "causal_top_left"};
  return std::string(kaio_dtype_name(s.dt)) + " out " + kaio_dtype_name(s.out ? s.out : s.dt) +
         " B" + std::to_string(s.b) + " Sq" + std::to_string(s.sq) + " Sk" +
         std::to_string(s.sk) + " H" + std::to_string(s.hq) + ":" + std::to_string(s.hkv) +
         " D" + std::to_string(s.d) + " mask " + m[s.mask] + " pad " + std::to_string(s.pad) +
         " variant " + std::to_string(s.variant);
}

bool visible(const Shape &s, int64_t i, int64_t j) {
  if (s.mask == KAIO_ATTENTION_CAUSAL) return j <= i + (s.sk - s.sq);
  if (s.mask == KAIO_ATTENTION_CAUSAL_TOP_LEFT) return j <= i;
  return true;
}

// Reference forward and backward for one shape, in f64.
struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

// Element (b, s, h, d) of a BSHD tensor stored with row stride ld.
inline size_t at(int64_t b, int64_t s, int64_t h, int64_t d, int64_t S, int64_t H, int64_t D,
                 int64_t ld) {
  (void)H;
  return static_cast<size_t>((b * S + s) * ld + h * D + d);
}

Reference reference(const Shape &s, const std::vector<double> &q, const std::vector<double> &k,
                    const std::vector<double> &v, const std::vector<double> &dout, int64_t ldq,
                    int64_t ldk, bool backward) {
  const int64_t B = s.b, Sq = s.sq, Sk = s.sk, Hq = s.hq, Hkv = s.hkv, D = s.d, G = Hq / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Reference r;
  r.o.assign(B * Sq * Hq * D, 0.0);
  r.lse.assign(B * Hq * Sq, -INFINITY);
  if (backward) {
    r.dq.assign(B * Sq * Hq * D, 0.0);
    r.dk.assign(B * Sk * Hkv * D, 0.0);
    r.dv.assign(B * Sk * Hkv * D, 0.0);
  }
  std::vector<double> p(Sk), dp(Sk);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / G;
      for (int64_t i = 0; i < Sq; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j < Sk; ++j) {
          if (!visible(s, i, j)) {
            p[j] = -INFINITY;
            continue;
          }
          double acc = 0;
          for (int64_t d = 0; d < D; ++d)
            acc += q[at(b, i, h, d, Sq, Hq, D, ldq)] * k[at(b, j, hk, d, Sk, Hkv, D, ldk)];
          p[j] = acc * scale;
          m = std::max(m, p[j]);
        }
        if (m == -INFINITY) continue;  // no visible key: O 0, LSE -inf, no gradient
        double l = 0;
        for (int64_t j = 0; j < Sk; ++j) {
          p[j] = p[j] == -INFINITY ? 0.0 : std::exp(p[j] - m);
          l += p[j];
        }
        r.lse[(b * Hq + h) * Sq + i] = m + std::log(l);
        const size_t orow = (b * Sq + i) * Hq * D + h * D;
        for (int64_t j = 0; j < Sk; ++j) {
          p[j] /= l;
          if (p[j] == 0) continue;
          for (int64_t d = 0; d < D; ++d) r.o[orow + d] += p[j] * v[at(b, j, hk, d, Sk, Hkv, D, ldk)];
        }
        if (!backward) continue;
        double di = 0;
        for (int64_t d = 0; d < D; ++d) di += dout[at(b, i, h, d, Sq, Hq, D, ldq)] * r.o[orow + d];
        for (int64_t j = 0; j < Sk; ++j) {
          if (p[j] == 0) continue;
          double acc = 0;
          for (int64_t d = 0; d < D; ++d)
            acc += dout[at(b, i, h, d, Sq, Hq, D, ldq)] * v[at(b, j, hk, d, Sk, Hkv, D, ldk)];
          const double ds = p[j] * (acc - di);
          const size_t krow = (b * Sk + j) * Hkv * D + hk * D;
          for (int64_t d = 0; d < D; ++d) {
            r.dq[orow + d] += scale * ds * k[at(b, j, hk, d, Sk, Hkv, D, ldk)];
            r.dk[krow + d] += scale * ds * q[at(b, i, h, d, Sq, Hq, D, ldq)];
            r.dv[krow + d] += p[j] * dout[at(b, i, h, d, Sq, Hq, D, ldq)];
          }
        }
      }
    }
  return r;
}

// Relative Frobenius error of a strided GPU tensor against a dense reference
// ([rows, cols]); counts non-finite values.
struct Error {
  double rel = 0;
  int64_t non_finite = 0;
};

Error compare(const std::vector<double> &got, int64_t ld, const std::vector<double> &ref,
              int64_t rows, int64_t cols) {
  double e2 = 0, r2 = 0;
  Error e;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      double g = got[i * ld + c], x = ref[i * cols + c];
      if (!std::isfinite(g)) {
        ++e.non_finite;
        continue;
      }
      e2 += (g - x) * (g - x);
      r2 += x * x;
    }
  e.rel = r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2);
  return e;
}

double o_tol(kaio_dtype dt) { return dt == KAIO_DTYPE_BF16 ? 1.2e-2 : 2e-3; }
double grad_tol(kaio_dtype dt) { return dt == KAIO_DTYPE_BF16 ? 5e-2 : 1e-2; }

const kaio_dtype kDtypes[] = {KAIO_DTYPE_F16, KAIO_DTYPE_BF16};
const std::vector<std::array<int64_t, 2>> kSmallSeqs = {{1, 1},    {17, 17},  {128, 128},
                                                        {17, 100}, {100, 17}, {1, 129}};

class GpuAttention : public kt::GpuTest {
 protected:
  void sweep(const std::vector<int64_t> &dims, bool backward,
             kaio_attention_variant variant = KAIO_ATTENTION_AUTO,
             const std::vector<std::array<int64_t, 2>> &seqs = kSmallSeqs,
             const std::vector<kaio_attention_mask> &masks = {KAIO_ATTENTION_MASK_NONE,
                                                              KAIO_ATTENTION_CAUSAL}) {
    for (kaio_dtype dt : kDtypes)
      for (int64_t d : dims)
        for (const auto &sqk : seqs)
          for (kaio_attention_mask m : masks) {
            Shape s;
            s.dt = dt;
            s.d = d;
            s.sq = sqk[0];
            s.sk = sqk[1];
            s.mask = m;
            s.variant = variant;
            check(s, backward);
          }
  }

  struct Dev {
    kt::Buffer buf;
    kaio_tensor view;
    size_t bytes;
  };

  Dev upload(const kt::HostTensor &t, int64_t rows, int64_t cols, int64_t ld) {
    Dev d;
    d.bytes = t.bytes.size();
    d.buf = kt::make_buffer(dev(), d.bytes);
    EXPECT_EQ(kaio_buffer_write(d.buf.get(), 0, t.bytes.data(), d.bytes), KAIO_OK);
    d.view = kaio_tensor_2d(d.buf.get(), t.dtype, rows, cols);
    d.view.row_stride = ld;
    return d;
  }

  Dev poisoned(kaio_dtype dt, int64_t rows, int64_t cols, int64_t ld) {
    Dev d;
    d.bytes = static_cast<size_t>(((rows - 1) * ld + cols) * kaio_dtype_size(dt));
    d.buf = kt::make_buffer(dev(), d.bytes);
    EXPECT_EQ(kaio_buffer_memset(d.buf.get(), stream(), 0, 0xFF, d.bytes), KAIO_OK);
    d.view = kaio_tensor_2d(d.buf.get(), dt, rows, cols);
    d.view.row_stride = ld;
    return d;
  }

  std::vector<double> read(const Dev &d) {
    std::vector<uint8_t> bytes(d.bytes);
    EXPECT_EQ(kaio_buffer_read(d.buf.get(), 0, bytes.data(), bytes.size()), KAIO_OK);
    return kt::decode(d.view.dtype, bytes);
  }

  kaio_attention_desc desc_for(const Shape &s) {
    kaio_attention_desc d;
    EXPECT_EQ(kaio_attention_desc_init(&d, sizeof d), KAIO_OK);
    d.dtype = s.dt;
    d.out_dtype = s.out;
    d.mask = s.mask;
    d.batch = s.b;
    d.seq_q = s.sq;
    d.seq_k = s.sk;
    d.heads_q = s.hq;
    d.heads_kv = s.hkv;
    d.head_dim = s.d;
    d.variant = s.variant;
    return d;
  }

  // A backward's inputs, unpadded: Q, K, V and dO random in [-1, 1] from
  // seed, O and LSE from the forward.
  struct BackwardCase {
    Dev q, k, v, dout, o, lse;
    kaio_attention_desc desc;
  };
  BackwardCase backward_case(const Shape &s, uint64_t seed) {
    const int64_t ldq = s.hq * s.d, ldk = s.hkv * s.d;
    const size_t nq = s.b * s.sq * ldq, nk = s.b * s.sk * ldk;
    kt::HostTensor hq = kt::random_tensor(s.dt, nq, -1, 1, seed), hk = kt::random_tensor(s.dt, nk, -1, 1, seed + 1),
                   hv = kt::random_tensor(s.dt, nk, -1, 1, seed + 2), hdo = kt::random_tensor(s.dt, nq, -1, 1, seed + 3);
    BackwardCase c{upload(hq, s.b * s.sq, ldq, ldq), upload(hk, s.b * s.sk, ldk, ldk),
                   upload(hv, s.b * s.sk, ldk, ldk), upload(hdo, s.b * s.sq, ldq, ldq),
                   poisoned(s.dt, s.b * s.sq, ldq, ldq), poisoned(KAIO_DTYPE_F32, s.b * s.hq, s.sq, s.sq),
                   desc_for(s)};
    EXPECT_EQ(kaio_attention(stream(), &c.q.view, &c.k.view, &c.v.view, &c.o.view, &c.lse.view, &c.desc),
              KAIO_OK);
    return c;
  }

  // dQ, dK and dV of one launch of the prepared backward op on c, into
  // poisoned buffers.
  std::vector<std::vector<double>> gradients(const Shape &s, const BackwardCase &c, kaio_op *op) {
    const int64_t ldq = s.hq * s.d, ldk = s.hkv * s.d;
    Dev dq = poisoned(s.dt, s.b * s.sq, ldq, ldq), dk = poisoned(s.dt, s.b * s.sk, ldk, ldk),
        dv = poisoned(s.dt, s.b * s.sk, ldk, ldk);
    const kaio_tensor t[] = {c.dout.view, c.q.view, c.k.view, c.v.view, c.o.view,
                             c.lse.view,  dq.view,  dk.view,  dv.view};
    EXPECT_EQ(kaio_op_launch(op, stream(), t, 9), KAIO_OK);
    EXPECT_EQ(kaio_stream_synchronize(stream()), KAIO_OK);
    return {read(dq), read(dk), read(dv)};
  }

  // The backward of s with deterministic 1 twice (bit for bit) and 0 (within
  // rounding of 1).
  void deterministic_against_not(const Shape &s) {
    SCOPED_TRACE(describe(s));
    BackwardCase bc = backward_case(s, kt::test_seed() + static_cast<uint64_t>(s.d + s.mask));
    using Grads = std::vector<std::vector<double>>;
    auto run = [&](int32_t deterministic, Grads *out) {
      kaio_attention_desc dd = bc.desc;
      dd.deterministic = deterministic;
      kaio_op *op = nullptr;
      KT_OK(kaio_op_create_attention_backward(&op, dev(), &dd));
      kt::Op guard(op);
      *out = gradients(s, bc, op);
    };
    Grads a, b, c;
    run(1, &a);
    run(1, &b);
    run(0, &c);
    ASSERT_EQ(a.size(), 3u);
    ASSERT_EQ(b.size(), 3u);
    ASSERT_EQ(c.size(), 3u);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(double)), 0)
          << "deterministic: gradient " << i << " changed between runs";
    for (size_t i = 0; i < 3; ++i) {
      double peak = 0, err = 0;
      for (size_t j = 0; j < a[i].size(); ++j) {
        peak = std::max(peak, std::abs(a[i][j]));
        err = std::max(err, std::abs(a[i][j] - c[i][j]));
      }
      EXPECT_GT(peak, 0.0);
      EXPECT_LE(err, 4e-3 * peak) << "gradient " << i << ": deterministic 0 against 1, peak " << peak;
    }
  }

  // Runs forward (and backward) for s and checks every output.
  void check(const Shape &s, bool backward) {
    SCOPED_TRACE(describe(s) + (backward ? " fwd+bwd" : " fwd"));
    const kaio_dtype out = s.out ? s.out : s.dt;
    const int64_t ldq = s.hq * s.d + s.pad, ldk = s.hkv * s.d + s.pad;
    const size_t nq = static_cast<size_t>((s.b * s.sq - 1) * ldq + s.hq * s.d);
    const size_t nk = static_cast<size_t>((s.b * s.sk - 1) * ldk + s.hkv * s.d);
    uint64_t seed = kt::test_seed() ^ static_cast<uint64_t>(s.sq * 7919 + s.sk * 31 + s.d * 3 + s.mask);
    kt::HostTensor hq = kt::random_tensor(s.dt, nq, -1, 1, seed);
    kt::HostTensor hk = kt::random_tensor(s.dt, nk, -1, 1, seed + 1);
    kt::HostTensor hv = kt::random_tensor(s.dt, nk, -1, 1, seed + 2);
    kt::HostTensor hdo = kt::random_tensor(s.dt, nq, -1, 1, seed + 3);
    Dev q = upload(hq, s.b * s.sq, s.hq * s.d, ldq), k = upload(hk, s.b * s.sk, s.hkv * s.d, ldk),
        v = upload(hv, s.b * s.sk, s.hkv * s.d, ldk);
    Dev o = poisoned(out, s.b * s.sq, s.hq * s.d, ldq);
    Dev lse = poisoned(KAIO_DTYPE_F32, s.b * s.hq, s.sq, s.sq);
    kaio_attention_desc d = desc_for(s);
    KT_OK(kaio_attention(stream(), &q.view, &k.view, &v.view, &o.view, &lse.view, &d));
    KT_OK(kaio_stream_synchronize(stream()));
    Reference ref = reference(s, hq.values, hk.values, hv.values, hdo.values, ldq, ldk, backward);

    std::vector<double> go = read(o), gl = read(lse);
    // O: per-row dense reference [B*Sq, Hq*D]
    Error eo = compare(go, ldq, ref.o, s.b * s.sq, s.hq * s.d);
    EXPECT_EQ(eo.non_finite, 0);
    EXPECT_LE(eo.rel, o_tol(s.dt));
    int64_t lse_bad = 0, empty_bad = 0;
    for (int64_t i = 0; i < s.b * s.hq * s.sq; ++i) {
      if (std::isinf(ref.lse[i])) {
        if (!(std::isinf(gl[i]) && gl[i] < 0)) ++lse_bad;
      } else if (!(std::fabs(gl[i] - ref.lse[i]) <= 2e-3)) {
        ++lse_bad;
      }
    }
    for (int64_t b = 0; b < s.b; ++b)
      for (int64_t i = 0; i < s.sq; ++i)
        for (int64_t h = 0; h < s.hq; ++h)
          if (std::isinf(ref.lse[(b * s.hq + h) * s.sq + i]))
            for (int64_t dd = 0; dd < s.d; ++dd)
              if (go[(b * s.sq + i) * ldq + h * s.d + dd] != 0.0) ++empty_bad;
    EXPECT_EQ(lse_bad, 0);
    EXPECT_EQ(empty_bad, 0) << "rows that see no key must give exactly 0";
    if (!backward) return;

    Dev dout = upload(hdo, s.b * s.sq, s.hq * s.d, ldq);
    Dev dq = poisoned(out, s.b * s.sq, s.hq * s.d, ldq);
    Dev dk = poisoned(out, s.b * s.sk, s.hkv * s.d, ldk);
    Dev dv = poisoned(out, s.b * s.sk, s.hkv * s.d, ldk);
    kaio_attention_desc bd = d;
    bd.o_dtype = out;
    kaio_op *op = nullptr;
    KT_OK(kaio_op_create_attention_backward(&op, dev(), &bd));
    kt::Op guard(op);
    const kaio_tensor t[] = {dout.view, q.view, k.view, v.view, o.view,
                             lse.view,  dq.view, dk.view, dv.view};
    KT_OK(kaio_op_launch(op, stream(), t, 9));
    KT_OK(kaio_stream_synchronize(stream()));
    const struct {
      const char *name;
      Dev *dev;
      const std::vector<double> *ref;
      int64_t rows, cols, ld;
    } grads[] = {{"dQ", &dq, &ref.dq, s.b * s.sq, s.hq * s.d, ldq},
                 {"dK", &dk, &ref.dk, s.b * s.sk, s.hkv * s.d, ldk},
                 {"dV", &dv, &ref.dv, s.b * s.sk, s.hkv * s.d, ldk}};
    for (const auto &g : grads) {
      Error e = compare(read(*g.dev), g.ld, *g.ref, g.rows, g.cols);
      EXPECT_EQ(e.non_finite, 0) << g.name;
      EXPECT_LE(e.rel, grad_tol(s.dt)) << g.name;
    }
  }
};


// Every dtype, head dim, small (Sq, Sk) pair and mask: forward only, or
// forward and backward.
// AUTO runs the sm_90a kernels for D 64 and 128 on an H100, the 128-row
// sm_80 kernels otherwise for D <= 128; SM80_M128 and SM80 force those.
TEST_F(GpuAttention, ForwardSmallShapesEveryDimDtypeAndMask) {
  sweep({32, 64, 96, 128, 256}, false);
  sweep({32, 64, 96, 128}, false, KAIO_ATTENTION_SM80_M128);
  sweep({32, 64, 96, 128}, false, KAIO_ATTENTION_SM80);
}

// The sm_90a kernels (TMA + wgmma), forward and backward: blocks of 128 and
// 64 rows, so lengths at the block sizes +- 1 and several blocks, both masks
// (bottom-right with Sq > Sk leaves rows with no key), GQA 4:1 and MQA,
// f32 output, padded row strides. Skipped on devices other than sm_90.
TEST_F(GpuAttention, Sm90BlockEdgesMasksHeadsAndStrides) {
  kaio_device_info info{};
  info.struct_size = sizeof info;
  KT_OK(kaio_device_get_info(dev(), &info));
  if (info.cc_major != 9 || info.cc_minor != 0)
    GTEST_SKIP() << "the sm_90a attention kernels need compute capability 9.0; this device is "
                 << info.cc_major << "." << info.cc_minor;
  sweep({64, 128}, true, KAIO_ATTENTION_SM90,
        {{127, 129}, {129, 257}, {300, 1}, {1, 300}, {65, 63}, {200, 77}},
        {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL, KAIO_ATTENTION_CAUSAL_TOP_LEFT});
  Shape gqa;
  gqa.variant = KAIO_ATTENTION_SM90;
  gqa.hq = 8;
  gqa.hkv = 2;
  gqa.sq = gqa.sk = 333;
  gqa.mask = KAIO_ATTENTION_CAUSAL;
  check(gqa, true);
  Shape mqa = gqa;
  mqa.hkv = 1;
  mqa.d = 128;
  mqa.out = KAIO_DTYPE_F32;
  mqa.pad = 8;
  check(mqa, true);
  Shape wide = mqa;  // B 3, bf16 in and out
  wide.b = 3;
  wide.dt = KAIO_DTYPE_BF16;
  wide.out = 0;
  wide.mask = KAIO_ATTENTION_MASK_NONE;
  check(wide, true);
  // From 1024 keys: the fused kernel (dQ through the f32 workspace), every
  // mask (deterministic: the adds in a fixed key-block order; causal GQA:
  // the CTAs block-major).
  for (kaio_attention_mask mask :
       {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL, KAIO_ATTENTION_CAUSAL_TOP_LEFT}) {
    Shape lk = gqa;
    lk.hq = 4;
    lk.sq = 130;
    lk.sk = 4100;
    lk.mask = mask;
    lk.d = mask == KAIO_ATTENTION_CAUSAL ? 64 : 128;
    check(lk, true);
    if (mask == KAIO_ATTENTION_MASK_NONE) {
      lk.sk = 2100;  // another key count, a partial last key block
      check(lk, true);
      continue;
    }
    lk.hkv = lk.hq;
    check(lk, true);
  }
}

TEST_F(GpuAttention, BackwardSmallShapesEveryDimDtypeAndMask) {
  sweep({32, 64, 96, 128}, true);
  sweep({64, 128}, true, KAIO_ATTENTION_SM80);  // AUTO takes the sm_90a kernels on an H100
}

TEST_F(GpuAttention, Seq1000ForwardAndBackward) {
  // The f64 reference of the backward dominates the test's time: D 64 runs
  // both directions, D 128 and 256 the forward.
  for (kaio_dtype dt : kDtypes)
    for (int64_t d : {64, 128})
      for (kaio_attention_mask m : {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL}) {
        Shape s;
        s.dt = dt;
        s.d = d;
        s.sq = s.sk = 1000;
        s.mask = m;
        check(s, d == 64);
      }
  Shape s;
  s.d = 256;
  s.sq = s.sk = 1000;
  s.mask = KAIO_ATTENTION_CAUSAL;
  check(s, false);
  Shape s2;
  s2.d = 128;
  s2.sq = 1000;
  s2.sk = 999;
  s2.variant = KAIO_ATTENTION_SM80;
  check(s2, false);
}

TEST_F(GpuAttention, TopLeftCausalHeadRatiosF32OutputsAndPaddedStrides) {
  for (int64_t sq : {17, 100}) {
    Shape s;
    s.sq = sq;
    s.sk = 117 - sq;
    s.mask = KAIO_ATTENTION_CAUSAL_TOP_LEFT;
    check(s, true);
  }
  for (int64_t hkv : {4, 1}) {  // MHA and MQA
    Shape s;
    s.hkv = hkv;
    s.sq = 70;
    s.sk = 130;
    s.mask = KAIO_ATTENTION_CAUSAL;
    check(s, true);
  }
  for (kaio_dtype dt : kDtypes) {
    Shape s;
    s.dt = dt;
    s.out = KAIO_DTYPE_F32;
    s.sq = 65;
    s.sk = 200;
    check(s, true);
  }
  Shape s;
  s.pad = 8;
  s.sq = 90;
  s.sk = 90;
  s.d = 96;
  s.mask = KAIO_ATTENTION_CAUSAL;
  check(s, true);
}

// A few odd shapes covering every code path, small enough for
// compute-sanitizer memcheck and racecheck (bench/run_attention_on_gpu.sh).
TEST_F(GpuAttention, SanitizerSmall) {
  Shape a;
  a.sq = 70;
  a.sk = 130;
  a.mask = KAIO_ATTENTION_CAUSAL;
  check(a, true);
  Shape b;
  b.dt = KAIO_DTYPE_BF16;
  b.d = 128;
  b.sq = b.sk = 65;
  b.out = KAIO_DTYPE_F32;
  check(b, true);
  Shape c;
  c.d = 96;
  c.sq = 100;
  c.sk = 17;
  c.mask = KAIO_ATTENTION_CAUSAL;
  check(c, true);
  Shape e;
  e.d = 256;
  e.sq = 33;
  e.sk = 47;
  check(e, false);
  Shape g;  // the sm_80 128-row forward (AUTO runs the sm_90a one on an H100)
  g.variant = KAIO_ATTENTION_SM80_M128;
  g.sq = 129;
  g.sk = 70;
  g.mask = KAIO_ATTENTION_CAUSAL;
  check(g, false);
  Shape f;  // the 64-row forward kernels (AUTO above runs the 128-row ones)
  f.variant = KAIO_ATTENTION_SM80;
  f.sq = 150;
  f.sk = 70;
  f.mask = KAIO_ATTENTION_CAUSAL;
  check(f, false);
}

TEST_F(GpuAttention, BackwardIsBitwiseDeterministic) {
  Shape s;
  s.sq = s.sk = 300;
  s.d = 64;
  s.mask = KAIO_ATTENTION_CAUSAL;
  BackwardCase c = backward_case(s, kt::test_seed());
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_attention_backward(&op, dev(), &c.desc));
  kt::Op guard(op);
  std::vector<std::vector<double>> first;
  for (int run = 0; run < 3; ++run) {
    std::vector<std::vector<double>> got = gradients(s, c, op);
    if (run == 0) {
      first = got;
      continue;
    }
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(std::memcmp(got[i].data(), first[i].data(), got[i].size() * sizeof(double)), 0)
          << "gradient " << i << " changed between runs " << run << " and 0";
  }
}

// deterministic 0 (the fused kernel, dQ's f32 adds in any order) against 1
// (the fused kernel's ascending key-block order): gradients within
// rounding; 1 twice: bit for bit. Causal
// shapes too: key blocks that see no query (Sq 300) and queries that see no
// key (Sq 4200 > Sk).
TEST_F(GpuAttention, BackwardNonDeterministicMatchesDeterministic) {
  for (int64_t dim : {64, 128})
    for (kaio_attention_mask mask : {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL}) {
      Shape s;  // 4096 keys or more: the fused kernel, whose dQ adds have an order
      s.sq = 300;
      s.sk = 4100;
      s.d = dim;
      s.mask = mask;
      deterministic_against_not(s);
      if (mask == KAIO_ATTENTION_CAUSAL && dim == 128) {
        s.hkv = s.hq;  // no GQA: the CTAs head by head, not block-major
        deterministic_against_not(s);
      }
    }
  Shape wide;
  wide.b = 1;
  wide.hq = wide.hkv = 2;
  wide.sq = 4200;
  wide.sk = 4100;
  wide.mask = KAIO_ATTENTION_CAUSAL;
  deterministic_against_not(wide);
}

// One deterministic op launched on new inputs after old ones: its workspace
// keeps the last launch's dQ sums (each query block's first adder stores),
// which must not leak, also into the rows that see no key (Sq > Sk, causal:
// rows 0..99 of dQ are 0). The second launch matches a fresh op's bit for bit.
TEST_F(GpuAttention, FusedBackwardRelaunchedOnNewInputs) {
  for (int64_t hq : {2, 4}) {
    Shape s;
    s.b = 1;
    s.hq = hq;
    s.hkv = 2;
    s.sq = 4200;
    s.sk = 4100;
    s.mask = KAIO_ATTENTION_CAUSAL;
    SCOPED_TRACE(describe(s));
    BackwardCase first = backward_case(s, kt::test_seed() + 11),
                 second = backward_case(s, kt::test_seed() + 23);
    kaio_op *reused = nullptr, *fresh = nullptr;
    KT_OK(kaio_op_create_attention_backward(&reused, dev(), &first.desc));
    kt::Op g1(reused);
    gradients(s, first, reused);
    const auto again = gradients(s, second, reused);
    KT_OK(kaio_op_create_attention_backward(&fresh, dev(), &second.desc));
    kt::Op g2(fresh);
    const auto ref = gradients(s, second, fresh);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(std::memcmp(again[i].data(), ref[i].data(), ref[i].size() * sizeof(double)), 0)
          << "gradient " << i << " of the reused op";
    const size_t ld = static_cast<size_t>(s.hq * s.d);
    double unseen = 0, seen = 0;
    for (size_t r = 0; r < 200; ++r)
      for (size_t c = 0; c < ld; ++c) (r < 100 ? unseen : seen) += std::abs(again[0][r * ld + c]);
    EXPECT_EQ(unseen, 0.0) << "dQ rows that see no key";
    EXPECT_GT(seen, 0.0);
  }
}

// A head with more key blocks (157 at S 20000) than an H100 holds CTAs:
// the deterministic order must not deadlock (run it under a timeout), with
// the CTAs head by head (MHA) and block-major (causal GQA).
TEST_F(GpuAttention, BackwardDeterministicManyKeyBlocks) {
  for (int64_t hq : {2, 4}) {
    Shape s;
    s.b = 1;
    s.hq = hq;
    s.hkv = 2;
    s.sq = s.sk = 20000;
    s.d = 128;
    s.mask = KAIO_ATTENTION_CAUSAL;
    deterministic_against_not(s);
  }
}

// KAIO's rank-2 single-head ops: f16 in, f32 out, top-left causal.
TEST_F(GpuAttention, KaioRank2TensorCoreOps) {
  for (bool causal : {false, true})
    for (int64_t sq : {1, 33, 500})
      for (int64_t sk : {1, 400, 1000}) {
        Shape s;
        s.b = 1;
        s.hq = s.hkv = 1;
        s.sq = sq;
        s.sk = sk;
        s.d = 64;
        s.out = KAIO_DTYPE_F32;
        s.mask = causal ? KAIO_ATTENTION_CAUSAL_TOP_LEFT : KAIO_ATTENTION_MASK_NONE;
        SCOPED_TRACE(describe(s));
        uint64_t seed = kt::test_seed() ^ static_cast<uint64_t>(sq * 1000 + sk);
        kt::HostTensor hq = kt::random_tensor(KAIO_DTYPE_F16, sq * 64, -1, 1, seed),
                       hk = kt::random_tensor(KAIO_DTYPE_F16, sk * 64, -1, 1, seed + 1),
                       hv = kt::random_tensor(KAIO_DTYPE_F16, sk * 64, -1, 1, seed + 2);
        Dev q = upload(hq, sq, 64, 64), k = upload(hk, sk, 64, 64), v = upload(hv, sk, 64, 64);
        Dev o = poisoned(KAIO_DTYPE_F32, sq, 64, 64);
        KT_OK((causal ? kaio_attention_tc_causal : kaio_attention_tc)(stream(), &q.view, &k.view,
                                                                    &v.view, &o.view));
        KT_OK(kaio_stream_synchronize(stream()));
        Reference ref = reference(s, hq.values, hk.values, hv.values, {}, 64, 64, false);
        Error e = compare(read(o), 64, ref.o, sq, 64);
        EXPECT_EQ(e.non_finite, 0);
        EXPECT_LE(e.rel, 1.5e-3);  // f16 P rounding only: the output is f32
      }
}

}  // namespace

namespace {

// KAIO's f32 flash family, f32 end to end. Tolerances (relative Frobenius):
// O 2e-5 and gradients 1e-4 (f32 sums over S and D, ex2/lg2.approx: no
// 16-bit rounding anywhere; the D <= 128 backward's split-TF32 products err
// by about 2^-21 each, the order of f32 rounding); LSE absolute 2e-5.
class GpuAttentionF32 : public GpuAttention {
 protected:
  void check_f32(int64_t S, int64_t D, bool causal) {
        Shape s;
        s.b = s.hq = s.hkv = 1;
        s.sq = s.sk = S;
        s.d = D;
        s.dt = KAIO_DTYPE_F32;
        s.mask = causal ? KAIO_ATTENTION_CAUSAL_TOP_LEFT : KAIO_ATTENTION_MASK_NONE;
        SCOPED_TRACE(describe(s));
        const int64_t ld = D + (D % 3);  // some padded strides
        const size_t n = static_cast<size_t>((S - 1) * ld + D);
        uint64_t seed = kt::test_seed() ^ static_cast<uint64_t>(S * 977 + D);
        kt::HostTensor hq = kt::random_tensor(KAIO_DTYPE_F32, n, -1, 1, seed),
                       hk = kt::random_tensor(KAIO_DTYPE_F32, n, -1, 1, seed + 1),
                       hv = kt::random_tensor(KAIO_DTYPE_F32, n, -1, 1, seed + 2),
                       hdo = kt::random_tensor(KAIO_DTYPE_F32, n, -1, 1, seed + 3);
        Dev q = upload(hq, S, D, ld), k = upload(hk, S, D, ld), v = upload(hv, S, D, ld),
            dout = upload(hdo, S, D, ld);
        Dev o = poisoned(KAIO_DTYPE_F32, S, D, ld), o2 = poisoned(KAIO_DTYPE_F32, S, D, ld);
        Dev lse = poisoned(KAIO_DTYPE_F32, 1, S, S);
        Dev dq = poisoned(KAIO_DTYPE_F32, S, D, ld), dk = poisoned(KAIO_DTYPE_F32, S, D, ld),
            dv = poisoned(KAIO_DTYPE_F32, S, D, ld);
        KT_OK((causal ? kaio_attention_flash_causal : kaio_attention_flash)(stream(), &q.view, &k.view,
                                                                          &v.view, &o2.view));
        KT_OK((causal ? kaio_attention_flash_causal_with_stats : kaio_attention_flash_with_stats)(
            stream(), &q.view, &k.view, &v.view, &o.view, &lse.view));
        KT_OK((causal ? kaio_attention_flash_causal_backward : kaio_attention_flash_backward)(
            stream(), &dout.view, &q.view, &k.view, &v.view, &o.view, &lse.view, &dq.view,
            &dk.view, &dv.view));
        KT_OK(kaio_stream_synchronize(stream()));
        // hq.values etc. are dense over the padded layout: the reference takes ld.
        Reference ref = reference(s, hq.values, hk.values, hv.values, hdo.values, ld, ld, true);
        Error eo = compare(read(o), ld, ref.o, S, D), eo2 = compare(read(o2), ld, ref.o, S, D);
        EXPECT_EQ(eo.non_finite + eo2.non_finite, 0);
        EXPECT_LE(eo.rel, 2e-5);
        EXPECT_LE(eo2.rel, 2e-5);
        std::vector<double> gl = read(lse);
        int64_t bad = 0;
        for (int64_t i = 0; i < S; ++i)
          if (!(std::fabs(gl[i] - ref.lse[i]) <= 2e-5)) ++bad;
        EXPECT_EQ(bad, 0);
        const struct {
          const char *name;
          Dev *dev;
          const std::vector<double> *ref;
        } grads[] = {{"dq", &dq, &ref.dq}, {"dk", &dk, &ref.dk}, {"dv", &dv, &ref.dv}};
        for (const auto &g : grads) {
          Error e = compare(read(*g.dev), ld, *g.ref, S, D);
          EXPECT_EQ(e.non_finite, 0) << g.name;
          EXPECT_LE(e.rel, 1e-4) << g.name;
        }
        // A second backward into fresh poisoned buffers must match bit for
        // bit (dq doubles as the rowsum scratch of the D <= 128 kernels).
        Dev dq2 = poisoned(KAIO_DTYPE_F32, S, D, ld), dk2 = poisoned(KAIO_DTYPE_F32, S, D, ld),
            dv2 = poisoned(KAIO_DTYPE_F32, S, D, ld);
        KT_OK((causal ? kaio_attention_flash_causal_backward : kaio_attention_flash_backward)(
            stream(), &dout.view, &q.view, &k.view, &v.view, &o.view, &lse.view, &dq2.view,
            &dk2.view, &dv2.view));
        KT_OK(kaio_stream_synchronize(stream()));
        auto bytes = [](const Dev &d) {
          std::vector<uint8_t> b(d.bytes);
          EXPECT_EQ(kaio_buffer_read(d.buf.get(), 0, b.data(), b.size()), KAIO_OK);
          return b;
        };
        EXPECT_TRUE(bytes(dq2) == bytes(dq)) << "dq differs between two runs";
        EXPECT_TRUE(bytes(dk2) == bytes(dk)) << "dk differs between two runs";
        EXPECT_TRUE(bytes(dv2) == bytes(dv)) << "dv differs between two runs";
  }
};

TEST_F(GpuAttentionF32, KaioFlashForwardStatsAndBackward) {
  for (bool causal : {false, true})
    for (int64_t S : {1, 17, 128, 1000})
      for (int64_t D : {8, 33, 64, 100, 128, 256})
        if (S < 1000 || D == 64 || D == 256) check_f32(S, D, causal);  // cheap f64 reference
}

// Sized for compute-sanitizer (bench/run_attention_on_gpu.sh).
TEST_F(GpuAttentionF32, SanitizerSmall) {
  check_f32(45, 100, true);
  check_f32(33, 256, false);
}

}  // namespace
