// An offset + size that wraps past 2^64 is reported with the offset and size
// as given and the words "exceeds 2^64", never with the wrapped sum (which
// would look like a small, in-bounds number). Runs on the fake driver.
#include <cstdint>
#include <functional>
#include <string>

#include "support/fake_device_test.hpp"

namespace {

constexpr uint64_t kHuge = UINT64_MAX - 3;  // + 8 wraps to 4

class RangeOverflow : public kt::FakeDeviceTest {
 protected:
  void SetUp() override {
    FakeDeviceTest::SetUp();
    if (IsSkipped()) return;
    buf_ = kt::make_buffer(dev_.get(), 4096);
    other_ = kt::make_buffer(dev_.get(), 4096);
  }
  // `got` is OUT_OF_BOUNDS and the message holds every part.
  void expect_overflow(kaio_status got, const std::vector<const char *> &parts) {
    kt::expect_rejected(got, KAIO_ERROR_OUT_OF_BOUNDS, parts, kt::fake().launch_count());
    std::string msg = kaio_last_error();
    // Neither the wrapped end "4" as a range end nor "[X, 4)" may appear.
    EXPECT_EQ(msg.find(", 4)"), std::string::npos) << msg;
  }
  kt::Buffer buf_, other_;
};

TEST_F(RangeOverflow, BufferCallsNameOffsetAndSizeAsGiven) {
  char host[8] = {0};
  kaio_buffer *b = buf_.get();
  expect_overflow(kaio_buffer_write(b, kHuge, host, 8),
                  {"kaio_buffer_write", "'buffer'", "offset 18446744073709551612 + size 8",
                   "exceeds 2^64"});
  expect_overflow(kaio_buffer_read(b, kHuge, host, 8),
                  {"kaio_buffer_read", "'buffer'", "offset 18446744073709551612 + size 8",
                   "exceeds 2^64"});
  expect_overflow(kaio_buffer_write_async(b, stream_.get(), kHuge, host, 8),
                  {"kaio_buffer_write_async", "offset 18446744073709551612 + size 8", "2^64"});
  expect_overflow(kaio_buffer_read_async(b, stream_.get(), kHuge, host, 8),
                  {"kaio_buffer_read_async", "offset 18446744073709551612 + size 8", "2^64"});
  expect_overflow(kaio_buffer_memset(b, stream_.get(), kHuge, 0, 8),
                  {"kaio_buffer_memset", "'buffer'", "offset 18446744073709551612 + size 8",
                   "exceeds 2^64"});
  expect_overflow(kaio_buffer_copy(b, kHuge, other_.get(), 0, 8, stream_.get()),
                  {"kaio_buffer_copy", "'dst'", "offset 18446744073709551612 + size 8",
                   "exceeds 2^64"});
  expect_overflow(kaio_buffer_copy(b, 0, other_.get(), kHuge, 8, stream_.get()),
                  {"kaio_buffer_copy", "'src'", "offset 18446744073709551612 + size 8",
                   "exceeds 2^64"});
}

TEST_F(RangeOverflow, AnInBoundsSumStillShowsTheRealEnd) {
  char host[16] = {0};
  kt::expect_rejected(kaio_buffer_write(buf_.get(), 4090, host, 16), KAIO_ERROR_OUT_OF_BOUNDS,
                      {"kaio_buffer_write", "[4090, 4106)", "4096-byte"},
                      kt::fake().launch_count());
}

TEST_F(RangeOverflow, ViewWithAHugeOffsetBytes) {
  kaio_tensor x = kaio_tensor_2d(buf_.get(), KAIO_DTYPE_F32, 8, 16);  // 512 bytes
  x.offset_bytes = kHuge;  // a multiple of 4, so only the range is wrong
  kaio_tensor out = kaio_tensor_2d(other_.get(), KAIO_DTYPE_F32, 8, 16);
  expect_overflow(kaio_softmax(stream_.get(), &x, &out),
                  {"kaio_softmax", "'x'", "offset_bytes 18446744073709551612 + 512",
                   "exceeds 2^64"});
}

TEST_F(RangeOverflow, WrapWithAHugeSize) {
  kaio_buffer *w = nullptr;
  uint64_t ptr = kaio_buffer_device_ptr(buf_.get());
  expect_overflow(kaio_buffer_wrap(&w, dev_.get(), ptr, UINT64_MAX),
                  {"kaio_buffer_wrap", "'device_ptr' + 'size_bytes'", "exceed 2^64",
                   "wrap at most 4096 bytes"});
  EXPECT_EQ(w, nullptr);
}

}  // namespace
