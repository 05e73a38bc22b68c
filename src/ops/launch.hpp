// A kernel launch's configuration, resolved at planning time, and the one
// function that enqueues it. Plans hold one Launch per kernel they run.
#pragma once

#include <kaio/kaio.h>

#include "driver/cuda_abi.hpp"
#include "kernels/builtin_kernels.hpp"
#include "runtime/device.hpp"

namespace kaio {

struct Launch {
  cu::CUfunction function = nullptr;
  unsigned grid = 0;
  unsigned grid_y = 1;
  unsigned grid_z = 1;
  unsigned block = 0;
  unsigned shared_bytes = 0;
  // The kernel waits for the previous grid (griddepcontrol.wait): launched
  // with programmatic stream serialization (KernelInfo::grid_dep_wait).
  bool grid_dep_wait = false;
};

// The kernel's function, block and dynamic shared memory; the grid is the
// plan's to set.
inline Launch launch_of(const BuiltinFunction &fn) {
  Launch l;
  l.function = fn.function;
  l.block = fn.info->block[0];
  l.shared_bytes = fn.shared_bytes;
  l.grid_dep_wait = fn.info->grid_dep_wait;
  return l;
}

// Enqueues a built-in kernel with the launch's grid, block and shared memory
// under the device's context. A kernel that waits for the previous grid goes
// through cuLaunchKernelEx with programmatic stream serialization, so it may
// start in the previous kernel's tail (where the driver has no
// cuLaunchKernelEx, it launches as every other kernel: its wait then returns
// at once); every other kernel through cuLaunchKernel.
kaio_status launch_builtin(const kaio_device *device, const Launch &launch,
                           kaio_stream *stream, void **params);

}  // namespace kaio
