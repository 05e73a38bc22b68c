// Handles are checked for real: a destroyed, doubly destroyed, stale, forged
// or wrong-type handle gives KAIO_ERROR_INVALID_HANDLE (or, for _destroy,
// nothing), never a read of freed memory, whatever the allocator reuses. One
// body runs on the fake driver and on the GPU; run it under valgrind or ASan
// to see that no freed memory is touched.
#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

// The call fails with KAIO_ERROR_INVALID_HANDLE and names the argument.
#define EXPECT_INVALID(call, arg)                                                        \
  do {                                                                                   \
    kaio_status s_ = (call);                                                             \
    EXPECT_EQ(s_, KAIO_ERROR_INVALID_HANDLE) << #call << ": " << kaio_last_error();      \
    EXPECT_NE(std::string(kaio_last_error()).find("'" arg "'"), std::string::npos)       \
        << kaio_last_error();                                                            \
  } while (0)

const char *kPtx =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry noop(.param .u64 p)\n{ ret; }\n";
const char *kLang =
    "kernel plus_one(x: tensor<f32>, out: tensor<f32>) {\n"
    "    out = x + 1.0;\n"
    "}\n";

// Every kind of handle, destroyed twice, then used: each use fails cleanly.
void destroyed_handles_are_refused(kaio_device *d, kaio_stream *s) {
  kaio_buffer *b = nullptr;
  KT_OK(kaio_buffer_create(&b, d, 256));
  kaio_stream *st = nullptr;
  KT_OK(kaio_stream_create(&st, d, 0));
  kaio_event *e = nullptr;
  KT_OK(kaio_event_create(&e, d, 0));
  kaio_module *m = nullptr;
  KT_OK(kaio_module_load_ptx(&m, d, kPtx));
  kaio_kernel *k = nullptr;
  KT_OK(kaio_module_get_kernel(&k, m, "noop"));
  kaio_op *op = nullptr;
  KT_OK(kaio_op_create_softmax(&op, d, KAIO_DTYPE_F32, 4, 64));
  kaio_lang_kernel *lk = nullptr;
  KT_OK(kaio_lang_kernel_create(&lk, d, kLang));

  for (int twice = 0; twice < 2; ++twice) {
    kaio_buffer_destroy(b);
    kaio_stream_destroy(st);
    kaio_event_destroy(e);
    kaio_kernel_destroy(k);
    kaio_module_destroy(m);
    kaio_op_destroy(op);
    kaio_lang_kernel_destroy(lk);
  }

  uint32_t word = 7;
  EXPECT_INVALID(kaio_buffer_write(b, 0, &word, 4), "buffer");
  EXPECT_INVALID(kaio_buffer_read(b, 0, &word, 4), "buffer");
  EXPECT_EQ(kaio_buffer_size(b), 0u);
  EXPECT_EQ(kaio_buffer_device_ptr(b), 0u);
  EXPECT_EQ(kaio_buffer_device(b), nullptr);
  EXPECT_INVALID(kaio_stream_synchronize(st), "stream");
  EXPECT_EQ(kaio_stream_native(st), nullptr);
  EXPECT_INVALID(kaio_event_record(e, s), "event");
  EXPECT_INVALID(kaio_event_synchronize(e), "event");
  kaio_kernel *k2 = nullptr;
  EXPECT_INVALID(kaio_module_get_kernel(&k2, m, "noop"), "module");
  kaio_launch_config cfg{};
  cfg.grid[0] = cfg.block[0] = 1;
  uint64_t arg = 0;
  EXPECT_INVALID(kaio_kernel_launch(k, s, &cfg, &arg, sizeof arg), "kernel");
  kaio_tensor t[2] = {};
  EXPECT_INVALID(kaio_op_launch(op, s, t, 2), "op");
  EXPECT_INVALID(kaio_lang_kernel_check(lk), "kernel");

  // a view of a destroyed buffer
  kt::Buffer live = kt::make_buffer(d, 4 * 64 * 4);
  kaio_tensor x = kaio_tensor_2d(b, KAIO_DTYPE_F32, 4, 64);
  kaio_tensor out = kaio_tensor_2d(live.get(), KAIO_DTYPE_F32, 4, 64);
  kaio_status status = kaio_softmax(s, &x, &out);
  EXPECT_EQ(status, KAIO_ERROR_INVALID_HANDLE);
  EXPECT_NE(std::string(kaio_last_error()).find("'x'"), std::string::npos) << kaio_last_error();
}

// A new object never gets a destroyed object's handle, so a stale handle
// cannot reach it, even where the allocator hands out the same memory.
void stale_handles_never_alias_new_objects(kaio_device *d) {
  std::set<kaio_buffer *> dead;
  for (int i = 0; i < 500; ++i) {
    kaio_buffer *b = nullptr;
    KT_OK(kaio_buffer_create(&b, d, 64));
    ASSERT_EQ(dead.count(b), 0u) << "handle " << b << " was issued twice";
    kaio_buffer_destroy(b);
    dead.insert(b);
  }
  kaio_buffer *fresh = nullptr;
  KT_OK(kaio_buffer_create(&fresh, d, 64));
  kt::Buffer guard(fresh);
  std::vector<uint8_t> ones(64, 1), back(64, 0);
  KT_OK(kaio_buffer_write(fresh, 0, ones.data(), 64));
  const std::vector<uint8_t> zeros(64, 0);
  for (kaio_buffer *stale : dead)
    EXPECT_EQ(kaio_buffer_write(stale, 0, zeros.data(), 64), KAIO_ERROR_INVALID_HANDLE);
  KT_OK(kaio_buffer_read(fresh, 0, back.data(), 64));
  EXPECT_EQ(back, ones) << "a stale handle wrote into a new buffer";
}

