// What a device gets from the kernels layer when it is first opened:
// device_open's setup (runtime/device.hpp).
#pragma once

#include "runtime/device.hpp"

namespace kaio {

// Gives device its module cache.
kaio_status setup_device_kernels(kaio_device *device);

}  // namespace kaio
