// RoPE fused with the paged KV-cache write, against the two ops it fuses
// (kaio_rope, checked against f64 in gpu_rope_test.cpp, and the cache
// write): Q must come out bit for bit as kaio_rope leaves it, each stored
// slot of the K cache must hold kaio_rope's rotated K row (dims past
// rotary_dim copied), each of the V cache V's row, K itself untouched, and
// every other cache byte the poison. Both styles, every dtype, partial
// rotary, padding slots, a K-only cache, the element kernel, a slot past
// the cache (reported by the next sync).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

constexpr uint8_t kPoison = 0xC3;

struct Case {
  kaio_rope_style style = KAIO_ROPE_HALF_SPLIT;
  kaio_dtype dt = KAIO_DTYPE_BF16;
  int64_t tokens = 29, hq = 8, hk = 2, d = 128, rot = 0, rows = 64;
  int64_t pad = 0;      // extra elements per Q / K row (pad 3: the element kernel)
  bool q = true, v = true, prepared = false;
  int pad_every = 0;    // every n-th token gets slot -1
};

std::vector<uint8_t> random_bytes(size_t n, std::mt19937_64 &rng, kaio_dtype dt) {
  // finite values: random bytes could make NaNs, whose bits the ops may not keep
  kt::HostTensor h = kt::random_tensor(dt, n / kaio_dtype_size(dt), -2, 2, rng());
  return h.bytes;
}

class GpuRopeKvCache : public kt::GpuTest {
 protected:
  kt::Buffer upload(const std::vector<uint8_t> &bytes) {
    kt::Buffer b = kt::make_buffer(dev(), bytes.size());
    EXPECT_EQ(kaio_buffer_write(b.get(), 0, bytes.data(), bytes.size()), KAIO_OK);
    return b;
  }
  std::vector<uint8_t> download(const kt::Buffer &b, size_t n) {
    std::vector<uint8_t> out(n);
    EXPECT_EQ(kaio_buffer_read(b.get(), 0, out.data(), n), KAIO_OK);
    return out;
  }

  void run(const Case &c) {
    SCOPED_TRACE(std::string(kaio_dtype_name(c.dt)) +
                 (c.style == KAIO_ROPE_HALF_SPLIT ? " half_split" : " interleaved") + " D" +
                 std::to_string(c.d) + " rot" + std::to_string(c.rot) + " pad" +
                 std::to_string(c.pad) + (c.prepared ? " prepared" : " one-shot"));
    const size_t es = kaio_dtype_size(c.dt);
    const int64_t qw = c.hq * c.d, kw = c.hk * c.d, qld = qw + c.pad, kld = kw + c.pad;
    std::mt19937_64 rng(kt::test_seed() ^ uint64_t(c.d * 7 + c.pad + c.style));
    std::vector<uint8_t> q = random_bytes(c.tokens * qld * es, rng, c.dt),
                         k = random_bytes(c.tokens * kld * es, rng, c.dt),
                         v = random_bytes(c.tokens * kw * es, rng, c.dt);
    std::vector<int32_t> pos(c.tokens), slots(c.rows);
    for (auto &p : pos) p = int32_t(rng() % 200000);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(c.tokens);
    if (c.pad_every)
      for (int64_t t = 0; t < c.tokens; t += c.pad_every) slots[t] = -1;
    auto bytes_of = [](const std::vector<int32_t> &x) {
      std::vector<uint8_t> b(x.size() * 4);
      std::memcpy(b.data(), x.data(), b.size());
      return b;
    };
    kaio_rope_desc d;
    ASSERT_EQ(kaio_rope_desc_init(&d, sizeof d), KAIO_OK);
    d.style = c.style;
    d.dtype = c.dt;
    d.heads_q = c.q ? c.hq : 0;
    d.heads_k = c.hk;
    d.head_dim = c.d;
    d.rotary_dim = c.rot;
    d.theta = 500000;

    // the reference: kaio_rope on copies of Q and K
    kt::Buffer rq = upload(q), rk = upload(k), bp = upload(bytes_of(pos));
    auto view = [](kaio_buffer *b, kaio_dtype dt, int64_t r, int64_t cols, int64_t ld) {
      kaio_tensor t = kaio_tensor_2d(b, dt, r, cols);
      t.row_stride = ld;
      return t;
    };
    kaio_tensor tq = view(rq.get(), c.dt, c.tokens, qw, qld), tk = view(rk.get(), c.dt, c.tokens, kw, kld),
                tp = view(bp.get(), KAIO_DTYPE_I32, 1, c.tokens, c.tokens);
    KT_OK(kaio_rope(stream(), c.q ? &tq : nullptr, &tk, &tp, &d));

    // the fused op
    const size_t cache_bytes = c.rows * kw * es;
    kt::Buffer fq = upload(q), fk = upload(k), fv = upload(v), bs = upload(bytes_of(slots)),
               kc = kt::make_buffer(dev(), cache_bytes), vc = kt::make_buffer(dev(), cache_bytes);
    KT_OK(kaio_buffer_memset(kc.get(), stream(), 0, kPoison, cache_bytes));
    KT_OK(kaio_buffer_memset(vc.get(), stream(), 0, kPoison, cache_bytes));
    kaio_tensor t[7] = {view(fq.get(), c.dt, c.tokens, qw, qld), view(fk.get(), c.dt, c.tokens, kw, kld),
                        view(fv.get(), c.dt, c.tokens, kw, kw), tp,
                        view(bs.get(), KAIO_DTYPE_I32, 1, c.tokens, c.tokens),
                        view(kc.get(), c.dt, c.rows, kw, kw), view(vc.get(), c.dt, c.rows, kw, kw)};
    if (!c.q) t[0].buffer = nullptr;
    if (!c.v) t[2].buffer = t[6].buffer = nullptr;
    if (c.prepared) {
      kaio_op *raw = nullptr;
      KT_OK(kaio_op_create_rope_kv_cache_write(&raw, dev(), &d));
      kt::Op op(raw);
      KT_OK(kaio_op_launch(op.get(), stream(), t, 7));
    } else {
      KT_OK(kaio_rope_kv_cache_write(stream(), c.q ? &t[0] : nullptr, &t[1], c.v ? &t[2] : nullptr,
                                     &t[3], &t[4], &t[5], c.v ? &t[6] : nullptr, &d));
    }
    KT_OK(kaio_stream_synchronize(stream()));

    if (c.q) {
      EXPECT_TRUE(download(fq, q.size()) == download(rq, q.size())) << "Q differs from kaio_rope's";
    }
    EXPECT_TRUE(download(fk, k.size()) == k) << "K itself was written";
    const std::vector<uint8_t> rot_k = download(rk, k.size());
    std::vector<uint8_t> want_k(cache_bytes, kPoison), want_v(cache_bytes, kPoison);
    for (int64_t i = 0; i < c.tokens; ++i) {
      if (slots[i] < 0) continue;
      std::memcpy(&want_k[slots[i] * kw * es], &rot_k[i * kld * es], kw * es);
      std::memcpy(&want_v[slots[i] * kw * es], &v[i * kw * es], kw * es);
    }
    EXPECT_TRUE(download(kc, cache_bytes) == want_k) << "K cache differs from kaio_rope's K at the slots";
    if (c.v) {
      EXPECT_TRUE(download(vc, cache_bytes) == want_v) << "V cache differs";
    } else {
      EXPECT_TRUE(download(vc, cache_bytes) == std::vector<uint8_t>(cache_bytes, kPoison))
          << "a K-only call wrote the V cache";
    }
  }
};

