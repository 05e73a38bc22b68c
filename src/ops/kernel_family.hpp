// Whether a built-in kernel family (one module) can run on a device: its
// .target against the device's compute capability, cuTensorMapEncodeTiled
// where its kernels take TMA maps, and its PTX .version against the driver
// (kernels/module_driver.hpp). AUTO asks this before choosing a family, so an
// old driver gets the older family instead of a JIT error; an explicit
// variant that cannot load fails with KAIO_ERROR_DRIVER_TOO_OLD.
#pragma once

#include <kaio/kaio.h>

#include <string>

#include "kernels/builtin_kernels.hpp"
#include "runtime/device.hpp"

namespace kaio {

struct FamilyCheck {
  enum class Verdict { ok, arch, tensor_maps, driver };
  Verdict verdict = Verdict::arch;
  bool ok() const { return verdict == Verdict::ok; }
  // Filled only while KAIO_LOG is on, either way: "sm_90a on device 9.0,
  // driver 12.8 >= 12.0 for PTX 8.0", or why not ("driver 11.8 < 12.0 needed
  // by sm_90a PTX 8.0").
  std::string why;
};

FamilyCheck check_family(const kaio_device *device, ModuleId module, bool tensor_maps);

// A kernel of an sm_80 module and `twin`, the same PTX again in an sm_90 module
// behind launch_dependents + griddepcontrol.wait (ptx/kaio_ptx/grid_dep.py
// twin_module), launched as a programmatic dependent launch: resolves the twin
// where the device runs sm_90 and the driver loads its module, else `plain`,
// into *fn, and logs the choice (KAIO_LOG) after `why`. Every op with twins
// picks through here, so a decode step is one chain of dependent launches.
kaio_status resolve_twin(const kaio_device *device, KernelId plain, KernelId twin,
                         const std::string &why, BuiltinFunction *fn);

// KAIO_ERROR_DRIVER_TOO_OLD for an explicit variant whose module the driver
// cannot load: names api_name(), `argument` = `variant`, the driver found, the
// one needed and the fix (a newer driver, or `auto_name`).
kaio_status fail_variant_driver(const char *argument, const char *variant, const char *auto_name,
                                const kaio_device *device, ModuleId module);

}  // namespace kaio
