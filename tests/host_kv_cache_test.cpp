// The paged KV-cache write on the fake driver: its launch (grid, strides,
// slot pointer, flag), and every rejected input with its status, a message
// naming the function and the argument, and no launch.
#include <cstring>
#include <vector>

#include "support/fake_device_test.hpp"

namespace {

// T 5 tokens of Hkv·D = 256 bf16 (512 bytes a row); a cache of 64 rows
// (4 pages of 16). In one 1 MiB buffer: K at 0, V 64 KiB, slots 128 KiB,
// K cache 256 KiB, V cache 512 KiB.
constexpr int64_t T = 5, W = 256, Rows = 64;

class FakeKvCache : public kt::FakeDeviceTest {
 protected:
  void SetUp() override {
    kt::FakeDeviceTest::SetUp();
    if (IsSkipped()) return;
    buf_ = kt::make_buffer(dev_.get(), 1 << 20);
  }
  kaio_tensor view(uint64_t offset, kaio_dtype dt, int64_t rows, int64_t cols) const {
    kaio_tensor t = kaio_tensor_2d(buf_.get(), dt, rows, cols);
    t.offset_bytes = offset;
    return t;
  }
  kaio_tensor k() const { return view(0, KAIO_DTYPE_BF16, T, W); }
  kaio_tensor v() const { return view(64 << 10, KAIO_DTYPE_BF16, T, W); }
  kaio_tensor slots() const { return view(128 << 10, KAIO_DTYPE_I32, 1, T); }
  kaio_tensor kc() const { return view(256 << 10, KAIO_DTYPE_BF16, Rows, W); }
  kaio_tensor vc() const { return view(512 << 10, KAIO_DTYPE_BF16, Rows, W); }