TEST_F(GpuRopeKvCache, MatchesRopeThenCacheWrite) {
  for (kaio_rope_style s : {KAIO_ROPE_HALF_SPLIT, KAIO_ROPE_INTERLEAVED})
    for (kaio_dtype dt : {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16}) {
      Case c;
      c.style = s;
      c.dt = dt;
      c.pad_every = 5;
      run(c);
    }
  Case partial;  // rotary 64 of 128: the tails go to the cache as they are
  partial.rot = 64;
  run(partial);
  Case element;  // a padded Q / K row: the element kernel
  element.pad = 3;
  element.d = 80;
  element.rot = 40;
  element.dt = KAIO_DTYPE_F16;
  run(element);
  Case konly;  // no Q, no V; prepared
  konly.q = false;
  konly.v = false;
  konly.prepared = true;
  run(konly);
  Case decode;  // one token, many heads: heads split across blocks
  decode.tokens = 1;
  decode.hq = 32;
  decode.hk = 8;
  run(decode);
}

TEST_F(GpuRopeKvCache, SlotPastTheCacheIsSkippedAndReported) {
  kaio_rope_desc d;
  ASSERT_EQ(kaio_rope_desc_init(&d, sizeof d), KAIO_OK);
  d.dtype = KAIO_DTYPE_F32;
  d.heads_q = 0;
  d.heads_k = 1;
  d.head_dim = 64;
  const std::vector<int32_t> pos = {5, 6}, slots = {0, 16};  // 16 is one past a 16-row cache
  kt::Buffer k = kt::make_buffer(dev(), 2 * 64 * 4), p = kt::make_buffer(dev(), 8),
             s = kt::make_buffer(dev(), 8), c = kt::make_buffer(dev(), 16 * 64 * 4);
  KT_OK(kaio_buffer_memset(k.get(), stream(), 0, 0, 2 * 64 * 4));
  KT_OK(kaio_buffer_write(p.get(), 0, pos.data(), 8));
  KT_OK(kaio_buffer_write(s.get(), 0, slots.data(), 8));
  kaio_tensor tk = kaio_tensor_2d(k.get(), KAIO_DTYPE_F32, 2, 64),
              tp = kaio_tensor_2d(p.get(), KAIO_DTYPE_I32, 1, 2),
              ts = kaio_tensor_2d(s.get(), KAIO_DTYPE_I32, 1, 2),
              tc = kaio_tensor_2d(c.get(), KAIO_DTYPE_F32, 16, 64);
  KT_OK(kaio_rope_kv_cache_write(stream(), nullptr, &tk, nullptr, &tp, &ts, &tc, nullptr, &d));
  EXPECT_EQ(kaio_stream_synchronize(stream()), KAIO_ERROR_OUT_OF_BOUNDS) << kaio_last_error();
  const std::string msg = kaio_last_error();
  EXPECT_NE(msg.find("slot_mapping[1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("= 16"), std::string::npos) << msg;
  KT_OK(kaio_stream_synchronize(stream()));
}

TEST_F(GpuRopeKvCache, SanitizerSmall) {
  Case c;
  c.tokens = 3;
  c.hq = 2;
  c.hk = 1;
  c.d = 64;
  c.rows = 16;
  c.pad_every = 2;
  run(c);
  c.pad = 3;
  c.rot = 32;
  run(c);
}

}  // namespace
