// The kernels libkaio ships, by module. Modules are the PTX files in ptx/,
// embedded at build time; each loads once per device, on first use.
#pragma once

#include <cstddef>

namespace kaio {

enum class ModuleId : int { elementwise, rows, count };

// X(id, module, entry name). Per-dtype variants are consecutive in the order
// f32, f16, bf16 so callers index them with dtype_variant().
// clang-format off
#define KAIO_BUILTIN_KERNELS(X)                                                   \
  X(silu_gate_f32, elementwise, "kaio_silu_gate_f32")                             \
  X(silu_gate_f16, elementwise, "kaio_silu_gate_f16")                             \
  X(silu_gate_bf16, elementwise, "kaio_silu_gate_bf16")                           \
  X(gelu_erf_f32, elementwise, "kaio_gelu_erf_f32")                               \
  X(gelu_erf_f16, elementwise, "kaio_gelu_erf_f16")                               \
  X(gelu_erf_bf16, elementwise, "kaio_gelu_erf_bf16")                             \
  X(gelu_tanh_f32, elementwise, "kaio_gelu_tanh_f32")                             \
  X(gelu_tanh_f16, elementwise, "kaio_gelu_tanh_f16")                             \
  X(gelu_tanh_bf16, elementwise, "kaio_gelu_tanh_bf16")                           \
  X(rmsnorm_f32_warp, rows, "kaio_rmsnorm_f32_warp")                              \
  X(rmsnorm_f16_warp, rows, "kaio_rmsnorm_f16_warp")                              \
  X(rmsnorm_bf16_warp, rows, "kaio_rmsnorm_bf16_warp")                            \
  X(rmsnorm_f32_block, rows, "kaio_rmsnorm_f32_block")                            \
  X(rmsnorm_f16_block, rows, "kaio_rmsnorm_f16_block")                            \
  X(rmsnorm_bf16_block, rows, "kaio_rmsnorm_bf16_block")                          \
  X(softmax_f32_warp, rows, "kaio_softmax_f32_warp")                              \
  X(softmax_f16_warp, rows, "kaio_softmax_f16_warp")                              \
  X(softmax_bf16_warp, rows, "kaio_softmax_bf16_warp")                            \
  X(softmax_f32_block, rows, "kaio_softmax_f32_block")                            \
  X(softmax_f16_block, rows, "kaio_softmax_f16_block")                            \
  X(softmax_bf16_block, rows, "kaio_softmax_bf16_block")
// clang-format on

enum class KernelId : int {
#define KAIO_KERNEL_ENUM(id, module, name) id,
  KAIO_BUILTIN_KERNELS(KAIO_KERNEL_ENUM)
#undef KAIO_KERNEL_ENUM
  count
};

struct BuiltinKernel {
  ModuleId module;
  const char *name;
};

const BuiltinKernel &builtin_kernel(KernelId id);
const char *module_name(ModuleId id);

// The f32/f16/bf16 variant of a kernel family whose f32 member is `first`.
inline KernelId with_dtype_offset(KernelId first, int offset) {
  return static_cast<KernelId>(static_cast<int>(first) + offset);
}

}  // namespace kaio
