// The benches' own kernels (spinner, plain read) are user PTX, loaded through
// libkaio's public API like any caller's.
#pragma once

#include <kaio/kaio.h>

#include "errors.hpp"
#include "handles.hpp"

namespace kaio_bench {

// Loads `ptx` on device into *module and looks up entry `name` into *kernel.
inline void load_user_kernel(kaio_device *device, const char *ptx, const char *name, Module *module,
                             Kernel *kernel) {
  kaio_module *m = nullptr;
  CHECK(kaio_module_load_ptx(&m, device, ptx));
  module->reset(m);
  kaio_kernel *k = nullptr;
  CHECK(kaio_module_get_kernel(&k, m, name));
  kernel->reset(k);
}

}  // namespace kaio_bench
