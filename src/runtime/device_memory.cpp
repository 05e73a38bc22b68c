#include "runtime/device_memory.hpp"

#include <cinttypes>

#include "core/call_context.hpp"
#include "driver/driver_error.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/handle_registry.hpp"

namespace kaio {

kaio_status allocate_device_memory(const kaio_device *device, uint64_t bytes,
                                   cu::CUdeviceptr *out) {
  *out = 0;
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  if (cu::CUresult r = device->api->cuMemAlloc(out, static_cast<size_t>(bytes))) {
    *out = 0;
    kaio_status s = fail_driver(r, "cuMemAlloc");
    if (s == KAIO_ERROR_OUT_OF_DEVICE_MEMORY)
      fail(s,
           "%s: cannot allocate %" PRIu64 " bytes on device %d (%" PRIu64
           " bytes total): out of device memory.",
           api_name(), bytes, device->ordinal, device->info.total_memory);
    return s;
  }
  return KAIO_OK;
}

void free_device_memory(const kaio_device *device, cu::CUdeviceptr ptr) {
  // run by whichever call lets go last (or by none): name the release
  ApiCall release("free_device_memory");
  ContextScope scope(device);
  if (scope.status() == KAIO_OK) device->api->cuMemFree(ptr);
}

kaio_status DeviceMemory::allocate(kaio_device *device, uint64_t bytes,
                                   std::shared_ptr<const DeviceMemory> *out) {
  std::shared_ptr<DeviceMemory> memory(new DeviceMemory);
  KAIO_TRY(allocate_device_memory(device, bytes, &memory->buffer_.ptr));
  memory->buffer_.device = device;
  memory->buffer_.size = bytes;
  memory->buffer_.owned = true;
  device_retain(device);
  memory->handle_ = static_cast<kaio_buffer *>(
      handle_issue(HandleTag::buffer, &memory->buffer_, HandleUse::borrowed));
  if (!memory->handle_)
    return fail(KAIO_ERROR_OUT_OF_HOST_MEMORY, "%s: cannot issue a handle for a workspace.",
                api_name());
  *out = std::move(memory);
  return KAIO_OK;
}

DeviceMemory::~DeviceMemory() {
  if (handle_) handle_retire(HandleTag::buffer, handle_, HandleUse::borrowed);
  if (!buffer_.device) return;
  free_device_memory(buffer_.device, buffer_.ptr);
  device_release(buffer_.device);
}

}  // namespace kaio
