// User PTX modules and the kernels looked up in them. A kernel retains its
// module, and a module its device, so handles may be destroyed in any order.
#pragma once

#include <atomic>
#include <string>

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
};

namespace kaio {
void module_release(kaio_module *module);
}
