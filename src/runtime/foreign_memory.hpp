// Checks that memory someone else allocated (candle, PyTorch, cudarc, the
// user's own driver calls) can back a kaio_buffer of `device`.
#pragma once

#include <kaio/kaio.h>

#include <cstdint>

#include "runtime/device.hpp"

namespace kaio {

// KAIO_OK when every byte of [ptr, ptr + size) is device memory of `device`
// that its primary context can read and write: plain cuMemAlloc memory of
// that context, stream-ordered pool memory (cuMemAllocAsync), or virtual
// memory (cuMemCreate + cuMemMap, over one or more adjacent mappings).
// Otherwise a specific status and a message that names api_name().
kaio_status check_foreign_memory(const kaio_device *device, uint64_t ptr, uint64_t size);

}  // namespace kaio
