// Events: points in a stream's work that other streams wait on and that
// time it. An event retains its device.
#pragma once

#include <atomic>
#include <memory>

#include "runtime/stream.hpp"

struct kaio_event {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::event;
  static constexpr const char *kName = "kaio_event";
  static constexpr const char *kHowToMake = "create one with kaio_event_create";
  kaio::HandleTag tag = kTag;
  kaio_device *device = nullptr;
  kaio::cu::CUevent native = nullptr;
  bool timing = true;
  // Set by kaio_event_record: the driver's error for timing an unrecorded
  // event (CUDA_ERROR_INVALID_HANDLE) would not say which event or why.
  std::atomic<bool> recorded{false};
  // the recording stream's error flags, reported by kaio_event_synchronize
  std::shared_ptr<kaio::ErrorFlagRegistry> error_flags;
};

namespace kaio {

// Destroys the CUevent, then drops the device reference.
struct EventDelete {
  void operator()(kaio_event *event) const;
};
using EventPtr = std::unique_ptr<kaio_event, EventDelete>;

// Errors name api_name().
kaio_status event_create(kaio_device *device, bool timing, EventPtr *out);
// Records event on stream (both of one device).
kaio_status event_record(kaio_event *event, const kaio_stream *stream);
// Waits for event, then reports an error flag its stream's launches raised.
kaio_status event_synchronize(const kaio_event *event);
// Both recorded with timing, on one device.
kaio_status event_elapsed_ms(const kaio_event *start, const kaio_event *end, float *out_ms);
// Makes stream wait for event, which may be of another device.
kaio_status stream_wait_event(const kaio_stream *stream, const kaio_event *event);

}  // namespace kaio
