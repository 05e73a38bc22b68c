// Streams. A stream is either owned (created here) or a borrowed wrapper
// around a foreign CUstream; both retain their device.
#pragma once

#include <memory>

#include "runtime/device.hpp"
#include "runtime/error_flag.hpp"

struct kaio_stream {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::stream;
  static constexpr const char *kName = "kaio_stream";
  static constexpr const char *kHowToMake = "pass a stream from kaio_stream_create or kaio_stream_wrap";
  kaio::HandleTag tag = kTag;
  kaio_device *device = nullptr;
  kaio::cu::CUstream native = nullptr;
  bool owned = false;
  // device-side error flags launched here, reported by the next sync
  std::shared_ptr<kaio::ErrorFlagRegistry> error_flags;
};

namespace kaio {

// Destroys an owned stream's CUstream, then drops the device reference.
struct StreamDelete {
  void operator()(kaio_stream *stream) const;
};
using StreamPtr = std::unique_ptr<kaio_stream, StreamDelete>;

// Errors name api_name().
kaio_status stream_create(kaio_device *device, bool non_blocking, StreamPtr *out);
// Wraps a CUstream of device's primary context (or NULL, CU_STREAM_LEGACY,
// CU_STREAM_PER_THREAD); it stays its owner's.
kaio_status stream_wrap(kaio_device *device, cu::CUstream native, StreamPtr *out);
// Waits for the stream, then reports the first error flag its launches raised.
kaio_status stream_synchronize(kaio_stream *stream);

}  // namespace kaio
