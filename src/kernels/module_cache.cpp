#include "kernels/module_cache.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "kernels/embedded_ptx.hpp"
#include "kernels/jit.hpp"
#include "runtime/context_scope.hpp"

namespace kaio {

ModuleCache::~ModuleCache() {
  for (cu::CUmodule m : modules_)
    if (m) device_->api->cuModuleUnload(m);
}

kaio_status ModuleCache::function(const char *caller, KernelId id, cu::CUfunction *out) {
  auto &slot = functions_[static_cast<size_t>(id)];
  if (cu::CUfunction f = slot.load(std::memory_order_acquire)) {
    *out = f;
    return KAIO_OK;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (cu::CUfunction f = slot.load(std::memory_order_relaxed)) {
    *out = f;
    return KAIO_OK;
  }
  const BuiltinKernel &k = builtin_kernel(id);
  ContextScope scope(device_);
  KAIO_TRY(scope.status(caller));
  cu::CUmodule &module = modules_[static_cast<size_t>(k.module)];
  if (!module) {
    const char *ptx = embedded_ptx(module_name(k.module));
    if (!ptx)
      return fail(KAIO_ERROR_INTERNAL, "%s: built-in module '%s' is missing from this build.",
                  caller, module_name(k.module));
    char what[96];
    std::snprintf(what, sizeof what, "built-in module '%s'", module_name(k.module));
    KAIO_TRY(jit_load(caller, device_, ptx, what, &module));
  }
  cu::CUfunction f = nullptr;
  if (cu::CUresult r = device_->api->cuModuleGetFunction(&f, module, k.name))
    return fail_driver(r, caller, k.name);
  slot.store(f, std::memory_order_release);
  *out = f;
  return KAIO_OK;
}

}  // namespace kaio
