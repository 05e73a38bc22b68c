// Moving bytes into, out of and between buffers, and filling them. The
// caller has checked the ranges and that the stream is on the buffers'
// device; errors name api_name(). A size of 0 does nothing.
#pragma once

#include "runtime/buffer.hpp"
#include "runtime/stream.hpp"

namespace kaio {

// Complete when it returns: the bytes are on the device.
kaio_status buffer_write(const kaio_buffer *buffer, uint64_t offset, const void *src,
                         uint64_t size);
kaio_status buffer_read(const kaio_buffer *buffer, uint64_t offset, void *dst, uint64_t size);
// Zero bytes, complete when it returns (the legacy stream, then a wait).
kaio_status buffer_zero(const kaio_buffer *buffer, uint64_t offset, uint64_t size);

// Enqueued on stream.
kaio_status buffer_write_async(const kaio_buffer *buffer, const kaio_stream *stream,
                               uint64_t offset, const void *src, uint64_t size);
kaio_status buffer_read_async(const kaio_buffer *buffer, const kaio_stream *stream,
                              uint64_t offset, void *dst, uint64_t size);
kaio_status buffer_memset(const kaio_buffer *buffer, const kaio_stream *stream, uint64_t offset,
                          uint8_t value, uint64_t size);
// The ranges must not overlap.
kaio_status buffer_copy(const kaio_buffer *dst, uint64_t dst_offset, const kaio_buffer *src,
                        uint64_t src_offset, uint64_t size, const kaio_stream *stream);

}  // namespace kaio
