// A range of device memory: owned (allocated here) or a wrapper around
// foreign memory, checked against the driver's record of its allocation.
#pragma once

#include <memory>

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
// names the buffer argument in the message, after api_name().
kaio_status check_range(const char *arg, const kaio_buffer *buffer, uint64_t offset,
                        uint64_t size);

// Frees an owned buffer's memory, then drops the buffer's device reference.
struct BufferDelete {
  void operator()(kaio_buffer *buffer) const;
};
using BufferPtr = std::unique_ptr<kaio_buffer, BufferDelete>;

// A buffer of `size` fresh bytes on device (which it retains). Errors name
// api_name().
kaio_status buffer_allocate(kaio_device *device, uint64_t size, BufferPtr *out);

// A buffer over foreign memory [ptr, ptr + size), once check_foreign_memory
// accepts it; the memory stays its owner's.
kaio_status buffer_wrap(kaio_device *device, cu::CUdeviceptr ptr, uint64_t size, BufferPtr *out);

}  // namespace kaio
