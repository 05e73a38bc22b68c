// The paged KV-cache write on the GPU: random rows into shuffled slots of a
// poisoned cache, checked byte for byte (a copy has no tolerance): every
// written row holds its token's row, every other byte the poison. Also
// padding slots, K-only caches, strided inputs, the prepared op, and a slot
// past the cache (skipped, reported at the next sync).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

constexpr uint8_t kPoison = 0xA5;

struct Case {
  kaio_dtype dtype = KAIO_DTYPE_BF16;
  int64_t tokens = 7, width = 8 * 128, pages = 9, page_size = 16;
  int64_t in_pad = 0, cache_pad = 0;  // extra row elements (multiples of 16 bytes)
  bool k_only = false, prepared = false;
  int pad_every = 0;                  // every n-th token gets slot -1
};

class GpuKvCache : public kt::GpuTest {
 protected:
  void run(const Case &c) {
    SCOPED_TRACE(std::string(kaio_dtype_name(c.dtype)) + " T " + std::to_string(c.tokens) +
                 " width " + std::to_string(c.width) + " page " + std::to_string(c.page_size));
    const size_t es = kaio_dtype_size(c.dtype);
    const int64_t rows = c.pages * c.page_size, in_ld = c.width + c.in_pad,
                  c_ld = c.width + c.cache_pad;
    const size_t in_bytes = c.tokens * in_ld * es, cache_bytes = rows * c_ld * es;
    std::mt19937_64 rng(kt::test_seed() ^ uint64_t(c.tokens * 131 + c.width));
    // distinct slots: a random permutation of the cache's rows, some padding
    std::vector<int32_t> all(rows);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<int32_t> slots(all.begin(), all.begin() + c.tokens);
    if (c.pad_every)
      for (int64_t t = 0; t < c.tokens; t += c.pad_every) slots[t] = -1;
    std::vector<uint8_t> k(in_bytes), v(in_bytes);
    for (auto &b : k) b = uint8_t(rng());
    for (auto &b : v) b = uint8_t(rng());

    kt::Buffer bk = kt::make_buffer(dev(), in_bytes), bv = kt::make_buffer(dev(), in_bytes),
               bs = kt::make_buffer(dev(), slots.size() * 4),
               bkc = kt::make_buffer(dev(), cache_bytes), bvc = kt::make_buffer(dev(), cache_bytes);
    KT_OK(kaio_buffer_write(bk.get(), 0, k.data(), in_bytes));
    KT_OK(kaio_buffer_write(bv.get(), 0, v.data(), in_bytes));
    KT_OK(kaio_buffer_write(bs.get(), 0, slots.data(), slots.size() * 4));
    KT_OK(kaio_buffer_memset(bkc.get(), stream(), 0, kPoison, cache_bytes));
    KT_OK(kaio_buffer_memset(bvc.get(), stream(), 0, kPoison, cache_bytes));

    auto view = [&](kaio_buffer *b, kaio_dtype dt, int64_t r, int64_t cols, int64_t ld) {
      kaio_tensor t = kaio_tensor_2d(b, dt, r, cols);
      t.row_stride = ld;
      return t;
    };
    kaio_tensor tk = view(bk.get(), c.dtype, c.tokens, c.width, in_ld),
                tv = view(bv.get(), c.dtype, c.tokens, c.width, in_ld),
                ts = view(bs.get(), KAIO_DTYPE_I32, 1, c.tokens, c.tokens),
                tkc = view(bkc.get(), c.dtype, rows, c.width, c_ld),
                tvc = view(bvc.get(), c.dtype, rows, c.width, c_ld);
    if (c.k_only) tv.buffer = tvc.buffer = nullptr;
    if (c.prepared) {
      kaio_op *raw = nullptr;
      KT_OK(kaio_op_create_kv_cache_write(&raw, dev(), c.dtype, c.tokens, c.width, rows));
      kt::Op op(raw);
      const kaio_tensor t[5] = {tk, tv, ts, tkc, tvc};
      KT_OK(kaio_op_launch(op.get(), stream(), t, 5));
    } else {
      KT_OK(kaio_kv_cache_write(stream(), &tk, &tv, &ts, &tkc, &tvc));
    }
    KT_OK(kaio_stream_synchronize(stream()));

    // the expected caches: poison, with each token's row at its slot
    std::vector<uint8_t> want_k(cache_bytes, kPoison), want_v(cache_bytes, kPoison);
    const size_t row_bytes = c.width * es;
    for (int64_t t = 0; t < c.tokens; ++t) {
      if (slots[t] < 0) continue;
      std::memcpy(&want_k[slots[t] * c_ld * es], &k[t * in_ld * es], row_bytes);
      std::memcpy(&want_v[slots[t] * c_ld * es], &v[t * in_ld * es], row_bytes);
    }
    std::vector<uint8_t> got(cache_bytes);
    KT_OK(kaio_buffer_read(bkc.get(), 0, got.data(), cache_bytes));
    EXPECT_TRUE(got == want_k) << "K cache differs";
    KT_OK(kaio_buffer_read(bvc.get(), 0, got.data(), cache_bytes));
    if (c.k_only)
      EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](uint8_t b) { return b == kPoison; }))
          << "a K-only write touched the V cache";
    else
      EXPECT_TRUE(got == want_v) << "V cache differs";
  }
};

