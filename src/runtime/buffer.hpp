// A range of device memory: owned (allocated here) or a wrapper around
// foreign memory, checked against the driver's record of its allocation.
#pragma once

#include "runtime/device.hpp"

struct kaio_buffer {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::buffer;
  static constexpr const char *kName = "kaio_buffer";
  static constexpr const char *kHowToMake = "create one with kaio_buffer_create or kaio_buffer_wrap";
  kaio::HandleTag tag = kTag;
  kaio_device *device = nullptr;
  kaio::cu::CUdeviceptr ptr = 0;
  uint64_t size = 0;
  bool owned = false;
};

namespace kaio {

// Checks [offset, offset + size) lies in buffer, without overflow. `arg`
// names the buffer argument in the message.
kaio_status check_range(const char *caller, const char *arg, const kaio_buffer *buffer,
                        uint64_t offset, uint64_t size);

}  // namespace kaio
