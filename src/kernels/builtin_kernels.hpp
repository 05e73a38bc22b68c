// The kernels libkaio ships, by module. Modules are the PTX files in ptx/,
// embedded at build time; each loads once per device, on first use.
#pragma once

#include <cstddef>

#include "driver/cuda_abi.hpp"

namespace kaio {

enum class ModuleId : int {
  elementwise,
  rows,
  convert,
  matmul_sm80_sync,
  matmul_sm80_async,
  matmul_gemv,
  matmul_sm90,
  attention_fwd_sm80,
  attention_bwd_sm80,
  attention_f32,
  count
};

// X(id, module, entry name). Per-dtype variants are consecutive in the order
// f32, f16, bf16 so callers index them with float_variant(); matmul kernels
// are ordered variant (sync, async), input dtype (f16, bf16), then the
// transposes of A and B (nn, nt, tn, tt). Attention kernels: dtype (f16,
// bf16), then head dim (32, 64, 96, 128[, 256]).
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
  X(softmax_bf16_block, rows, "kaio_softmax_bf16_block")                          \
  X(convert_f32_f16, convert, "kaio_convert_f32_f16")                             \
  X(convert_f32_bf16, convert, "kaio_convert_f32_bf16")                           \
  X(matmul_sm80_sync_f16_nn, matmul_sm80_sync, "kaio_matmul_sm80_sync_f16_nn") \
  X(matmul_sm80_sync_f16_nt, matmul_sm80_sync, "kaio_matmul_sm80_sync_f16_nt") \
  X(matmul_sm80_sync_f16_tn, matmul_sm80_sync, "kaio_matmul_sm80_sync_f16_tn") \
  X(matmul_sm80_sync_f16_tt, matmul_sm80_sync, "kaio_matmul_sm80_sync_f16_tt") \
  X(matmul_sm80_sync_bf16_nn, matmul_sm80_sync, "kaio_matmul_sm80_sync_bf16_nn") \
  X(matmul_sm80_sync_bf16_nt, matmul_sm80_sync, "kaio_matmul_sm80_sync_bf16_nt") \
  X(matmul_sm80_sync_bf16_tn, matmul_sm80_sync, "kaio_matmul_sm80_sync_bf16_tn") \
  X(matmul_sm80_sync_bf16_tt, matmul_sm80_sync, "kaio_matmul_sm80_sync_bf16_tt") \
  X(matmul_sm80_async_f16_nn, matmul_sm80_async, "kaio_matmul_sm80_async_f16_nn") \
  X(matmul_sm80_async_f16_nt, matmul_sm80_async, "kaio_matmul_sm80_async_f16_nt") \
  X(matmul_sm80_async_f16_tn, matmul_sm80_async, "kaio_matmul_sm80_async_f16_tn") \
  X(matmul_sm80_async_f16_tt, matmul_sm80_async, "kaio_matmul_sm80_async_f16_tt") \
  X(matmul_sm80_async_bf16_nn, matmul_sm80_async, "kaio_matmul_sm80_async_bf16_nn") \
  X(matmul_sm80_async_bf16_nt, matmul_sm80_async, "kaio_matmul_sm80_async_bf16_nt") \
  X(matmul_sm80_async_bf16_tn, matmul_sm80_async, "kaio_matmul_sm80_async_bf16_tn") \
  X(matmul_sm80_async_bf16_tt, matmul_sm80_async, "kaio_matmul_sm80_async_bf16_tt") \
  X(matmul_gemv_f16_m1, matmul_gemv, "kaio_matmul_gemv_f16_m1") \
  X(matmul_gemv_f16_m2, matmul_gemv, "kaio_matmul_gemv_f16_m2") \
  X(matmul_gemv_f16_m4, matmul_gemv, "kaio_matmul_gemv_f16_m4") \
  X(matmul_gemv_f16_m8, matmul_gemv, "kaio_matmul_gemv_f16_m8") \
  X(matmul_gemv_f16_m16, matmul_gemv, "kaio_matmul_gemv_f16_m16") \
  X(matmul_gemv_bf16_m1, matmul_gemv, "kaio_matmul_gemv_bf16_m1") \
  X(matmul_gemv_bf16_m2, matmul_gemv, "kaio_matmul_gemv_bf16_m2") \
  X(matmul_gemv_bf16_m4, matmul_gemv, "kaio_matmul_gemv_bf16_m4") \
  X(matmul_gemv_bf16_m8, matmul_gemv, "kaio_matmul_gemv_bf16_m8") \
  X(matmul_gemv_bf16_m16, matmul_gemv, "kaio_matmul_gemv_bf16_m16") \
  X(matmul_sm90_f16_nn, matmul_sm90, "kaio_matmul_sm90_f16_nn") \
  X(matmul_sm90_f16_nt, matmul_sm90, "kaio_matmul_sm90_f16_nt") \
  X(matmul_sm90_f16_tn, matmul_sm90, "kaio_matmul_sm90_f16_tn") \
  X(matmul_sm90_f16_tt, matmul_sm90, "kaio_matmul_sm90_f16_tt") \
  X(matmul_sm90_bf16_nn, matmul_sm90, "kaio_matmul_sm90_bf16_nn") \
  X(matmul_sm90_bf16_nt, matmul_sm90, "kaio_matmul_sm90_bf16_nt") \
  X(matmul_sm90_bf16_tn, matmul_sm90, "kaio_matmul_sm90_bf16_tn") \
  X(matmul_sm90_bf16_tt, matmul_sm90, "kaio_matmul_sm90_bf16_tt") \
  X(attn_fwd_f16_d32, attention_fwd_sm80, "kaio_attn_fwd_f16_d32") \
  X(attn_fwd_f16_d64, attention_fwd_sm80, "kaio_attn_fwd_f16_d64") \
  X(attn_fwd_f16_d96, attention_fwd_sm80, "kaio_attn_fwd_f16_d96") \
  X(attn_fwd_f16_d128, attention_fwd_sm80, "kaio_attn_fwd_f16_d128") \
  X(attn_fwd_f16_d256, attention_fwd_sm80, "kaio_attn_fwd_f16_d256") \
  X(attn_fwd_bf16_d32, attention_fwd_sm80, "kaio_attn_fwd_bf16_d32") \
  X(attn_fwd_bf16_d64, attention_fwd_sm80, "kaio_attn_fwd_bf16_d64") \
  X(attn_fwd_bf16_d96, attention_fwd_sm80, "kaio_attn_fwd_bf16_d96") \
  X(attn_fwd_bf16_d128, attention_fwd_sm80, "kaio_attn_fwd_bf16_d128") \
  X(attn_fwd_bf16_d256, attention_fwd_sm80, "kaio_attn_fwd_bf16_d256") \
  X(attn_bwd_pre_f16, attention_bwd_sm80, "kaio_attn_bwd_pre_f16") \
  X(attn_bwd_pre_bf16, attention_bwd_sm80, "kaio_attn_bwd_pre_bf16") \
  X(attn_bwd_dq_f16_d32, attention_bwd_sm80, "kaio_attn_bwd_dq_f16_d32") \
  X(attn_bwd_dq_f16_d64, attention_bwd_sm80, "kaio_attn_bwd_dq_f16_d64") \
  X(attn_bwd_dq_f16_d96, attention_bwd_sm80, "kaio_attn_bwd_dq_f16_d96") \
  X(attn_bwd_dq_f16_d128, attention_bwd_sm80, "kaio_attn_bwd_dq_f16_d128") \
  X(attn_bwd_dq_bf16_d32, attention_bwd_sm80, "kaio_attn_bwd_dq_bf16_d32") \
  X(attn_bwd_dq_bf16_d64, attention_bwd_sm80, "kaio_attn_bwd_dq_bf16_d64") \
  X(attn_bwd_dq_bf16_d96, attention_bwd_sm80, "kaio_attn_bwd_dq_bf16_d96") \
  X(attn_bwd_dq_bf16_d128, attention_bwd_sm80, "kaio_attn_bwd_dq_bf16_d128") \
  X(attn_bwd_dkdv_f16_d32, attention_bwd_sm80, "kaio_attn_bwd_dkdv_f16_d32") \
  X(attn_bwd_dkdv_f16_d64, attention_bwd_sm80, "kaio_attn_bwd_dkdv_f16_d64") \
  X(attn_bwd_dkdv_f16_d96, attention_bwd_sm80, "kaio_attn_bwd_dkdv_f16_d96") \
  X(attn_bwd_dkdv_f16_d128, attention_bwd_sm80, "kaio_attn_bwd_dkdv_f16_d128") \
  X(attn_bwd_dkdv_bf16_d32, attention_bwd_sm80, "kaio_attn_bwd_dkdv_bf16_d32") \
  X(attn_bwd_dkdv_bf16_d64, attention_bwd_sm80, "kaio_attn_bwd_dkdv_bf16_d64") \
  X(attn_bwd_dkdv_bf16_d96, attention_bwd_sm80, "kaio_attn_bwd_dkdv_bf16_d96") \
  X(attn_bwd_dkdv_bf16_d128, attention_bwd_sm80, "kaio_attn_bwd_dkdv_bf16_d128") \
  X(attn_f32_fwd_d32, attention_f32, "kaio_attn_f32_fwd_d32") \
  X(attn_f32_fwd_d64, attention_f32, "kaio_attn_f32_fwd_d64") \
  X(attn_f32_fwd_d128, attention_f32, "kaio_attn_f32_fwd_d128") \
  X(attn_f32_fwd_d256, attention_f32, "kaio_attn_f32_fwd_d256") \
  X(attn_f32_dq_d32, attention_f32, "kaio_attn_f32_dq_d32") \
  X(attn_f32_dq_d64, attention_f32, "kaio_attn_f32_dq_d64") \
  X(attn_f32_dq_d128, attention_f32, "kaio_attn_f32_dq_d128") \
  X(attn_f32_dq_d256, attention_f32, "kaio_attn_f32_dq_d256") \
  X(attn_f32_dkdv_d32, attention_f32, "kaio_attn_f32_dkdv_d32") \
  X(attn_f32_dkdv_d64, attention_f32, "kaio_attn_f32_dkdv_d64") \
  X(attn_f32_dkdv_d128, attention_f32, "kaio_attn_f32_dkdv_d128") \
  X(attn_f32_dkdv_d256, attention_f32, "kaio_attn_f32_dkdv_d256") \
  X(attn_fwd_m128_f16_d32, attention_fwd_sm80, "kaio_attn_fwd_m128_f16_d32") \
  X(attn_fwd_m128_f16_d64, attention_fwd_sm80, "kaio_attn_fwd_m128_f16_d64") \
  X(attn_fwd_m128_f16_d96, attention_fwd_sm80, "kaio_attn_fwd_m128_f16_d96") \
  X(attn_fwd_m128_f16_d128, attention_fwd_sm80, "kaio_attn_fwd_m128_f16_d128") \
  X(attn_fwd_m128_bf16_d32, attention_fwd_sm80, "kaio_attn_fwd_m128_bf16_d32") \
  X(attn_fwd_m128_bf16_d64, attention_fwd_sm80, "kaio_attn_fwd_m128_bf16_d64") \
  X(attn_fwd_m128_bf16_d96, attention_fwd_sm80, "kaio_attn_fwd_m128_bf16_d96") \
  X(attn_fwd_m128_bf16_d128, attention_fwd_sm80, "kaio_attn_fwd_m128_bf16_d128")
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

// A resolved kernel and what its PTX annotations say about launching it:
// `// kaio-shared-bytes: <entry> <bytes>`,
// `// kaio-launch: <entry> block=<threads> cols_per_block=<columns>` and
// `// kaio-tma: <entry> tmap_a|tmap_b ... box=<inner>,<outer> ...`. Read once,
// when the kernel is resolved, so launches never parse PTX.
struct BuiltinFunction {
  cu::CUfunction function = nullptr;
  unsigned shared_bytes = 0;
  unsigned block = 0;           // 0 when not annotated
  unsigned cols_per_block = 0;  // 0 when not annotated
  unsigned box_a[2] = {0, 0};   // TMA boxes; 0 when not annotated
  unsigned box_b[2] = {0, 0};
};

const BuiltinKernel &builtin_kernel(KernelId id);
const char *module_name(ModuleId id);

// The f32/f16/bf16 variant of a kernel family whose f32 member is `first`.
inline KernelId with_dtype_offset(KernelId first, int offset) {
  return static_cast<KernelId>(static_cast<int>(first) + offset);
}

}  // namespace kaio
