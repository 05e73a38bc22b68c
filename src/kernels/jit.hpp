// Loads PTX through the driver JIT, turning a failure into a status whose
// message carries the JIT's own log.
#pragma once

#include <kaio/kaio.h>

#include <cstddef>

#include "runtime/device.hpp"

namespace kaio {

// The JIT error log buffer: a module with hundreds of errors fits.
constexpr size_t kJitLogBytes = 64 * 1024;

// The device's context must be current. `what` names the module in messages.
kaio_status jit_load(const kaio_device *device, const char *ptx,
                     const char *what, cu::CUmodule *out);

}  // namespace kaio
