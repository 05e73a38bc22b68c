// The one body of every kaio_*_desc_init: zero the caller's struct_size
// bytes, write the defaults, record the size. The size is bounded, since it
// says how many bytes of the caller's memory are written (and is stored as
// a u32).
#pragma once

#include <kaio/kaio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/call_context.hpp"
#include "core/error.hpp"

namespace kaio {

// Larger than any descriptor will grow to (they are under 100 bytes now).
constexpr size_t kMaxDescSize = 4096;

template <typename Desc>
kaio_status init_desc(Desc *desc, size_t struct_size, const Desc &defaults) {
  if (!desc) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'desc' is NULL.", api_name());
  if (struct_size < sizeof(Desc))
    return fail(KAIO_ERROR_BUFFER_TOO_SMALL,
                "%s: argument 'struct_size' is %zu but must be at least %zu.", api_name(),
                struct_size, sizeof(Desc));
  if (struct_size > kMaxDescSize)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'struct_size' is %zu, larger than any kaio descriptor (at most %zu "
                "bytes); pass sizeof(*desc).",
                api_name(), struct_size, kMaxDescSize);
  std::memset(desc, 0, struct_size);
  *desc = defaults;
  desc->struct_size = static_cast<uint32_t>(struct_size);
  return KAIO_OK;
}

}  // namespace kaio
