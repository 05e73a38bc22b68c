#include "runtime/buffer_copy.hpp"

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "driver/driver_error.hpp"
#include "runtime/context_scope.hpp"

namespace kaio {

kaio_status buffer_write(const kaio_buffer *buffer, uint64_t offset, const void *src,
                         uint64_t size) {
  if (size == 0) return KAIO_OK;
  ContextScope scope(buffer->device);
  KAIO_TRY(scope.status(api_name()));
  // cuMemcpyHtoD from pageable memory may return once the data is staged,
  // before it lands; a kernel on a non-blocking stream could then read the
  // old bytes. Copying on the legacy stream and waiting for it makes the
  // write complete when this call returns, as documented.
  const driver::Api *api = buffer->device->api;
  if (cu::CUresult r = api->cuMemcpyHtoDAsync(buffer->ptr + offset, src, size, nullptr))
    return fail_driver(r, api_name(), "cuMemcpyHtoDAsync");
  if (cu::CUresult r = api->cuStreamSynchronize(nullptr))
    return fail_driver(r, api_name(), "cuStreamSynchronize");
  return KAIO_OK;
}

kaio_status buffer_read(const kaio_buffer *buffer, uint64_t offset, void *dst, uint64_t size) {
  if (size == 0) return KAIO_OK;
  ContextScope scope(buffer->device);
  KAIO_TRY(scope.status(api_name()));
  if (cu::CUresult r = buffer->device->api->cuMemcpyDtoH(dst, buffer->ptr + offset, size))
    return fail_driver(r, api_name(), "cuMemcpyDtoH");
  return KAIO_OK;
}

kaio_status buffer_write_async(const kaio_buffer *buffer, const kaio_stream *stream,
                               uint64_t offset, const void *src, uint64_t size) {
  if (size == 0) return KAIO_OK;
  ContextScope scope(buffer->device);
  KAIO_TRY(scope.status(api_name()));
  if (cu::CUresult r =
          buffer->device->api->cuMemcpyHtoDAsync(buffer->ptr + offset, src, size, stream->native))
    return fail_driver(r, api_name(), "cuMemcpyHtoDAsync");
  return KAIO_OK;
}

kaio_status buffer_read_async(const kaio_buffer *buffer, const kaio_stream *stream,
                              uint64_t offset, void *dst, uint64_t size) {
  if (size == 0) return KAIO_OK;
  ContextScope scope(buffer->device);
  KAIO_TRY(scope.status(api_name()));
  if (cu::CUresult r =
          buffer->device->api->cuMemcpyDtoHAsync(dst, buffer->ptr + offset, size, stream->native))
    return fail_driver(r, api_name(), "cuMemcpyDtoHAsync");
  return KAIO_OK;
}

kaio_status buffer_memset(const kaio_buffer *buffer, const kaio_stream *stream, uint64_t offset,
                          uint8_t value, uint64_t size) {
  if (size == 0) return KAIO_OK;
  ContextScope scope(buffer->device);
  KAIO_TRY(scope.status(api_name()));
  if (cu::CUresult r =
          buffer->device->api->cuMemsetD8Async(buffer->ptr + offset, value, size, stream->native))
    return fail_driver(r, api_name(), "cuMemsetD8Async");
  return KAIO_OK;
}

kaio_status buffer_copy(const kaio_buffer *dst, uint64_t dst_offset, const kaio_buffer *src,
                        uint64_t src_offset, uint64_t size, const kaio_stream *stream) {
  if (size == 0) return KAIO_OK;
  ContextScope scope(dst->device);
  KAIO_TRY(scope.status(api_name()));
  if (cu::CUresult r = dst->device->api->cuMemcpyDtoDAsync(dst->ptr + dst_offset,
                                                           src->ptr + src_offset, size,
                                                           stream->native))
    return fail_driver(r, api_name(), "cuMemcpyDtoDAsync");
  return KAIO_OK;
}

}  // namespace kaio
