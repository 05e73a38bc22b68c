// Streams and events. A stream is either owned (created here) or a borrowed
// wrapper around a foreign CUstream; both retain their device.
#pragma once

#include <atomic>
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
