// A compiled kernel-language kernel on one device: the checked program (for
// launch checks and messages), its entries and its device-side error flag.
// Immutable after creation except for the flag's contents.
#pragma once

#include <kaio/kaio.h>

#include <memory>
#include <string>

#include "lang/compiler.hpp"
#include "runtime/device.hpp"
#include "runtime/error_flag.hpp"

namespace kaio {

// A kernel's bounds flag: reports the failing read (kernel, tensor, index
// and source position). Holds the source and program itself, as it may
// outlive the kernel in a stream's registry.
class LangErrorFlag final : public ErrorFlag {
 public:
  LangErrorFlag(std::string source, std::shared_ptr<const lang::Compiled> compiled)
      : source_(std::move(source)), compiled_(std::move(compiled)) {}
  kaio_status report(uint64_t value) const override;

 private:
  std::string source_;
  std::shared_ptr<const lang::Compiled> compiled_;
};

}  // namespace kaio

struct kaio_lang_kernel {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::lang_kernel;
  static constexpr const char *kName = "kaio_lang_kernel";
  static constexpr const char *kHowToMake = "create one with kaio_lang_kernel_create";
  kaio::HandleTag tag = kTag;
  kaio_device *device = nullptr;
  std::string source;
  std::shared_ptr<const kaio::lang::Compiled> compiled;
  // map kernels: [0] scalar, [1] vector; row kernels: [0] warp, [1] block,
  // [2] warp_cached, [3] block_cached
  kaio::cu::CUfunction entries[4] = {nullptr, nullptr, nullptr, nullptr};
  std::shared_ptr<kaio::LangErrorFlag> error_flag;  // shared with stream registries
};

namespace kaio {

// Checks the views and scalars against the kernel and enqueues it.
kaio_status lang_launch(const kaio_lang_kernel &kernel, kaio_stream *stream,
                        const kaio_tensor *tensors, size_t tensor_count, const double *scalars,
                        size_t scalar_count);

}  // namespace kaio
