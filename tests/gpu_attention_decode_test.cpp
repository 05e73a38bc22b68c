// Decode attention (KAIO_ATTENTION_DECODE, kaio_op_create_attention_paged)
// against an f64 CPU reference from the same rounded inputs: Sk 1, 7, 4097,
// 33000; Sq 1..16 with the bottom-right causal alignment; GQA 1, 4, 8, 32;
// D 64/128/256; f16/bf16 (f32 out too); prepared (split keys) and one-shot
// (no split); paged pools with shuffled pages, page sizes 16 and 256, mixed
// lengths including 0 and 1; bitwise repeatability across launches and CUDA
// graph replays (the split merge's counts reset); bad paged device data,
// unsplit and split.
// Tolerances as tests/gpu_attention_test.cpp: relative Frobenius error of O
// f16 2e-3, bf16 1.2e-2; LSE absolute 2e-3. Outputs are poisoned (NaN)
// before each run; rows that see no key must give O = 0 and LSE = -inf.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "support/graph_api.hpp"
#include "support/kaio_test.hpp"

namespace {

struct Case {
  int64_t b = 2, sq = 1, sk = 64, hq = 8, hkv = 2, d = 128;
  kaio_dtype dt = KAIO_DTYPE_F16;
  kaio_dtype out = 0;
  kaio_attention_mask mask = KAIO_ATTENTION_MASK_NONE;
  int32_t page = 0;               // 0: contiguous K/V
  std::vector<int32_t> lens;      // paged: per sequence (default: all sk)
  bool prepared = true;
  kaio_attention_variant variant = KAIO_ATTENTION_DECODE;
};

std::string describe(const Case &c) {
  std::string s = std::string(kaio_dtype_name(c.dt)) + " B" + std::to_string(c.b) + " Sq" +
                  std::to_string(c.sq) + " Sk" + std::to_string(c.sk) + " H" +
                  std::to_string(c.hq) + ":" + std::to_string(c.hkv) + " D" +
                  std::to_string(c.d) + " mask " + std::to_string(c.mask) + " page " +
                  std::to_string(c.page) + (c.prepared ? " prepared" : " one-shot");
  for (int32_t l : c.lens) s += " " + std::to_string(l);
  return s;
}

double o_tol(kaio_dtype dt) { return dt == KAIO_DTYPE_BF16 ? 1.2e-2 : 2e-3; }

struct Dev {
  kt::Buffer buf;
  kaio_tensor view{};
  size_t bytes = 0;
};

class GpuAttentionDecode : public kt::GpuTest {
 protected:
  Dev upload(kaio_dtype dt, const std::vector<uint8_t> &bytes, int64_t rows, int64_t cols) {
    Dev d;
    d.bytes = bytes.size();
    d.buf = kt::make_buffer(dev(), d.bytes);
    EXPECT_EQ(kaio_buffer_write(d.buf.get(), 0, bytes.data(), d.bytes), KAIO_OK);
    d.view = kaio_tensor_2d(d.buf.get(), dt, rows, cols);
    return d;
  }
  Dev upload_i32(const std::vector<int32_t> &v, int64_t rows, int64_t cols) {
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return upload(KAIO_DTYPE_I32, bytes, rows, cols);
  }
  Dev poisoned(kaio_dtype dt, int64_t rows, int64_t cols) {
    Dev d;
    d.bytes = static_cast<size_t>(rows * cols * kaio_dtype_size(dt));
    d.buf = kt::make_buffer(dev(), d.bytes);
    EXPECT_EQ(kaio_buffer_memset(d.buf.get(), stream(), 0, 0xFF, d.bytes), KAIO_OK);
    d.view = kaio_tensor_2d(d.buf.get(), dt, rows, cols);
    return d;
  }
  std::vector<double> read(const Dev &d) {
    std::vector<uint8_t> bytes(d.bytes);
    EXPECT_EQ(kaio_buffer_read(d.buf.get(), 0, bytes.data(), bytes.size()), KAIO_OK);
    return kt::decode(d.view.dtype, bytes);
  }

  // The inputs of one case: Q, and K/V either contiguous [B*Sk, Hkv*D] or a
  // shuffled page pool with its block table; row_of(b, j) is the K/V row of
  // key j of sequence b.
  struct Inputs {
    kt::HostTensor q, k, v;
    Dev dq, dk, dv, table, lens;
    std::vector<int64_t> rows;  // row of (b, j) at b * sk + j
    std::vector<int32_t> len;
  };

