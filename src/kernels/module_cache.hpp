// Built-in kernels of one device: each is JIT-loaded once, on first use, as a
// module of its own carved from its PTX file, and stays loaded while the
// device lives; resolved kernels are cached so a steady-state launch makes no
// driver call but the launch itself.
#pragma once

#include <kaio/kaio.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kernels/builtin_kernels.hpp"
#include "runtime/device.hpp"

namespace kaio {

class ModuleCache {
 public:
  explicit ModuleCache(const kaio_device *device) : device_(device) {}
  // Unloads every module: the device's context must be current.
  ~ModuleCache();
  ModuleCache(const ModuleCache &) = delete;
  ModuleCache &operator=(const ModuleCache &) = delete;

  // Thread-safe. Loads the kernel if needed (pushing the device's
  // context itself), then returns the cached function. A kernel that needs
  // more than the default 48 KiB of dynamic shared memory gets its limit
  // raised here, once, so launches need no attribute calls.
  kaio_status function(KernelId id, BuiltinFunction *out);

  // The built-in kernel's entry name for a function this cache resolved
  // ("(none)" otherwise): for KAIO_LOG, never on a launch path.
  const char *kernel_name(cu::CUfunction f) const;

  // Thread-safe. JIT-loads `ptx` once per distinct `key` (the source it was
  // compiled from, e.g. a kernel-language program); later calls with the
  // same key share the module. Each successful call is one reference, and
  // release_source_module drops it: the last one unloads the module, so a
  // server building kernels from user input does not accumulate modules.
  kaio_status source_module(const std::string &key, const char *ptx, cu::CUmodule *out);
  void release_source_module(const std::string &key);

 private:
  const kaio_device *device_;
  std::mutex mutex_;
  // One JIT-compiled module per kernel (see ptx_entry.hpp).
  std::array<cu::CUmodule, static_cast<size_t>(KernelId::count)> modules_{};
  std::array<std::atomic<cu::CUfunction>, static_cast<size_t>(KernelId::count)> functions_{};
  std::array<BuiltinFunction, static_cast<size_t>(KernelId::count)> resolved_{};
  struct SourceModule {
    cu::CUmodule module;
    int64_t refs;
  };
  std::unordered_map<std::string, SourceModule> source_modules_;  // guarded by mutex_
};

}  // namespace kaio
