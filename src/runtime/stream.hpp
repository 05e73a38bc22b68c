// Streams and events. A stream is either owned (created here) or a borrowed
// wrapper around a foreign CUstream; both retain their device.
#pragma once

#include "runtime/device.hpp"

struct kaio_stream {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::stream;
  kaio::HandleTag tag = kTag;
  kaio_device *device = nullptr;
  kaio::cu::CUstream native = nullptr;
  bool owned = false;
};

struct kaio_event {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::event;
  kaio::HandleTag tag = kTag;
  kaio_device *device = nullptr;
  kaio::cu::CUevent native = nullptr;
};
