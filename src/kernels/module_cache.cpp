#include "kernels/module_cache.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/embedded_ptx.hpp"
#include "kernels/jit.hpp"
#include "kernels/module_driver.hpp"
#include "kernels/ptx_entry.hpp"
#include "runtime/context_scope.hpp"

namespace kaio {

ModuleCache::~ModuleCache() {
  for (cu::CUmodule m : modules_)
    if (m) device_->api->cuModuleUnload(m);
  for (auto &entry : source_modules_) device_->api->cuModuleUnload(entry.second.module);
}

kaio_status ModuleCache::source_module(const std::string &key, const char *ptx, cu::CUmodule *out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = source_modules_.find(key); it != source_modules_.end()) {
    ++it->second.refs;
    *out = it->second.module;
    return KAIO_OK;
  }
  ContextScope scope(device_);
  KAIO_TRY(scope.status());
  cu::CUmodule module = nullptr;
  KAIO_TRY(jit_load(device_, ptx, "the kernel's generated PTX", &module));
  try {
    source_modules_.emplace(key, SourceModule{module, 1});
  } catch (...) {
    device_->api->cuModuleUnload(module);
    throw;
  }
  *out = module;
  return KAIO_OK;
}

void ModuleCache::release_source_module(const std::string &key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = source_modules_.find(key);
  if (it == source_modules_.end() || --it->second.refs > 0) return;
  // run by whichever call lets go last (or by none): name the release
  ApiCall release("kaio_lang_kernel_destroy");
  ContextScope scope(device_);
  if (scope.status() == KAIO_OK) device_->api->cuModuleUnload(it->second.module);
  source_modules_.erase(it);
}

namespace {

// How many of a cluster kernel's clusters fit on the device at once (for
// the ops' wave counts); 0 without clusters, or where the driver lacks the
// query or refuses it (the ops then count SMs).
int max_active_clusters(const kaio_device *device, cu::CUfunction f, const KernelInfo &k,
                        unsigned shared) {
  if (k.cluster[0] * k.cluster[1] * k.cluster[2] <= 1 || !device->api->cuOccupancyMaxActiveClusters)
    return 0;
  cu::CUlaunchConfig config{};
  config.gridDimX = k.cluster[0];
  config.gridDimY = k.cluster[1];
  config.gridDimZ = k.cluster[2];
  config.blockDimX = k.block[0];
  config.blockDimY = k.block[1];
  config.blockDimZ = k.block[2];
  config.sharedMemBytes = shared;
  int clusters = 0;
  if (device->api->cuOccupancyMaxActiveClusters(&clusters, f, &config) != cu::CUDA_SUCCESS)
    return 0;
  return clusters > 0 ? clusters : 0;
}

}  // namespace

kaio_status ModuleCache::function(KernelId id, BuiltinFunction *out) {
  // A selector's "no such kernel": the op asked for keys no generator wrote.
  if (id == KernelId::count)
    return fail(KAIO_ERROR_INTERNAL,
                "%s: no built-in kernel for this combination of dtype and shape. Please report "
                "this.",
                api_name());
  const size_t index = static_cast<size_t>(id);
  auto &slot = functions_[index];
  if (slot.load(std::memory_order_acquire)) {
    *out = resolved_[index];
    return KAIO_OK;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (slot.load(std::memory_order_relaxed)) {
    *out = resolved_[index];
    return KAIO_OK;
  }
  const KernelInfo &k = kernel_info(id);
  // Said before the JIT can say CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the ops
  // choose families the driver loads, so this is the backstop for a path
  // that did not ask.
  if (!driver_loads(device_, k.module)) {
    const ModuleNeed need = module_need(k.module);
    return fail(KAIO_ERROR_DRIVER_TOO_OLD,
                "%s: built-in kernel %s (module '%s') is PTX ISA %d.%d, which needs an NVIDIA "
                "driver for CUDA %s (r%d) or newer, but this driver is CUDA %s. Update the "
                "driver to r%d+.",
                api_name(), k.name, module_name(k.module), need.isa.major, need.isa.minor,
                cuda_version_text(need.cuda).c_str(), need.driver_branch,
                cuda_version_text(device_->api->driver_version).c_str(), need.driver_branch);
  }
  ContextScope scope(device_);
  KAIO_TRY(scope.status());
  cu::CUmodule &module = modules_[index];
  const char *ptx = embedded_ptx(module_name(k.module));
  if (!ptx)
    return fail(KAIO_ERROR_INTERNAL,
                "%s: built-in module '%s' is missing from this build or could not be inflated "
                "(out of host memory?).",
                api_name(), module_name(k.module));
  const std::string single = ptx_single_entry(ptx, k.name);
  if (single.empty())
    return fail(KAIO_ERROR_INTERNAL, "%s: built-in module '%s' has no entry %s.", api_name(),
                module_name(k.module), k.name);
  char what[160];
  std::snprintf(what, sizeof what, "built-in kernel %s (module '%s')", k.name,
                module_name(k.module));
  KAIO_TRY(jit_load(device_, single.c_str(), what, &module));
  cu::CUfunction f = nullptr;
  if (cu::CUresult r = device_->api->cuModuleGetFunction(&f, module, k.name))
    return fail_driver(r, k.name);
  uint32_t fixed = 0;  // static .shared: the same per-block limit
  KAIO_TRY(static_shared_bytes(device_, f, &fixed));
  unsigned shared = k.dynamic_shared_bytes;
  const auto device_max = static_cast<unsigned>(device_->info.max_shared_per_block);
  const unsigned room = device_max > fixed ? device_max - fixed : 0;
  // A kernel that sizes a tail per launch needs only its fixed part; the
  // rest of what it asks for is capped at what this device has, and the
  // caller checks its tail against that.
  if (k.shared_fixed && k.shared_fixed <= room) shared = std::min(shared, room);
  if (shared > room)
    return fail(KAIO_ERROR_UNSUPPORTED_ARCH,
                "%s: kernel %s needs %u bytes of shared memory per block (%u of them static) "
                "but device %d allows %d.",
                api_name(), k.name, shared + fixed, fixed, device_->ordinal,
                device_->info.max_shared_per_block);
  KAIO_TRY(fit_dynamic_shared(device_, f, fixed, shared));
  BuiltinFunction &r = resolved_[index];
  r.function = f;
  r.info = &k;
  r.shared_bytes = shared;
  r.max_clusters = max_active_clusters(device_, f, k, shared);
  slot.store(f, std::memory_order_release);  // publishes resolved_[index]
  *out = resolved_[index];
  return KAIO_OK;
}

const char *ModuleCache::kernel_name(cu::CUfunction f) const {
  for (size_t i = 0; i < functions_.size(); ++i)
    if (f && functions_[i].load(std::memory_order_acquire) == f)
      return kernel_info(static_cast<KernelId>(i)).name;
  return "(none)";
}

}  // namespace kaio
