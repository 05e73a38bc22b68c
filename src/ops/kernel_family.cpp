#include "ops/kernel_family.hpp"

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "kernels/module_driver.hpp"
#include "ops/plan_log.hpp"

namespace kaio {
namespace {

std::string reason(const kaio_device *device, const ModuleNeed &need,
                   FamilyCheck::Verdict verdict) {
  const std::string target = "sm_" + std::to_string(need.cc) + (need.arch_specific ? "a" : "");
  const std::string device_cc =
      std::to_string(device->info.cc_major) + "." + std::to_string(device->info.cc_minor);
  const std::string driver = cuda_version_text(device->api->driver_version);
  const std::string needed = cuda_version_text(need.cuda);
  const std::string isa = std::to_string(need.isa.major) + "." + std::to_string(need.isa.minor);
  switch (verdict) {
    case FamilyCheck::Verdict::arch: return "device " + device_cc + " cannot run " + target;
    case FamilyCheck::Verdict::tensor_maps:
      return "driver " + driver + " lacks cuTensorMapEncodeTiled";
    case FamilyCheck::Verdict::driver:
      return "driver " + driver + " < " + needed + " needed by " + target + " PTX " + isa;
    case FamilyCheck::Verdict::ok: break;
  }
  return target + " on device " + device_cc + ", driver " + driver + " >= " + needed +
         " for PTX " + isa;
}

}  // namespace

FamilyCheck check_family(const kaio_device *device, ModuleId module, bool tensor_maps) {
  const ModuleNeed need = module_need(module);
  const int cc = device->info.cc_major * 10 + device->info.cc_minor;
  FamilyCheck c;
  if (need.arch_specific ? cc != need.cc : cc < need.cc)
    c.verdict = FamilyCheck::Verdict::arch;
  else if (tensor_maps && !device->api->cuTensorMapEncodeTiled)
    c.verdict = FamilyCheck::Verdict::tensor_maps;
  else if (!driver_loads(device, module))
    c.verdict = FamilyCheck::Verdict::driver;
  else
    c.verdict = FamilyCheck::Verdict::ok;
  if (log_enabled()) c.why = reason(device, need, c.verdict);  // one-shot calls skip the text
  return c;
}

kaio_status resolve_twin(const kaio_device *device, KernelId plain, KernelId twin,
                         const std::string &why, BuiltinFunction *fn) {
  const FamilyCheck c = twin == KernelId::count
                            ? FamilyCheck{FamilyCheck::Verdict::arch, "no twin"}
                            : check_family(device, kernel_info(twin).module, false);
  KAIO_TRY(device->modules->function(c.ok() ? twin : plain, fn));
  if (log_enabled())
    log_kernel(device, fn->function,
               why + (why.empty() ? "" : "; ") + (c.ok() ? "dependent launch (" : "plain launch (") +
                   c.why + ")");
  return KAIO_OK;
}

kaio_status fail_variant_driver(const char *argument, const char *variant, const char *auto_name,
                                const kaio_device *device, ModuleId module) {
  const ModuleNeed need = module_need(module);
  return fail(KAIO_ERROR_DRIVER_TOO_OLD,
              "%s: %s is %s, whose kernels are PTX ISA %d.%d and need an NVIDIA driver for CUDA "
              "%s (r%d) or newer, but this driver is CUDA %s. Update the driver to r%d+ or use "
              "%s, which runs the kernels this driver loads.",
              api_name(), argument, variant, need.isa.major, need.isa.minor,
              cuda_version_text(need.cuda).c_str(), need.driver_branch,
              cuda_version_text(device->api->driver_version).c_str(), need.driver_branch,
              auto_name);
}

}  // namespace kaio
