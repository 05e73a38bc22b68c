// The kernel-language bounds flag on the fake driver: reported by the next
// stream or event synchronisation and by kaio_lang_kernel_check, once, with
// the kernel, tensor, index and value; also after the kernel is destroyed;
// per stream handle; several flagged kernels in launch order. The fake runs
// no kernel, so the tests raise the flag by hand (pinned memory is host
// memory there); the GPU side is in gpu_lang_test.cpp.
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "lang/lower.hpp"
#include "support/kaio_test.hpp"

namespace {

using kaio::lang::kFlagCol;
using kaio::lang::kFlagFlat;
using kaio::lang::kSiteBase;

// What the kernel's red.max leaves for a failing read at `site`.
uint64_t flag_value(unsigned site, unsigned which, uint32_t index) {
  return (uint64_t{kSiteBase - site} << 34) | (uint64_t{which} << 32) | index;
}

constexpr const char *kTwoReads =
    "kernel g(x: tensor<f32>, w: tensor<f32>, out: tensor<f32>) {\n"
    "    out = x[i + 1] * w[0, col];\n"
    "}\n";

class FakeLangFlag : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kt::on_fake_driver()) GTEST_SKIP() << "raises flags by hand: needs the fake driver";
    dev = kt::open_device(0);
    buf = kt::make_buffer(dev.get(), 1 << 16);
    stream = kt::make_stream(dev.get());
  }
  void TearDown() override {
    for (kaio_lang_kernel *k : kernels) kaio_lang_kernel_destroy(k);
  }
  kaio_lang_kernel *create(const char *src) {
    kaio_lang_kernel *k = nullptr;
    EXPECT_EQ(kaio_lang_kernel_create(&k, dev.get(), src), KAIO_OK) << kaio_last_error();
    if (k) kernels.push_back(k);
    return k;
  }
  // Launches kTwoReads-shaped kernel k on s and returns its flag word.
  uint64_t *launch(kaio_lang_kernel *k, kaio_stream *s) {
    kaio_tensor t[3] = {kaio_tensor_2d(buf.get(), KAIO_DTYPE_F32, 4, 16),
                        kaio_tensor_2d(buf.get(), KAIO_DTYPE_F32, 1, 16),
                        kaio_tensor_2d(buf.get(), KAIO_DTYPE_F32, 4, 16)};
    t[1].offset_bytes = 4096;
    t[2].offset_bytes = 8192;
    EXPECT_EQ(kaio_lang_kernel_launch(k, s, t, 3, nullptr, 0), KAIO_OK) << kaio_last_error();
    uint64_t address = 0;  // the last parameter, after 3 tensors x 4
    EXPECT_EQ(kt::fake().last_launch_param(12, &address, sizeof address), 0);
    return reinterpret_cast<uint64_t *>(static_cast<uintptr_t>(address));
  }
  void forget(kaio_lang_kernel *k) {
    std::erase(kernels, k);
    kaio_lang_kernel_destroy(k);
  }
  kt::Device dev;
  kt::Stream stream;
  kt::Buffer buf;
  std::vector<kaio_lang_kernel *> kernels;
};

TEST_F(FakeLangFlag, StreamSyncReportsTheReadTheIndexAndItsValueOnce) {
  kaio_lang_kernel *k = create(kTwoReads);
  ASSERT_TRUE(k);
  uint64_t *flag = launch(k, stream.get());
  ASSERT_TRUE(flag);
  EXPECT_EQ(*flag, 0u);
  KT_OK(kaio_stream_synchronize(stream.get()));
  flag = launch(k, stream.get());
  *flag = flag_value(1, kFlagCol, 17);  // w[0, col] with col 17
  EXPECT_EQ(kaio_stream_synchronize(stream.get()), KAIO_ERROR_KERNEL_BOUNDS);
  EXPECT_EQ(std::string(kaio_last_error()),
            "kaio_stream_synchronize: kernel 'g' read outside a view: 2:22: column index 17 out "
            "of range for tensor 'w'; the read was skipped and gave 0\n"
            "        out = x[i + 1] * w[0, col];\n"
            "                         ^\n"
            "Fix the index or pass a larger view.");
  EXPECT_EQ(*flag, 0u);                            // cleared
  KT_OK(kaio_stream_synchronize(stream.get()));  // reported once
  KT_OK(kaio_lang_kernel_check(k));
}

TEST_F(FakeLangFlag, CheckReportsAFlatIndexAndANegativeValue) {
  kaio_lang_kernel *k = create(kTwoReads);
  ASSERT_TRUE(k);
  uint64_t *flag = launch(k, stream.get());
  *flag = flag_value(0, kFlagFlat, 0xFFFFFFFFu);  // x[i + 1] with i + 1 == -1
  EXPECT_EQ(kaio_lang_kernel_check(k), KAIO_ERROR_KERNEL_BOUNDS);
  const std::string msg = kaio_last_error();
  EXPECT_EQ(msg.rfind("kaio_lang_kernel_check: kernel 'g' read outside a view: 2:11: index -1 "
                      "(4294967295 as u32) out of range for tensor 'x'",
                      0),
            0u)
      << msg;
  EXPECT_EQ(*flag, 0u);
  KT_OK(kaio_stream_synchronize(stream.get()));  // the check took it
  flag = launch(k, stream.get());
  *flag = uint64_t{0x12345} << 34;  // not a value the kernel writes
  EXPECT_EQ(kaio_lang_kernel_check(k), KAIO_ERROR_INTERNAL);
}

