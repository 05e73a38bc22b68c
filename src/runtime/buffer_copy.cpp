#include "runtime/buffer_copy.hpp"

#include "core/error.hpp"
#include "driver/driver_error.hpp"
#include "runtime/context_scope.hpp"

namespace kaio {
namespace {

// One driver call under the device's context; size 0 makes none.
template <class Call>
kaio_status under_context(const kaio_device *device, uint64_t size, const char *what, Call call) {
  if (size == 0) return KAIO_OK;
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  if (cu::CUresult r = call(device->api)) return fail_driver(r, what);
  return KAIO_OK;
}

}  // namespace

kaio_status buffer_write(const kaio_buffer *buffer, uint64_t offset, const void *src,
                         uint64_t size) {
  if (size == 0) return KAIO_OK;
  ContextScope scope(buffer->device);
  KAIO_TRY(scope.status());
  // cuMemcpyHtoD from pageable memory may return once the data is staged,
  // before it lands; a kernel on a non-blocking stream could then read the
  // old bytes. Copying on the legacy stream and waiting for it makes the
  // write complete when this call returns, as documented.
  const driver::Api *api = buffer->device->api;
  if (cu::CUresult r = api->cuMemcpyHtoDAsync(buffer->ptr + offset, src, size, nullptr))
    return fail_driver(r, "cuMemcpyHtoDAsync");
  if (cu::CUresult r = api->cuStreamSynchronize(nullptr))
    return fail_driver(r, "cuStreamSynchronize");
  return KAIO_OK;
}

kaio_status buffer_read(const kaio_buffer *buffer, uint64_t offset, void *dst, uint64_t size) {
  return under_context(buffer->device, size, "cuMemcpyDtoH", [&](const driver::Api *api) {
    return api->cuMemcpyDtoH(dst, buffer->ptr + offset, size);
  });
}

kaio_status buffer_zero(const kaio_buffer *buffer, uint64_t offset, uint64_t size) {
  if (size == 0) return KAIO_OK;
  ContextScope scope(buffer->device);
  KAIO_TRY(scope.status());
  const driver::Api *api = buffer->device->api;
  if (cu::CUresult r = api->cuMemsetD8Async(buffer->ptr + offset, 0, size, nullptr))
    return fail_driver(r, "cuMemsetD8Async");
  if (cu::CUresult r = api->cuStreamSynchronize(nullptr))
    return fail_driver(r, "cuStreamSynchronize");
  return KAIO_OK;
}

kaio_status buffer_write_async(const kaio_buffer *buffer, const kaio_stream *stream,
                               uint64_t offset, const void *src, uint64_t size) {
  return under_context(buffer->device, size, "cuMemcpyHtoDAsync", [&](const driver::Api *api) {
    return api->cuMemcpyHtoDAsync(buffer->ptr + offset, src, size, stream->native);
  });
}

kaio_status buffer_read_async(const kaio_buffer *buffer, const kaio_stream *stream,
                              uint64_t offset, void *dst, uint64_t size) {
  return under_context(buffer->device, size, "cuMemcpyDtoHAsync", [&](const driver::Api *api) {
    return api->cuMemcpyDtoHAsync(dst, buffer->ptr + offset, size, stream->native);
  });
}

kaio_status buffer_memset(const kaio_buffer *buffer, const kaio_stream *stream, uint64_t offset,
                          uint8_t value, uint64_t size) {
  return under_context(buffer->device, size, "cuMemsetD8Async", [&](const driver::Api *api) {
    return api->cuMemsetD8Async(buffer->ptr + offset, value, size, stream->native);
  });
}

kaio_status buffer_copy(const kaio_buffer *dst, uint64_t dst_offset, const kaio_buffer *src,
                        uint64_t src_offset, uint64_t size, const kaio_stream *stream) {
  return under_context(dst->device, size, "cuMemcpyDtoDAsync", [&](const driver::Api *api) {
    return api->cuMemcpyDtoDAsync(dst->ptr + dst_offset, src->ptr + src_offset, size,
                                  stream->native);
  });
}

}  // namespace kaio