  Inputs make(const Case &c, uint64_t seed) {
    Inputs in;
    const int64_t kvw = c.hkv * c.d;
    in.len = c.lens.empty() ? std::vector<int32_t>(c.b, static_cast<int32_t>(c.sk)) : c.lens;
    in.q = kt::random_tensor(c.dt, c.b * c.sq * c.hq * c.d, -1, 1, seed);
    in.dq = upload(c.dt, in.q.bytes, c.b * c.sq, c.hq * c.d);
    in.rows.assign(c.b * c.sk, 0);
    int64_t nrows = c.b * c.sk;
    if (c.page) {
      const int64_t per_seq = (c.sk + c.page - 1) / c.page, pages = c.b * per_seq + 3;
      std::vector<int32_t> ids(pages);
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
      std::vector<int32_t> table(c.b * per_seq);
      for (int64_t i = 0; i < c.b * per_seq; ++i) table[i] = ids[i];
      for (int64_t b = 0; b < c.b; ++b)
        for (int64_t j = 0; j < c.sk; ++j)
          in.rows[b * c.sk + j] = int64_t{table[b * per_seq + j / c.page]} * c.page + j % c.page;
      nrows = pages * c.page;
      in.table = upload_i32(table, c.b, per_seq);
      in.lens = upload_i32(in.len, 1, c.b);
    } else {
      for (int64_t i = 0; i < c.b * c.sk; ++i) in.rows[i] = i;
    }
    in.k = kt::random_tensor(c.dt, nrows * kvw, -1, 1, seed + 1);
    in.v = kt::random_tensor(c.dt, nrows * kvw, -1, 1, seed + 2);
    in.dk = upload(c.dt, in.k.bytes, nrows, kvw);
    in.dv = upload(c.dt, in.v.bytes, nrows, kvw);
    return in;
  }

  kaio_attention_desc desc_for(const Case &c) {
    kaio_attention_desc d;
    EXPECT_EQ(kaio_attention_desc_init(&d, sizeof d), KAIO_OK);
    d.dtype = c.dt;
    d.out_dtype = c.out;
    d.mask = c.mask;
    d.variant = c.variant;
    d.batch = c.b;
    d.seq_q = c.sq;
    d.seq_k = c.sk;
    d.heads_q = c.hq;
    d.heads_kv = c.hkv;
    d.head_dim = c.d;
    return d;
  }

  // Runs c once into fresh poisoned O and LSE; returns {O, LSE} as read back.
  std::pair<std::vector<double>, std::vector<double>> run(const Case &c, const Inputs &in,
                                                          kaio_op *op = nullptr) {
    const kaio_dtype out = c.out ? c.out : c.dt;
    Dev o = poisoned(out, c.b * c.sq, c.hq * c.d);
    Dev lse = poisoned(KAIO_DTYPE_F32, c.b * c.hq, c.sq);
    kaio_attention_desc d = desc_for(c);
    kaio_attention_paged_desc pd;
    EXPECT_EQ(kaio_attention_paged_desc_init(&pd, sizeof pd), KAIO_OK);
    pd.page_size = c.page;
    if (c.prepared) {
      kt::Op guard;
      if (!op) {
        kaio_op *made = nullptr;
        EXPECT_EQ(c.page ? kaio_op_create_attention_paged(&made, dev(), &d, &pd)
                         : kaio_op_create_attention(&made, dev(), &d),
                  KAIO_OK)
            << kaio_last_error();
        guard.reset(made);
        op = made;
      }
      if (c.page) {
        const kaio_tensor t[] = {in.dq.view,    in.dk.view,   in.dv.view, in.table.view,
                                 in.lens.view,  o.view,       lse.view};
        EXPECT_EQ(kaio_op_launch(op, stream(), t, 7), KAIO_OK) << kaio_last_error();
      } else {
        const kaio_tensor t[] = {in.dq.view, in.dk.view, in.dv.view, o.view, lse.view};
        EXPECT_EQ(kaio_op_launch(op, stream(), t, 5), KAIO_OK) << kaio_last_error();
      }
    } else if (c.page) {
      EXPECT_EQ(kaio_attention_paged(stream(), &in.dq.view, &in.dk.view, &in.dv.view,
                                     &in.table.view, &in.lens.view, &o.view, &lse.view, &d, &pd),
                KAIO_OK)
          << kaio_last_error();
    } else {
      EXPECT_EQ(kaio_attention(stream(), &in.dq.view, &in.dk.view, &in.dv.view, &o.view,
                               &lse.view, &d),
                KAIO_OK)
          << kaio_last_error();
    }
    EXPECT_EQ(kaio_stream_synchronize(stream()), KAIO_OK) << kaio_last_error();
    return {read(o), read(lse)};
  }

