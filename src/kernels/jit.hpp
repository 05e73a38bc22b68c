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

// A loaded function's static .shared bytes. They and a launch's dynamic
// bytes share one per-block limit, and the driver's default dynamic limit is
// what they leave of 48 KiB. The context must be current for both.
kaio_status static_shared_bytes(const kaio_device *device, cu::CUfunction f, uint32_t *out);
// Raises f's dynamic limit to `dynamic` when static + dynamic passes 48 KiB.
kaio_status fit_dynamic_shared(const kaio_device *device, cu::CUfunction f,
                               uint32_t static_bytes, uint32_t dynamic);

}  // namespace kaio
