#include "runtime/buffer.hpp"

#include <cinttypes>

#include "core/error.hpp"

namespace kaio {

kaio_status check_range(const char *caller, const char *arg, const kaio_buffer *buffer,
                        uint64_t offset, uint64_t size) {
  uint64_t end = 0;
  // A wrapped sum would print as a small number that looks in bounds.
  if (__builtin_add_overflow(offset, size, &end))
    return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                "%s: offset %" PRIu64 " + size %" PRIu64 " for argument '%s' exceeds 2^64, so "
                "the range cannot lie in its %" PRIu64 "-byte buffer; pass an offset and size "
                "whose sum is at most %" PRIu64 ".",
                caller, offset, size, arg, buffer->size, buffer->size);
  if (end > buffer->size)
    return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                "%s: range [%" PRIu64 ", %" PRIu64 ") (offset %" PRIu64 " + size %" PRIu64
                ") of argument '%s' runs past the end of its %" PRIu64 "-byte buffer; shrink "
                "the range or use a larger buffer.",
                caller, offset, end, offset, size, arg, buffer->size);
  return KAIO_OK;
}

}  // namespace kaio
