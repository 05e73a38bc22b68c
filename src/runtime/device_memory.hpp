// Device allocations inside the library: kaio_buffer_create's memory and the
// workspaces ops own. Errors name the function the user called.
#pragma once

#include <memory>

#include "runtime/buffer.hpp"

namespace kaio {

// cuMemAlloc under the device's context; out of memory is reported with the
// size asked for and the device's total.
kaio_status allocate_device_memory(const kaio_device *device, uint64_t bytes, cu::CUdeviceptr *out);
void free_device_memory(const kaio_device *device, cu::CUdeviceptr ptr);

// A workspace an op owns: the memory and a reference to its device, released
// together. Plans share it (copies of a plan are views of one workspace). Its
// handle lets an op pass the workspace to another op's launch as a view.
class DeviceMemory {
 public:
  static kaio_status allocate(kaio_device *device, uint64_t bytes,
                              std::shared_ptr<const DeviceMemory> *out);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory &) = delete;
  DeviceMemory &operator=(const DeviceMemory &) = delete;

  cu::CUdeviceptr ptr() const { return buffer_.ptr; }
  kaio_buffer *handle() const { return handle_; }  // the issued handle (opaque)
  const kaio_buffer *buffer() const { return &buffer_; }  // for runtime/buffer_copy.hpp

 private:
  DeviceMemory() = default;
  kaio_buffer buffer_;
  kaio_buffer *handle_ = nullptr;
};

using Workspace = std::shared_ptr<const DeviceMemory>;

}  // namespace kaio