  void check(const Case &c) {
    SCOPED_TRACE(describe(c));
    const uint64_t seed = kt::test_seed() ^ static_cast<uint64_t>(c.sk * 31 + c.d * 7 + c.sq);
    Inputs in = make(c, seed);
    auto [go, gl] = run(c, in);
    const int64_t G = c.hq / c.hkv, kvw = c.hkv * c.d;
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    double e2 = 0, r2 = 0;
    int64_t non_finite = 0, lse_bad = 0, empty_bad = 0;
    std::vector<double> p(c.sk), o(c.d);
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t h = 0; h < c.hq; ++h)
        for (int64_t i = 0; i < c.sq; ++i) {
          const int64_t L = in.len[b], hk = h / G;
          const double *qr = &in.q.values[((b * c.sq + i) * c.hq + h) * c.d];
          double m = -INFINITY;
          for (int64_t j = 0; j < L; ++j) {
            p[j] = -INFINITY;
            if (c.mask == KAIO_ATTENTION_CAUSAL && j > i + L - c.sq) continue;
            const double *kr = &in.k.values[in.rows[b * c.sk + j] * kvw + hk * c.d];
            double acc = 0;
            for (int64_t x = 0; x < c.d; ++x) acc += qr[x] * kr[x];
            p[j] = acc * scale;
            m = std::max(m, p[j]);
          }
          std::fill(o.begin(), o.end(), 0.0);
          double lse = -INFINITY;
          if (m != -INFINITY) {
            double l = 0;
            for (int64_t j = 0; j < L; ++j) l += p[j] == -INFINITY ? 0 : std::exp(p[j] - m);
            for (int64_t j = 0; j < L; ++j) {
              if (p[j] == -INFINITY) continue;
              const double w = std::exp(p[j] - m) / l;
              const double *vr = &in.v.values[in.rows[b * c.sk + j] * kvw + hk * c.d];
              for (int64_t x = 0; x < c.d; ++x) o[x] += w * vr[x];
            }
            lse = m + std::log(l);
          }
          const double *g = &go[((b * c.sq + i) * c.hq + h) * c.d];
          for (int64_t x = 0; x < c.d; ++x) {
            if (!std::isfinite(g[x])) {
              ++non_finite;
              continue;
            }
            e2 += (g[x] - o[x]) * (g[x] - o[x]);
            r2 += o[x] * o[x];
            if (m == -INFINITY && g[x] != 0.0) ++empty_bad;
          }
          const double gl1 = gl[(b * c.hq + h) * c.sq + i];
          if (m == -INFINITY ? !(std::isinf(gl1) && gl1 < 0) : !(std::fabs(gl1 - lse) <= 2e-3))
            ++lse_bad;
        }
    EXPECT_EQ(non_finite, 0);
    EXPECT_LE(r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2), o_tol(c.dt));
    EXPECT_EQ(lse_bad, 0);
    EXPECT_EQ(empty_bad, 0) << "rows that see no key must give exactly 0";
  }
};

// Contiguous: Sk 1, 7, 4097, every head dim and dtype, Sq 1 and 4, both
// masks, prepared (split keys where the shape asks) and one-shot (no split).
TEST_F(GpuAttentionDecode, ContiguousSeqsDimsDtypesMasks) {
  for (kaio_dtype dt : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16})
    for (int64_t d : {64, 128, 256})
      for (int64_t sk : {1, 7, 4097})
        for (int64_t sq : {1, 4})
          for (auto mask : {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL})
            for (bool prepared : {true, false}) {
              Case c;
              c.dt = dt;
              c.d = d;
              c.sk = sk;
              c.sq = sq;
              c.mask = mask;
              c.prepared = prepared;
              check(c);
            }
}

// A long cache (many splits), and AUTO picking the decode path.
TEST_F(GpuAttentionDecode, LongCache33000) {
  for (bool prepared : {true, false}) {
    Case c;
    c.b = 1;
    c.sk = 33000;
    c.hq = 8;
    c.hkv = 1;
    c.dt = KAIO_DTYPE_BF16;
    c.variant = KAIO_ATTENTION_AUTO;
    c.prepared = prepared;
    check(c);
  }
}