  // The one-shot call with one view replaced (index into {k, v, slots, kc, vc}).
  kaio_status write_with(int which, const kaio_tensor *t) {
    kaio_tensor a[5] = {k(), v(), slots(), kc(), vc()};
    const kaio_tensor *p[5] = {&a[0], &a[1], &a[2], &a[3], &a[4]};
    p[which] = t;
    return kaio_kv_cache_write(stream_.get(), p[0], p[1], p[2], p[3], p[4]);
  }
  void expect_rejected(int which, const kaio_tensor &t, kaio_status status,
                       std::vector<const char *> parts) {
    const unsigned long long before = kt::fake().launch_count();
    parts.insert(parts.begin(), "kaio_kv_cache_write");
    kt::expect_rejected(write_with(which, &t), status, parts, before);
  }
  kt::Buffer buf_;
};

TEST_F(FakeKvCache, LaunchCarriesStridesSlotsAndFlag) {
  kaio_tensor kk = k(), s = slots(), c = kc(), cv = vc(), vv = v();
  kk.row_stride = W + 64;  // K as a view of a wider projection output
  kk.rows = T;
  KT_OK(kaio_kv_cache_write(stream_.get(), &kk, &vv, &s, &c, &cv));
  kt::Launch l = kt::last_launch();
  EXPECT_EQ(l.name, "kaio_kv_cache_write_pdl");  // the fake is 9.0: the twin
  EXPECT_EQ(l.grid[0], unsigned(T));
  EXPECT_EQ(l.block[0], 128u);
  const uint64_t base = kaio_buffer_device_ptr(buf_.get());
  EXPECT_EQ(kt::launch_param<uint64_t>(0), base);
  EXPECT_EQ(kt::launch_param<uint64_t>(2), base + (128 << 10));
  EXPECT_EQ(kt::launch_param<uint32_t>(5), unsigned(W * 2 / 16));  // 16-byte chunks a row
  EXPECT_EQ(kt::launch_param<uint64_t>(6), uint64_t(W + 64) * 2);  // k pitch in bytes
  EXPECT_EQ(kt::launch_param<uint64_t>(8), uint64_t(W) * 2);
  EXPECT_EQ(kt::launch_param<uint32_t>(10), unsigned(Rows));
  EXPECT_EQ(kt::launch_param<uint32_t>(11), unsigned(T));
  EXPECT_NE(kt::launch_param<uint64_t>(12), 0u);  // the device's op flag
  KT_OK(kaio_stream_synchronize(stream_.get()));
}

TEST_F(FakeKvCache, KOnlyCachePassesNoV) {
  kaio_tensor kk = k(), s = slots(), c = kc();
  KT_OK(kaio_kv_cache_write(stream_.get(), &kk, nullptr, &s, &c, nullptr));
  EXPECT_EQ(kt::launch_param<uint64_t>(1), 0u);
  EXPECT_EQ(kt::launch_param<uint64_t>(4), 0u);
}

TEST_F(FakeKvCache, PreparedOpChecksItsShape) {
  kaio_op *raw = nullptr;
  KT_OK(kaio_op_create_kv_cache_write(&raw, dev_.get(), KAIO_DTYPE_BF16, T, W, Rows));
  kt::Op op(raw);
  kaio_tensor t[5] = {k(), v(), slots(), kc(), vc()};
  KT_OK(kaio_op_launch(op.get(), stream_.get(), t, 5));
  t[3].rows = Rows - 16;
  const unsigned long long before = kt::fake().launch_count();
  kt::expect_rejected(kaio_op_launch(op.get(), stream_.get(), t, 5), KAIO_ERROR_SHAPE_MISMATCH,
                      {"kaio_op_launch", "k_cache"}, before);
  kt::expect_rejected(kaio_op_launch(op.get(), stream_.get(), t, 4), KAIO_ERROR_INVALID_ARGUMENT,
                      {"kaio_op_launch", "{k, v, slot_mapping, k_cache, v_cache}"}, before);
}

TEST_F(FakeKvCache, CreateRejectsBadArguments) {
  struct Case {
    kaio_dtype dt;
    int64_t tokens, width, rows;
    kaio_status status;
    const char *part;
  } cases[] = {
      {KAIO_DTYPE_I8, T, W, Rows, KAIO_ERROR_INVALID_DTYPE, "'dtype'"},
      {KAIO_DTYPE_BF16, 0, W, Rows, KAIO_ERROR_INVALID_DIMENSION, "tokens"},
      {KAIO_DTYPE_BF16, T, -4, Rows, KAIO_ERROR_INVALID_DIMENSION, "width"},
      {KAIO_DTYPE_BF16, T, W, int64_t{1} << 31, KAIO_ERROR_INVALID_DIMENSION, "cache_rows"},
      {KAIO_DTYPE_BF16, T, 12, Rows, KAIO_ERROR_UNSUPPORTED, "16 bytes"},
  };
  for (const Case &c : cases) {
    kaio_op *op = nullptr;
    const unsigned long long before = kt::fake().launch_count();
    kt::expect_rejected(
        kaio_op_create_kv_cache_write(&op, dev_.get(), c.dt, c.tokens, c.width, c.rows), c.status,
        {"kaio_op_create_kv_cache_write", c.part}, before);
    EXPECT_EQ(op, nullptr);
  }
}

TEST_F(FakeKvCache, OneShotRejectsBadViews) {
  kaio_tensor t = slots();
  t.dtype = KAIO_DTYPE_U32;
  expect_rejected(2, t, KAIO_ERROR_INVALID_DTYPE, {"slot_mapping"});
  t = slots();
  t.cols = T + 1;
  expect_rejected(2, t, KAIO_ERROR_SHAPE_MISMATCH, {"slot_mapping"});
  t = v();
  t.dtype = KAIO_DTYPE_F16;
  expect_rejected(1, t, KAIO_ERROR_INVALID_DTYPE, {"'v'"});
  t = vc();
  t.cols = W - 8;
  expect_rejected(4, t, KAIO_ERROR_SHAPE_MISMATCH, {"v_cache"});
  t = kc();
  t.offset_bytes += 8;  // 8-byte aligned: not a 16-byte vector start
  expect_rejected(3, t, KAIO_ERROR_MISALIGNED, {"k_cache", "16"});
  t = k();
  t.row_stride = W + 4;  // 520-byte pitch
  expect_rejected(0, t, KAIO_ERROR_MISALIGNED, {"'k'", "row pitch"});
  t = vc();
  t.offset_bytes = 256 << 10;  // v_cache over k_cache
  expect_rejected(4, t, KAIO_ERROR_INVALID_ARGUMENT, {"k_cache", "v_cache"});
  t = kc();
  t.offset_bytes = 0;  // the cache over k itself
  expect_rejected(3, t, KAIO_ERROR_INVALID_ARGUMENT, {"k_cache", "'k'"});
  t = v();
  t.buffer = nullptr;  // v absent, v_cache present
  expect_rejected(1, t, KAIO_ERROR_INVALID_ARGUMENT, {"v_cache", "neither"});
  const unsigned long long before = kt::fake().launch_count();
  kaio_tensor kk = k(), vv = v(), c = kc(), cv = vc();
  kt::expect_rejected(kaio_kv_cache_write(stream_.get(), &kk, &vv, nullptr, &c, &cv),
                      KAIO_ERROR_INVALID_ARGUMENT, {"kaio_kv_cache_write", "slot_mapping"}, before);
}

}  // namespace
