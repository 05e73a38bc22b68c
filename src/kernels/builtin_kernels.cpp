#include "kernels/builtin_kernels.hpp"

#include <string_view>

#include "kernel_manifest.hpp"  // generated from the generators' manifests (src/meson.build)

namespace kaio {
namespace {

constexpr BuiltinKernel kKernels[] = {
#define KAIO_KERNEL_ROW(id, module, name) {ModuleId::module, name},
    KAIO_BUILTIN_KERNELS(KAIO_KERNEL_ROW)
#undef KAIO_KERNEL_ROW
};
static_assert(sizeof kKernels / sizeof kKernels[0] == static_cast<size_t>(KernelId::count));

// Every row names a kernel a generator writes, in that module: a wrong row
// is a compile error.
#ifndef KAIO_NO_MANIFEST_CHECK
constexpr bool generated_in(std::string_view name, std::string_view module) {
  const manifest::Entry *e = manifest::find(name);
  return e != nullptr && e->module == module;
}
#define KAIO_KERNEL_CHECK(id, module, name)                                     \
  static_assert(generated_in(name, #module),                                    \
                "builtin_kernels.hpp: " #id " names " name                      \
                ", which no generator writes in module " #module " (see ptx/meson.build)");
KAIO_BUILTIN_KERNELS(KAIO_KERNEL_CHECK)
#undef KAIO_KERNEL_CHECK
#endif

}  // namespace

const BuiltinKernel &builtin_kernel(KernelId id) { return kKernels[static_cast<int>(id)]; }

const char *module_name(ModuleId id) {
  switch (id) {
    case ModuleId::elementwise: return "elementwise";
    case ModuleId::rows: return "rows";
    case ModuleId::convert: return "convert";
    case ModuleId::matmul_sm80_sync: return "matmul_sm80_sync";
    case ModuleId::matmul_sm80_async: return "matmul_sm80_async";
    case ModuleId::matmul_gemv: return "matmul_gemv";
    case ModuleId::matmul_sm90: return "matmul_sm90";
    case ModuleId::kquant_quantize: return "kquant_quantize";
    case ModuleId::kquant_dequant: return "kquant_dequant";
    case ModuleId::kquant_stream_sm90: return "kquant_stream_sm90";
    case ModuleId::quant_int8: return "quant_int8";
    case ModuleId::quant_int4: return "quant_int4";
    case ModuleId::attention_fwd_sm80: return "attention_fwd_sm80";
    case ModuleId::attention_bwd_sm80: return "attention_bwd_sm80";
    case ModuleId::attention_f32: return "attention_f32";
    case ModuleId::attention_f32_tc: return "attention_f32_tc";
    case ModuleId::attention_fwd_sm90: return "attention_fwd_sm90";
    case ModuleId::attention_bwd_sm90: return "attention_bwd_sm90";
    case ModuleId::quant_int4_sm90: return "quant_int4_sm90";
    default: return "unknown";
  }
}

}  // namespace kaio
