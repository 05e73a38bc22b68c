#include "kernels/module_driver.hpp"

#include <cstdlib>

#include "kernels/embedded_ptx.hpp"

namespace kaio {

ModuleNeed module_need(ModuleId id) {
  ModuleNeed need;
  const EmbeddedModule *m = embedded_module(module_name(id));
  if (!m) return need;
  need.isa = m->isa;
  if (const IsaDriver *row = isa_driver(m->isa)) {
    need.cuda = row->cuda;
    need.driver_branch = row->driver_branch;
  }
  // "sm_90a": cc 90, arch-specific.
  char *end = nullptr;
  need.cc = static_cast<int>(std::strtol(m->target + 3, &end, 10));
  need.arch_specific = end && *end == 'a';
  return need;
}

bool driver_loads(const kaio_device *device, ModuleId id) {
  const ModuleNeed need = module_need(id);
  return need.cuda != 0 && device->api->driver_version >= need.cuda;
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace kaio
