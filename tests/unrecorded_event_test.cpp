// An event that was never recorded: timing it is refused before the driver
// (which would answer a bare CUDA_ERROR_INVALID_HANDLE) with the argument
// and the fix; waiting on it or synchronizing it is a no-op, as in CUDA.
// The same checks run on the fake driver and, where there is one, a GPU.
#include <string>

#include "support/fake_device_test.hpp"

namespace {

void check_unrecorded(kaio_device *dev, kaio_stream *stream) {
  kaio_event *a = nullptr, *b = nullptr;
  KT_OK(kaio_event_create(&a, dev, 0));
  KT_OK(kaio_event_create(&b, dev, 0));
  kt::Event ea(a), eb(b);
  // CUDA documents both as immediate successes for an unrecorded event.
  KT_OK(kaio_stream_wait_event(stream, a));
  KT_OK(kaio_event_synchronize(a));
  KT_OK(kaio_event_record(b, stream));
  KT_OK(kaio_event_synchronize(b));
  float ms = -1;
  EXPECT_EQ(kaio_event_elapsed_ms(&ms, a, b), KAIO_ERROR_INVALID_ARGUMENT);
  std::string msg = kaio_last_error();
  for (const char *part : {"kaio_event_elapsed_ms", "'start'", "never been recorded",
                           "record it with kaio_event_record first"})
    EXPECT_NE(msg.find(part), std::string::npos) << "lacks \"" << part << "\": " << msg;
  EXPECT_EQ(kaio_last_error_driver_code(), 0) << "the driver was asked: " << msg;
  EXPECT_EQ(ms, 0.0f);
  EXPECT_EQ(kaio_event_elapsed_ms(&ms, b, a), KAIO_ERROR_INVALID_ARGUMENT);
  msg = kaio_last_error();
  EXPECT_NE(msg.find("'end'"), std::string::npos) << msg;
  // Once recorded, the same pair times.
  KT_OK(kaio_event_record(a, stream));
  KT_OK(kaio_event_record(b, stream));
  KT_OK(kaio_event_synchronize(b));
  KT_OK(kaio_event_elapsed_ms(&ms, a, b));
  EXPECT_GE(ms, 0.0f);
}

using UnrecordedEvent = kt::FakeDeviceTest;

TEST_F(UnrecordedEvent, OnTheFakeDriver) { check_unrecorded(dev_.get(), stream_.get()); }

class GpuUnrecordedEvent : public kt::GpuTest {};

TEST_F(GpuUnrecordedEvent, OnARealDriver) { check_unrecorded(dev(), stream()); }

}  // namespace
