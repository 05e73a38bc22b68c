// Errors raised inside the runtime layer (src/runtime/), which takes no
// caller parameter, start with the API function the user called: the
// firewall's call context (api_name()) supplies it.
#include <string>

#include "support/fake_device_test.hpp"

namespace {

using RuntimeErrorNames = kt::FakeDeviceTest;

std::string last_error() { return kaio_last_error(); }

TEST_F(RuntimeErrorNames, AllocationFailureNamesBufferCreate) {
  kaio_buffer *b = nullptr;
  EXPECT_EQ(kaio_buffer_create(&b, dev_.get(), uint64_t{1} << 40), KAIO_ERROR_OUT_OF_DEVICE_MEMORY);
  EXPECT_EQ(last_error().rfind("kaio_buffer_create: cannot allocate 1099511627776 bytes", 0), 0u)
      << last_error();
}

TEST_F(RuntimeErrorNames, ForeignMemoryCheckNamesBufferWrap) {
  kaio_buffer *b = nullptr;
  EXPECT_EQ(kaio_buffer_wrap(&b, dev_.get(), 0x1230, 16), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error().rfind("kaio_buffer_wrap: argument 'device_ptr' (0x1230) is not device "
                               "memory the driver knows",
                               0),
            0u)
      << last_error();
}

TEST_F(RuntimeErrorNames, AFailedDriverCallNamesStreamWrap) {
  kaio_stream *s = nullptr;
  int not_a_stream = 0;
  EXPECT_EQ(kaio_stream_wrap(&s, dev_.get(), &not_a_stream), KAIO_ERROR_DRIVER);
  EXPECT_EQ(last_error().rfind("kaio_stream_wrap: cuStreamGetCtx on argument 'cu_stream' failed: "
                               "CUDA_ERROR_INVALID_HANDLE",
                               0),
            0u)
      << last_error();
  EXPECT_EQ(s, nullptr);
}

}  // namespace
