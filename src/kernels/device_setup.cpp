#include "kernels/device_setup.hpp"

#include "kernels/module_cache.hpp"

namespace kaio {

kaio_status setup_device_kernels(kaio_device *device) {
  device->modules = {new ModuleCache(device), [](ModuleCache *cache) { delete cache; }};
  return KAIO_OK;
}

}  // namespace kaio
