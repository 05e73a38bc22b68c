#include "runtime/buffer.hpp"

#include <cinttypes>

#include "core/error.hpp"

namespace kaio {

kaio_status check_range(const char *caller, const char *arg, const kaio_buffer *buffer,
                        uint64_t offset, uint64_t size) {
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, size, &end) || end > buffer->size)
    return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                "%s: range [%" PRIu64 ", %" PRIu64 " + %" PRIu64 ") of argument '%s' runs past "
                "the end of its %" PRIu64 "-byte buffer; shrink the range or use a larger buffer.",
                caller, offset, offset, size, arg, buffer->size);
  return KAIO_OK;
}

}  // namespace kaio