// GQA ratios 1, 4, 8, 32 with Sq 1..16: the causal alignment among the new
// rows, rows spread over several CTAs (group * Sq > 16), f32 output.
TEST_F(GpuAttentionDecode, HeadRatiosAndQueryRows) {
  for (int64_t hkv : {32, 8, 4, 1})
    for (int64_t sq : {1, 3, 16}) {
      Case c;
      c.b = 1;
      c.hq = 32;
      c.hkv = hkv;
      c.sq = sq;
      c.sk = 300;
      c.dt = KAIO_DTYPE_BF16;
      c.mask = KAIO_ATTENTION_CAUSAL;
      c.out = sq == 3 ? KAIO_DTYPE_F32 : 0;
      check(c);
    }
  Case c;  // Sq > Sk: rows that see no key
  c.sq = 16;
  c.sk = 7;
  c.mask = KAIO_ATTENTION_CAUSAL;
  check(c);
}

// Paged: shuffled pages, page sizes 16 and 256, mixed lengths with 0 and 1.
TEST_F(GpuAttentionDecode, PagedMixedLengthsShuffledPages) {
  for (int32_t page : {16, 256})
    for (int64_t sq : {1, 4})
      for (bool prepared : {true, false}) {
        Case c;
        c.b = 5;
        c.sk = 4097;
        c.lens = {0, 1, 37, 1000, 4097};
        c.page = page;
        c.sq = sq;
        c.mask = sq > 1 ? KAIO_ATTENTION_CAUSAL : KAIO_ATTENTION_MASK_NONE;
        c.prepared = prepared;
        check(c);
        c.dt = KAIO_DTYPE_BF16;
        c.d = 64;
        c.hq = 4;
        c.hkv = 4;
        check(c);
      }
}

