#include "runtime/buffer.hpp"

#include <cinttypes>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/device_memory.hpp"
#include "runtime/foreign_memory.hpp"

namespace kaio {
namespace {

BufferPtr make_buffer(kaio_device *device, cu::CUdeviceptr ptr, uint64_t size, bool owned) {
  BufferPtr b(new kaio_buffer);
  b->ptr = ptr;
  b->size = size;
  b->owned = owned;
  b->device = device;
  device_retain(device);
  return b;
}

}  // namespace

kaio_status check_range(const char *arg, const kaio_buffer *buffer, uint64_t offset,
                        uint64_t size) {
  uint64_t end = 0;
  // A wrapped sum would print as a small number that looks in bounds.
  if (__builtin_add_overflow(offset, size, &end))
    return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                "%s: offset %" PRIu64 " + size %" PRIu64 " for argument '%s' exceeds 2^64, so "
                "the range cannot lie in its %" PRIu64 "-byte buffer; pass an offset and size "
                "whose sum is at most %" PRIu64 ".",
                api_name(), offset, size, arg, buffer->size, buffer->size);
  if (end > buffer->size)
    return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                "%s: range [%" PRIu64 ", %" PRIu64 ") (offset %" PRIu64 " + size %" PRIu64
                ") of argument '%s' runs past the end of its %" PRIu64 "-byte buffer; shrink "
                "the range or use a larger buffer.",
                api_name(), offset, end, offset, size, arg, buffer->size);
  return KAIO_OK;
}

void BufferDelete::operator()(kaio_buffer *buffer) const {
  kaio_device *device = buffer->device;
  if (buffer->owned) free_device_memory(device, buffer->ptr);
  delete buffer;
  if (device) device_release(device);
}

kaio_status buffer_allocate(kaio_device *device, uint64_t size, BufferPtr *out) {
  cu::CUdeviceptr ptr = 0;
  KAIO_TRY(allocate_device_memory(device, size, &ptr));
  try {
    *out = make_buffer(device, ptr, size, true);
  } catch (...) {
    free_device_memory(device, ptr);
    throw;  // the firewall reports it
  }
  return KAIO_OK;
}

kaio_status buffer_wrap(kaio_device *device, cu::CUdeviceptr ptr, uint64_t size, BufferPtr *out) {
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  KAIO_TRY(check_foreign_memory(device, ptr, size));
  *out = make_buffer(device, ptr, size, false);
  return KAIO_OK;
}

}  // namespace kaio