TEST_F(GpuKvCache, EveryDtypeAndShape) {
  for (kaio_dtype dt : {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16}) {
    Case c;
    c.dtype = dt;
    run(c);
  }
  Case one;  // one token, one head of D 64, pages of 256
  one.tokens = 1;
  one.width = 64;
  one.page_size = 256;
  one.pages = 3;
  run(one);
  Case wide;  // a prefill chunk: 4097 tokens, Hkv 8 x D 256, pages of 16
  wide.tokens = 4097;
  wide.width = 8 * 256;
  wide.pages = 300;
  run(wide);
  Case odd;  // 8 bf16 (16 bytes) a row: one vector per token
  odd.width = 8;
  odd.tokens = 61;
  odd.pages = 5;
  run(odd);
}

TEST_F(GpuKvCache, StridedPaddedKOnlyAndPrepared) {
  Case c;
  c.in_pad = 3 * 8 * 128;  // K as the K columns of a fused QKV output
  c.cache_pad = 8;
  c.pad_every = 3;
  run(c);
  c.k_only = true;
  run(c);
  c.k_only = false;
  c.prepared = true;
  c.dtype = KAIO_DTYPE_F16;
  run(c);
}

// A slot past the cache: skipped (the cache keeps its poison there and every
// other token is written), then reported once, by the next sync.
TEST_F(GpuKvCache, SlotPastTheCacheIsSkippedAndReported) {
  const int64_t T = 4, W = 64, rows = 32;
  std::vector<int32_t> slots = {3, 32, 7, -1};  // 32 is one past the last row
  std::vector<uint16_t> k(T * W);
  for (size_t i = 0; i < k.size(); ++i) k[i] = uint16_t(i * 7 + 1);
  kt::Buffer bk = kt::make_buffer(dev(), k.size() * 2), bs = kt::make_buffer(dev(), 16),
             bc = kt::make_buffer(dev(), rows * W * 2 + 4096);
  KT_OK(kaio_buffer_write(bk.get(), 0, k.data(), k.size() * 2));
  KT_OK(kaio_buffer_write(bs.get(), 0, slots.data(), 16));
  KT_OK(kaio_buffer_memset(bc.get(), stream(), 0, kPoison, rows * W * 2 + 4096));
  kaio_tensor tk = kaio_tensor_2d(bk.get(), KAIO_DTYPE_BF16, T, W),
              ts = kaio_tensor_2d(bs.get(), KAIO_DTYPE_I32, 1, T),
              tc = kaio_tensor_2d(bc.get(), KAIO_DTYPE_BF16, rows, W);
  KT_OK(kaio_kv_cache_write(stream(), &tk, nullptr, &ts, &tc, nullptr));
  const kaio_status s = kaio_stream_synchronize(stream());
  EXPECT_EQ(s, KAIO_ERROR_OUT_OF_BOUNDS) << kaio_last_error();
  const std::string msg = kaio_last_error();
  EXPECT_NE(msg.find("kaio_stream_synchronize"), std::string::npos) << msg;
  EXPECT_NE(msg.find("slot_mapping[1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("= 32"), std::string::npos) << msg;
  KT_OK(kaio_stream_synchronize(stream()));  // reported once, then cleared
  std::vector<uint8_t> got(rows * W * 2 + 4096);
  KT_OK(kaio_buffer_read(bc.get(), 0, got.data(), got.size()));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r == 3 ? 0 : r == 7 ? 2 : -1;
    for (int64_t i = 0; i < W; ++i) {
      uint16_t h;
      std::memcpy(&h, &got[(r * W + i) * 2], 2);
      ASSERT_EQ(h, t < 0 ? uint16_t(0xA5A5) : k[t * W + i]) << "row " << r << " col " << i;
    }
  }
  for (size_t i = rows * W * 2; i < got.size(); ++i) ASSERT_EQ(got[i], kPoison) << "past the cache";
}

TEST_F(GpuKvCache, SanitizerSmall) {
  Case c;
  c.tokens = 5;
  c.width = 128;
  c.pages = 2;
  c.pad_every = 2;
  run(c);
}

}  // namespace
