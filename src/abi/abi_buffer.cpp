// Buffer entry points: allocation, foreign wrapping and copies. They check
// the arguments and resolve the handles; runtime/buffer*.cpp does the work.
#include <kaio/kaio.h>

#include <cinttypes>
#include <memory>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "runtime/buffer.hpp"
#include "runtime/buffer_copy.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"

using kaio::fail;

namespace {

kaio_status check_host(const char *arg, const void *host, uint64_t size) {
  if (host || size == 0) return KAIO_OK;
  return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument '%s' is NULL but size is %" PRIu64 ".",
              kaio::api_name(), arg, size);
}

kaio_status same_device(const kaio_stream *stream, const char *arg, const kaio_buffer *buffer) {
  if (stream->device == buffer->device) return KAIO_OK;
  return fail(KAIO_ERROR_WRONG_DEVICE,
              "%s: argument '%s' lives on device %d but 'stream' is on device %d; use a stream "
              "of device %d.",
              kaio::api_name(), arg, buffer->device->ordinal, stream->device->ordinal,
              buffer->device->ordinal);
}

// Resolves the stream handle in place; it must be on the buffer's device.
kaio_status check_stream_device(kaio_stream *&stream, const kaio_buffer *buffer, const char *arg) {
  KAIO_TRY(kaio::resolve_handle("stream", stream));
  return same_device(stream, arg, buffer);
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_buffer_create(kaio_buffer **out, kaio_device *device,
                                        uint64_t size_bytes) {
  constexpr const char *fn = "kaio_buffer_create";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle("device", device));
    if (size_bytes == 0)
      return fail(KAIO_ERROR_INVALID_DIMENSION,
                  "%s: argument 'size_bytes' is 0; allocate at least 1 byte.", fn);
    if (size_bytes > SIZE_MAX)
      return fail(KAIO_ERROR_INVALID_DIMENSION, "%s: argument 'size_bytes' is too large.", fn);
    kaio::BufferPtr buffer;
    KAIO_TRY(kaio::buffer_allocate(device, size_bytes, &buffer));
    return kaio::publish_handle(out, std::move(buffer));
  });
}

KAIO_API kaio_status kaio_buffer_wrap(kaio_buffer **out, kaio_device *device, uint64_t device_ptr,
                                      uint64_t size_bytes) {
  constexpr const char *fn = "kaio_buffer_wrap";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle("device", device));
    if (device_ptr == 0)
      return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'device_ptr' is 0.", fn);
    if (size_bytes == 0)
      return fail(KAIO_ERROR_INVALID_DIMENSION, "%s: argument 'size_bytes' is 0.", fn);
    kaio::BufferPtr buffer;
    KAIO_TRY(kaio::buffer_wrap(device, device_ptr, size_bytes, &buffer));
    return kaio::publish_handle(out, std::move(buffer));
  });
}

KAIO_API void kaio_buffer_destroy(kaio_buffer *handle) {
  kaio::firewall_void("kaio_buffer_destroy",
                      [&] { kaio::BufferPtr buffer(kaio::retire_handle(handle)); });
}

KAIO_API kaio_status kaio_buffer_write(kaio_buffer *buffer, uint64_t offset, const void *src,
                                       uint64_t size) {
  constexpr const char *fn = "kaio_buffer_write";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("buffer", buffer));
    KAIO_TRY(check_host("src", src, size));
    KAIO_TRY(kaio::check_range("buffer", buffer, offset, size));
    return kaio::buffer_write(buffer, offset, src, size);
  });
}

KAIO_API kaio_status kaio_buffer_read(const kaio_buffer *buffer, uint64_t offset, void *dst,
                                      uint64_t size) {
  constexpr const char *fn = "kaio_buffer_read";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("buffer", buffer));
    KAIO_TRY(check_host("dst", dst, size));
    KAIO_TRY(kaio::check_range("buffer", buffer, offset, size));
    return kaio::buffer_read(buffer, offset, dst, size);
  });
}

KAIO_API kaio_status kaio_buffer_write_async(kaio_buffer *buffer, kaio_stream *stream,
                                             uint64_t offset, const void *src, uint64_t size) {
  constexpr const char *fn = "kaio_buffer_write_async";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("buffer", buffer));
    KAIO_TRY(check_stream_device(stream, buffer, "buffer"));
    KAIO_TRY(check_host("src", src, size));
    KAIO_TRY(kaio::check_range("buffer", buffer, offset, size));
    return kaio::buffer_write_async(buffer, stream, offset, src, size);
  });
}

KAIO_API kaio_status kaio_buffer_read_async(const kaio_buffer *buffer, kaio_stream *stream,
                                            uint64_t offset, void *dst, uint64_t size) {
  constexpr const char *fn = "kaio_buffer_read_async";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("buffer", buffer));
    KAIO_TRY(check_stream_device(stream, buffer, "buffer"));
    KAIO_TRY(check_host("dst", dst, size));
    KAIO_TRY(kaio::check_range("buffer", buffer, offset, size));
    return kaio::buffer_read_async(buffer, stream, offset, dst, size);
  });
}

KAIO_API kaio_status kaio_buffer_memset(kaio_buffer *buffer, kaio_stream *stream,
                                        uint64_t offset, uint8_t value, uint64_t size) {
  constexpr const char *fn = "kaio_buffer_memset";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("buffer", buffer));
    KAIO_TRY(check_stream_device(stream, buffer, "buffer"));
    KAIO_TRY(kaio::check_range("buffer", buffer, offset, size));
    return kaio::buffer_memset(buffer, stream, offset, value, size);
  });
}

KAIO_API kaio_status kaio_buffer_copy(kaio_buffer *dst, uint64_t dst_offset,
                                      const kaio_buffer *src, uint64_t src_offset, uint64_t size,
                                      kaio_stream *stream) {
  constexpr const char *fn = "kaio_buffer_copy";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("dst", dst));
    KAIO_TRY(kaio::resolve_handle("src", src));
    KAIO_TRY(check_stream_device(stream, dst, "dst"));
    KAIO_TRY(same_device(stream, "src", src));
    KAIO_TRY(kaio::check_range("dst", dst, dst_offset, size));
    KAIO_TRY(kaio::check_range("src", src, src_offset, size));
    if (size == 0) return KAIO_OK;
    uint64_t d = dst->ptr + dst_offset, s = src->ptr + src_offset;
    if (d < s + size && s < d + size)
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: the 'dst' and 'src' ranges overlap; copy through a temporary buffer.", fn);
    return kaio::buffer_copy(dst, dst_offset, src, src_offset, size, stream);
  });
}

KAIO_API uint64_t kaio_buffer_device_ptr(const kaio_buffer *buffer) {
  const kaio_buffer *b = kaio::find_handle(buffer);
  return b ? b->ptr : 0;
}

KAIO_API uint64_t kaio_buffer_size(const kaio_buffer *buffer) {
  const kaio_buffer *b = kaio::find_handle(buffer);
  return b ? b->size : 0;
}

KAIO_API kaio_device *kaio_buffer_device(const kaio_buffer *buffer) {
  const kaio_buffer *b = kaio::find_handle(buffer);
  return b ? b->device->borrowed_handle : nullptr;
}

}  // extern "C"