// Several sequences with causal Sq 5, lengths that are not a multiple of the
// 16-key tile, splits, and paged O and LSE bitwise equal to contiguous K/V
// holding the same values (the K/V copies' L2 prefetch must not change what
// is read).
TEST_F(GpuAttentionDecode, BatchCausalPagedMatchesContiguousBitwise) {
  Case c;
  c.b = 6;
  c.sq = 5;
  c.sk = 1000;
  c.dt = KAIO_DTYPE_BF16;
  c.mask = KAIO_ATTENTION_CAUSAL;
  for (bool prepared : {true, false}) {
    c.prepared = prepared;
    c.page = 0;
    c.lens.clear();
    check(c);
    c.page = 16;
    c.lens = {1000, 999, 17, 1, 0, 641};
    check(c);
  }
  c.prepared = true;
  c.lens.clear();
  Inputs paged = make(c, kt::test_seed());
  Case flat = c;
  flat.page = 0;
  Inputs contig = make(flat, kt::test_seed());
  const int64_t row_bytes = c.hkv * c.d * kaio_dtype_size(c.dt);
  std::vector<uint8_t> k(c.b * c.sk * row_bytes), v(k.size());
  for (int64_t i = 0; i < c.b * c.sk; ++i) {
    std::memcpy(&k[i * row_bytes], &paged.k.bytes[paged.rows[i] * row_bytes], row_bytes);
    std::memcpy(&v[i * row_bytes], &paged.v.bytes[paged.rows[i] * row_bytes], row_bytes);
  }
  contig.dk = upload(c.dt, k, c.b * c.sk, c.hkv * c.d);
  contig.dv = upload(c.dt, v, c.b * c.sk, c.hkv * c.d);
  auto a = run(c, paged), b = run(flat, contig);
  ASSERT_EQ(a.first.size(), b.first.size());
  EXPECT_EQ(std::memcmp(a.first.data(), b.first.data(), a.first.size() * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(a.second.data(), b.second.data(), a.second.size() * sizeof(double)), 0);
}

// Two runs of one prepared split op give the same bits.
TEST_F(GpuAttentionDecode, PreparedSplitIsBitwiseRepeatable) {
  for (int32_t page : {0, 16}) {
    Case c;
    c.b = 1;
    c.sk = 20000;
    c.page = page;
    Inputs in = make(c, kt::test_seed());
    kaio_attention_desc d = desc_for(c);
    kaio_attention_paged_desc pd;
    KT_OK(kaio_attention_paged_desc_init(&pd, sizeof pd));
    pd.page_size = page;
    kaio_op *op = nullptr;
    KT_OK(page ? kaio_op_create_attention_paged(&op, dev(), &d, &pd)
               : kaio_op_create_attention(&op, dev(), &d));
    kt::Op guard(op);
    auto a = run(c, in, op), b = run(c, in, op);
    ASSERT_EQ(a.first.size(), b.first.size());
    EXPECT_EQ(std::memcmp(a.first.data(), b.first.data(), a.first.size() * sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(a.second.data(), b.second.data(), a.second.size() * sizeof(double)), 0);
  }
}

// A length past seq_k and a page id past the pool: that sequence's O is
// NaN, the others are right, and the next sync reports the bad data; with
// one split and with several (the NaN of one split spoils the merge).
TEST_F(GpuAttentionDecode, PagedBadDeviceDataGivesNanAndError) {
  for (int64_t sk : {64, 2048}) {
    SCOPED_TRACE("Sk " + std::to_string(sk));
    Case c;
    c.b = 3;
    c.sk = sk;
    c.page = 16;
    const int64_t per_seq = sk / 16;
    Inputs in = make(c, kt::test_seed());
    const int32_t len = static_cast<int32_t>(sk);
    in.lens = upload_i32({len, len + 1, len}, 1, 3);
    std::vector<int32_t> table(3 * per_seq);
    std::vector<uint8_t> bytes(table.size() * 4);
    ASSERT_EQ(kaio_buffer_read(in.table.buf.get(), 0, bytes.data(), bytes.size()), KAIO_OK);
    std::memcpy(table.data(), bytes.data(), bytes.size());
    table[2 * per_seq + 1] = 1 << 20;  // sequence 2, page 1
    Dev bad_table = upload_i32(table, 3, per_seq);
    kaio_attention_desc d = desc_for(c);
    kaio_attention_paged_desc pd;
    KT_OK(kaio_attention_paged_desc_init(&pd, sizeof pd));
    pd.page_size = 16;
    kaio_op *op = nullptr;
    KT_OK(kaio_op_create_attention_paged(&op, dev(), &d, &pd));
    kt::Op guard(op);
    Dev good_lens = upload_i32({len, len, len}, 1, 3);
    const std::string bad_len = "seq_lens[1] = " + std::to_string(sk + 1);
    const struct {
      const Dev *table, *lens;
      int64_t bad_seq;
      const char *message;
    } runs[] = {{&in.table, &in.lens, 1, bad_len.c_str()},
                {&bad_table, &good_lens, 2, "page id 1048576"}};
    for (const auto &r : runs) {
      Dev o = poisoned(c.dt, c.b * c.sq, c.hq * c.d), lse = poisoned(KAIO_DTYPE_F32, c.b * c.hq, 1);
      const kaio_tensor t[] = {in.dq.view,      in.dk.view, in.dv.view, r.table->view,
                               r.lens->view,    o.view,     lse.view};
      KT_OK(kaio_op_launch(op, stream(), t, 7));
      EXPECT_EQ(kaio_stream_synchronize(stream()), KAIO_ERROR_OUT_OF_BOUNDS);
      EXPECT_NE(std::string(kaio_last_error()).find(r.message), std::string::npos)
          << kaio_last_error();
      KT_OK(kaio_stream_synchronize(stream()));  // reported once
      std::vector<double> go = read(o), gl = read(lse);
      const int64_t row = c.hq * c.d;
      for (int64_t b = 0; b < 3; ++b) {
        int64_t nan = 0, lse_nan = 0;
        for (int64_t x = 0; x < row; ++x) nan += std::isnan(go[b * row + x]);
        for (int64_t h = 0; h < c.hq; ++h) lse_nan += std::isnan(gl[b * c.hq + h]);
        EXPECT_EQ(nan, b == r.bad_seq ? row : 0) << "sequence " << b;
        EXPECT_EQ(lse_nan, b == r.bad_seq ? c.hq : 0) << "sequence " << b;
      }
    }
    // The one-shot call reports through the device's op flag too.
    Dev o = poisoned(c.dt, c.b * c.sq, c.hq * c.d);
    KT_OK(kaio_attention_paged(stream(), &in.dq.view, &in.dk.view, &in.dv.view, &bad_table.view,
                               &good_lens.view, &o.view, nullptr, &d, &pd));
    EXPECT_EQ(kaio_stream_synchronize(stream()), KAIO_ERROR_OUT_OF_BOUNDS);
    EXPECT_NE(std::string(kaio_last_error()).find("page id 1048576"), std::string::npos)
        << kaio_last_error();
    KT_OK(kaio_stream_synchronize(stream()));
  }
}

// The split merge's per-block counts: the last CTA resets them, so eager
// launches and replays of a captured CUDA graph of one prepared op
// (contiguous and paged) all merge, to the same bits.
TEST_F(GpuAttentionDecode, SplitMergeCountsResetAcrossLaunchesAndGraphReplays) {
  kt::GraphApi api = kt::graph_api();
  ASSERT_TRUE(api.begin && api.end && api.instantiate && api.launch && api.push && api.pop)
      << "driver lacks graph API";
  for (int32_t page : {0, 16}) {
    SCOPED_TRACE("page " + std::to_string(page));
    Case c;
    c.b = 3;
    c.sq = 2;
    c.sk = 9000;
    c.page = page;
    c.mask = KAIO_ATTENTION_CAUSAL;
    Inputs in = make(c, kt::test_seed() + 5);
    kaio_attention_desc d = desc_for(c);
    kaio_attention_paged_desc pd;
    KT_OK(kaio_attention_paged_desc_init(&pd, sizeof pd));
    pd.page_size = page;
    kaio_op *op = nullptr;
    KT_OK(page ? kaio_op_create_attention_paged(&op, dev(), &d, &pd)
               : kaio_op_create_attention(&op, dev(), &d));
    kt::Op guard(op);
    const auto first = run(c, in, op);
    for (double x : first.first) ASSERT_TRUE(std::isfinite(x)) << "a block was not merged";
    const auto again = run(c, in, op);
    EXPECT_EQ(std::memcmp(first.first.data(), again.first.data(), first.first.size() * 8), 0);
    Dev o = poisoned(c.dt, c.b * c.sq, c.hq * c.d), lse = poisoned(KAIO_DTYPE_F32, c.b * c.hq, c.sq);
    const kaio_tensor pt[] = {in.dq.view, in.dk.view, in.dv.view, in.table.view,
                              in.lens.view, o.view, lse.view};
    const kaio_tensor ct[] = {in.dq.view, in.dk.view, in.dv.view, o.view, lse.view};
    KT_OK(kaio_stream_synchronize(stream()));
    ASSERT_EQ(api.push(kaio_device_native_context(dev())), 0);
    kt::PopContext pop{api};
    void *s = kaio_stream_native(stream()), *graph = nullptr, *exec = nullptr;
    ASSERT_EQ(api.begin(s, 0), 0);
    KT_OK(page ? kaio_op_launch(op, stream(), pt, 7) : kaio_op_launch(op, stream(), ct, 5));
    ASSERT_EQ(api.end(s, &graph), 0) << "capture was invalidated by a kaio call";
    ASSERT_EQ(api.instantiate(&exec, graph, 0), 0);
    for (int replay = 0; replay < 3; ++replay) {
      KT_OK(kaio_buffer_memset(o.buf.get(), stream(), 0, 0xFF, o.bytes));
      KT_OK(kaio_buffer_memset(lse.buf.get(), stream(), 0, 0xFF, lse.bytes));
      ASSERT_EQ(api.launch(exec, s), 0);
      KT_OK(kaio_stream_synchronize(stream()));
      const std::vector<double> go = read(o), gl = read(lse);
      EXPECT_EQ(std::memcmp(go.data(), first.first.data(), go.size() * 8), 0) << "replay " << replay;
      EXPECT_EQ(std::memcmp(gl.data(), first.second.data(), gl.size() * 8), 0) << "replay " << replay;
    }
    api.exec_destroy(exec);
    api.graph_destroy(graph);
  }
}

// Small shapes through every path, for compute-sanitizer memcheck and
// racecheck: contiguous split and no split, paged split and no split.
TEST_F(GpuAttentionDecode, SanitizerSmall) {
  for (bool prepared : {true, false}) {
    Case c;
    c.b = 1;
    c.sk = 600;
    c.sq = 2;
    c.mask = KAIO_ATTENTION_CAUSAL;
    c.prepared = prepared;
    check(c);
    c.page = 16;
    c.lens = {555};
    check(c);
  }
}

}  // namespace
