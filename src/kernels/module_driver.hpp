// What a built-in module asks of the driver and the device, derived from the
// module's own `.version` and `.target` lines (embed_ptx.py records them) and
// the ISA table in ptx_isa.hpp, so no per-family number can drift.
#pragma once

#include <kaio/kaio.h>

#include <string>

#include "kernels/builtin_kernels.hpp"
#include "kernels/ptx_isa.hpp"
#include "runtime/device.hpp"

namespace kaio {

struct ModuleNeed {
  PtxIsa isa;
  int cuda = 0;           // the oldest driver (cuDriverGetVersion form) that loads it
  int driver_branch = 0;  // that driver's Linux branch, e.g. 525
  int cc = 0;             // compute capability of .target, major * 10 + minor
  bool arch_specific = false;  // sm_XYa: runs on exactly that compute capability
};

ModuleNeed module_need(ModuleId id);

// The driver's JIT accepts the module's PTX version.
bool driver_loads(const kaio_device *device, ModuleId id);

// "12.8" for 12080.
std::string cuda_version_text(int version);

}  // namespace kaio