TEST_F(FakeLangFlag, OnlyTheLaunchingStreamReportsAndEventsToo) {
  kaio_lang_kernel *k = create(kTwoReads);
  ASSERT_TRUE(k);
  kt::Stream other = kt::make_stream(dev.get());
  uint64_t *flag = launch(k, stream.get());
  *flag = flag_value(1, kFlagCol, 16);
  KT_OK(kaio_stream_synchronize(other.get()));  // nothing launched there
  EXPECT_EQ(*flag, flag_value(1, kFlagCol, 16));
  kaio_event *event = nullptr;
  KT_OK(kaio_event_create(&event, dev.get(), KAIO_EVENT_DISABLE_TIMING));
  KT_OK(kaio_event_record(event, stream.get()));
  EXPECT_EQ(kaio_event_synchronize(event), KAIO_ERROR_KERNEL_BOUNDS);
  EXPECT_EQ(std::string(kaio_last_error()).rfind("kaio_event_synchronize: kernel 'g'", 0), 0u)
      << kaio_last_error();
  KT_OK(kaio_event_synchronize(event));
  KT_OK(kaio_stream_synchronize(stream.get()));
  kaio_event_destroy(event);
}

TEST_F(FakeLangFlag, AKernelDestroyedBeforeTheSyncIsStillReportedThenFreed) {
  const unsigned long long before = kt::fake().live_allocations();
  kaio_lang_kernel *k = create(kTwoReads);
  ASSERT_TRUE(k);
  uint64_t *flag = launch(k, stream.get());
  *flag = flag_value(1, kFlagCol, 99);
  forget(k);
  EXPECT_EQ(kt::fake().live_allocations(), before + 1);  // the stream holds the flag
  EXPECT_EQ(kaio_stream_synchronize(stream.get()), KAIO_ERROR_KERNEL_BOUNDS);
  EXPECT_NE(std::string(kaio_last_error()).find("kernel 'g' read outside a view: 2:22: column "
                                                "index 99 out of range for tensor 'w'"),
            std::string::npos)
      << kaio_last_error();
  EXPECT_EQ(kt::fake().live_allocations(), before);  // the last holder freed it
  // a clean kernel is forgotten by the sync: destroying it frees at once
  k = create(kTwoReads);
  launch(k, stream.get());
  KT_OK(kaio_stream_synchronize(stream.get()));
  forget(k);
  EXPECT_EQ(kt::fake().live_allocations(), before);
  // and a stream destroyed with a noted flag lets go of it
  k = create(kTwoReads);
  kt::Stream temp = kt::make_stream(dev.get());
  launch(k, temp.get());
  forget(k);
  temp.reset();
  EXPECT_EQ(kt::fake().live_allocations(), before);
}

TEST_F(FakeLangFlag, SeveralFlaggedKernelsAreReportedOneASyncInLaunchOrder) {
  kaio_lang_kernel *a = create(kTwoReads);
  kaio_lang_kernel *b = create(
      "kernel h(x: tensor<f32>, w: tensor<f32>, out: tensor<f32>) {\n"
      "    out = x + w[row, 3];\n"
      "}\n");
  ASSERT_TRUE(a && b);
  uint64_t *fb = launch(b, stream.get());
  uint64_t *fa = launch(a, stream.get());
  for (int n = 0; n < 100; ++n) launch(b, stream.get());  // one entry, whatever the count
  *fa = flag_value(0, kFlagFlat, 64);
  *fb = flag_value(1, kaio::lang::kFlagRow, 1);
  EXPECT_EQ(kaio_stream_synchronize(stream.get()), KAIO_ERROR_KERNEL_BOUNDS);
  EXPECT_NE(std::string(kaio_last_error()).find("kernel 'h' read outside a view: 2:15: row index 1 "
                                                "out of range for tensor 'w'"),
            std::string::npos)
      << kaio_last_error();
  EXPECT_EQ(kaio_stream_synchronize(stream.get()), KAIO_ERROR_KERNEL_BOUNDS);
  EXPECT_NE(std::string(kaio_last_error()).find("kernel 'g' read outside a view: 2:11: index 64 "),
            std::string::npos)
      << kaio_last_error();
  KT_OK(kaio_stream_synchronize(stream.get()));
}

// Launches from several threads while another synchronises: the registry
// is shared state. A flag raised once all launches are done is reported by
// exactly one of the syncs that follow.
TEST_F(FakeLangFlag, ConcurrentLaunchesAndSyncsReportAFlagOnce) {
  kaio_lang_kernel *k = create(kTwoReads);
  ASSERT_TRUE(k);
  kaio_tensor t[3] = {kaio_tensor_2d(buf.get(), KAIO_DTYPE_F32, 4, 16),
                      kaio_tensor_2d(buf.get(), KAIO_DTYPE_F32, 1, 16),
                      kaio_tensor_2d(buf.get(), KAIO_DTYPE_F32, 4, 16)};
  t[1].offset_bytes = 4096;
  t[2].offset_bytes = 8192;
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::thread syncer([&] {
    while (!done.load())
      if (kaio_stream_synchronize(stream.get()) != KAIO_OK) ++failures;
  });
  std::vector<std::thread> launchers;
  for (int n = 0; n < 4; ++n)
    launchers.emplace_back([&] {
      for (int j = 0; j < 500; ++j)
        if (kaio_lang_kernel_launch(k, stream.get(), t, 3, nullptr, 0) != KAIO_OK) ++failures;
    });
  for (std::thread &l : launchers) l.join();
  done = true;
  syncer.join();
  EXPECT_EQ(failures.load(), 0);
  uint64_t *flag = launch(k, stream.get());
  *flag = flag_value(0, kFlagFlat, 64);
  int reported = 0;
  for (int n = 0; n < 3; ++n) reported += kaio_stream_synchronize(stream.get()) == KAIO_ERROR_KERNEL_BOUNDS;
  EXPECT_EQ(reported, 1);
}

}  // namespace
