// User PTX modules and the kernels looked up in them. A kernel retains its
// module, and a module its device, so handles may be destroyed in any order.
#pragma once

#include <atomic>
#include <string>

#include <kaio/kaio.h>

#include "runtime/device.hpp"

struct kaio_module {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::module;
  static constexpr const char *kName = "kaio_module";
  static constexpr const char *kHowToMake = "load one with kaio_module_load_ptx";
  kaio::HandleTag tag = kTag;
  std::atomic<int64_t> refs{1};
  kaio_device *device = nullptr;
  kaio::cu::CUmodule native = nullptr;
};

struct kaio_kernel {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::kernel;
  static constexpr const char *kName = "kaio_kernel";
  static constexpr const char *kHowToMake = "get one with kaio_module_get_kernel";
  kaio::HandleTag tag = kTag;
  kaio_module *module = nullptr;
  kaio::cu::CUfunction native = nullptr;
  std::string name;
  int64_t param_bytes = -1;  // -1 when the driver cannot report the layout
  // Its static .shared bytes: they and the launch's dynamic bytes share one
  // per-block limit, and the 48 KiB default covers their sum.
  uint32_t static_shared_bytes = 0;
};

namespace kaio {

// JIT-loads ptx on device under its context and publishes the module.
kaio_status module_load(kaio_device *device, const char *ptx, kaio_module **out);
// Drops one reference; the last unloads the module and releases its device.
void module_release(kaio_module *module);

// `name`'s function in a module loaded on device (a kernel-language one).
kaio_status module_function(const kaio_device *device, cu::CUmodule module, const char *name,
                            cu::CUfunction *out);

// Looks up entry `name` (KAIO_ERROR_KERNEL_NOT_FOUND when absent) and
// publishes the kernel, which retains its module.
kaio_status kernel_get(kaio_module *module, const char *name, kaio_kernel **out);
kaio_status kernel_attributes(const kaio_kernel &kernel, kaio_kernel_attributes *attrs);
// Enqueues the kernel with a checked config and `size` bytes of parameters
// (exactly the driver's layout), raising its shared memory limit as needed.
kaio_status kernel_launch(const kaio_kernel &kernel, kaio_stream *stream,
                          const kaio_launch_config &config, const void *args, size_t size);

}  // namespace kaio
