// A compiled kernel-language kernel on one device: the checked program (for
// launch checks and messages), its two entries and its device-side error
// flag. Immutable after creation except for the flag's contents.
#pragma once

#include <kaio/kaio.h>

#include <memory>
#include <string>

#include "lang/compiler.hpp"
#include "runtime/device.hpp"

struct kaio_lang_kernel {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::lang_kernel;
  static constexpr const char *kName = "kaio_lang_kernel";
  static constexpr const char *kHowToMake = "create one with kaio_lang_kernel_create";
  kaio::HandleTag tag = kTag;
  kaio_device *device = nullptr;
  std::string source;
  std::unique_ptr<kaio::lang::Compiled> compiled;
  // map kernels: [0] scalar, [1] vector; row kernels: [0] warp, [1] block,
  // [2] warp_cached, [3] block_cached
  kaio::cu::CUfunction entries[4] = {nullptr, nullptr, nullptr, nullptr};
  kaio::cu::CUdeviceptr error_flag = 0;  // 4 bytes, owned
};

namespace kaio {

// Checks the views and scalars against the kernel and enqueues it.
kaio_status lang_launch(const char *caller, const kaio_lang_kernel &kernel, kaio_stream *stream,
                        const kaio_tensor *tensors, size_t tensor_count, const double *scalars,
                        size_t scalar_count);

}  // namespace kaio