// Handles of one type passed as another, and memory made to look like an
// object (the old tag check's weakness), are refused without being read as
// objects.
void forged_and_wrong_type_handles_are_refused(kaio_device *d, kaio_stream *s) {
  kt::Buffer b = kt::make_buffer(d, 64);
  EXPECT_INVALID(kaio_stream_synchronize(reinterpret_cast<kaio_stream *>(b.get())), "stream");
  EXPECT_INVALID(kaio_event_synchronize(reinterpret_cast<kaio_event *>(s)), "event");
  kaio_buffer *out = nullptr;
  EXPECT_INVALID(kaio_buffer_create(&out, reinterpret_cast<kaio_device *>(s), 64), "device");
  // the first bytes of a kaio_buffer object as they used to be: its tag
  alignas(16) unsigned char forged[256] = {};
  const uint32_t buffer_tag = 0x4B425546u;
  std::memcpy(forged, &buffer_tag, sizeof buffer_tag);
  uint32_t word = 0;
  EXPECT_INVALID(kaio_buffer_read(reinterpret_cast<kaio_buffer *>(forged), 0, &word, 4), "buffer");
  EXPECT_EQ(kaio_buffer_size(reinterpret_cast<kaio_buffer *>(forged)), 0u);
  // a handle one byte or one slot off a live one
  auto *bytes = reinterpret_cast<unsigned char *>(b.get());
  EXPECT_EQ(kaio_buffer_size(reinterpret_cast<kaio_buffer *>(bytes + 1)), 0u);
  EXPECT_EQ(kaio_buffer_size(reinterpret_cast<kaio_buffer *>(bytes + 16)), 0u);
  EXPECT_EQ(kaio_buffer_size(b.get()), 64u);
}

// Device handles: one per open; a second destroy of the same handle, or a
// destroy of the borrowed handle getters return, cannot take a reference
// that children hold. `sole` says nobody else has the ordinal open.
void device_references_are_the_callers_own(int ordinal, bool sole) {
  kaio_device *d = nullptr;
  KT_OK(kaio_device_open(&d, ordinal));
  kaio_buffer *b = nullptr;
  KT_OK(kaio_buffer_create(&b, d, 64));
  kaio_device *borrowed = kaio_buffer_device(b);
  ASSERT_NE(borrowed, nullptr);
  EXPECT_NE(borrowed, d);
  kaio_device_destroy(borrowed);  // not the caller's to destroy: ignored
  kaio_device_destroy(d);
  kaio_device_destroy(d);  // the second is a no-op, not the buffer's reference
  kaio_device_info info{};
  info.struct_size = sizeof info;
  EXPECT_INVALID(kaio_device_get_info(d, &info), "device");
  // the buffer still holds the device, reachable through its borrowed handle
  KT_OK(kaio_device_get_info(borrowed, &info));
  EXPECT_EQ(info.ordinal, ordinal);
  uint32_t word = 0x12345678u, back = 0;
  KT_OK(kaio_buffer_write(b, 0, &word, 4));
  KT_OK(kaio_buffer_read(b, 0, &back, 4));
  EXPECT_EQ(back, word);
  kaio_buffer_destroy(b);
  // the device went with its last reference, and its borrowed handle with it
  if (sole) EXPECT_INVALID(kaio_device_get_info(borrowed, &info), "device");
}

// Threads creating, using and destroying handles while others hammer stale
// ones: every stale use is refused, every live one works.
void concurrent_handles_stay_consistent(kaio_device *d) {
  std::vector<kaio_buffer *> stale;
  for (int i = 0; i < 16; ++i) {
    kaio_buffer *b = nullptr;
    KT_OK(kaio_buffer_create(&b, d, 16));
    kaio_buffer_destroy(b);
    stale.push_back(b);
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (t % 2 == 0) {
          kaio_buffer *b = nullptr;
          if (kaio_buffer_create(&b, d, 16) != KAIO_OK || kaio_buffer_size(b) != 16) ++wrong;
          kaio_buffer_destroy(b);
        } else {
          for (kaio_buffer *b : stale)
            if (kaio_buffer_size(b) != 0) ++wrong;
        }
      }
    });
  for (std::thread &th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

void check_handles(kaio_device *d, kaio_stream *s, int ordinal, bool sole) {
  destroyed_handles_are_refused(d, s);
  stale_handles_never_alias_new_objects(d);
  forged_and_wrong_type_handles_are_refused(d, s);
  device_references_are_the_callers_own(ordinal, sole);
  concurrent_handles_stay_consistent(d);
}

class FakeHandles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kt::on_fake_driver()) GTEST_SKIP() << "needs the fake driver (meson test, suite host)";
  }
};

TEST_F(FakeHandles, DestroyedStaleForgedAndWrongTypeHandlesAreRefused) {
  const unsigned long long before = kt::fake().live_allocations();
  {
    kt::Device d = kt::open_device(0);
    kt::Stream s = kt::make_stream(d.get());
    check_handles(d.get(), s.get(), 1, true);  // the fake driver's device 1 is not open
  }
  EXPECT_EQ(kt::fake().live_allocations(), before) << "device memory leaked";
}

class GpuHandles : public kt::GpuTest {};

TEST_F(GpuHandles, DestroyedStaleForgedAndWrongTypeHandlesAreRefused) {
  kaio_device_info info{};
  info.struct_size = sizeof info;
  KT_OK(kaio_device_get_info(dev(), &info));
  check_handles(dev(), stream(), info.ordinal, false);
}

}  // namespace
