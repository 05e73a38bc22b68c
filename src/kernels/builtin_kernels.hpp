// The kernels libkaio ships, by module. Modules are the PTX files the build
// generates from ptx/ (ptx/meson.build), embedded; each loads once per device, on first use.
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
  kquant_quantize,
  kquant_dequant,
  kquant_stream_sm90,
  quant_int8,
  quant_int4,
  attention_fwd_sm80,
  attention_bwd_sm80,
  attention_f32,
  attention_f32_tc,
  attention_fwd_sm90,
  attention_bwd_sm90,
  quant_int4_sm90,
  count
};

// X(id, module, entry name). Per-dtype variants are consecutive in the order
// f32, f16, bf16 so callers index them with float_variant(); matmul kernels
// are ordered variant (sync, async), input dtype (f16, bf16), then the
// transposes of A and B (nn, nt, tn, tt). k-quant kernels are ordered by
// format (q8_0, q4_k, q5_k, q6_k), then mode (ggml, candle) or M bucket;
// the tensor-core matvecs by dtype (mma: f16, bf16; stream: f32, f16, bf16,
// float_variant's order), then format. Attention
// kernels: dtype (f16, bf16), then head dim (32, 64, 96, 128[, 256]).
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
  X(splitk_reduce, convert, "kaio_splitk_reduce")                                 \
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
  X(matmul_sm90_n128_f16_nn, matmul_sm90, "kaio_matmul_sm90_f16_nn_n128") \
  X(matmul_sm90_n128_f16_nt, matmul_sm90, "kaio_matmul_sm90_f16_nt_n128") \
  X(matmul_sm90_n128_f16_tn, matmul_sm90, "kaio_matmul_sm90_f16_tn_n128") \
  X(matmul_sm90_n128_f16_tt, matmul_sm90, "kaio_matmul_sm90_f16_tt_n128") \
  X(matmul_sm90_n128_bf16_nn, matmul_sm90, "kaio_matmul_sm90_bf16_nn_n128") \
  X(matmul_sm90_n128_bf16_nt, matmul_sm90, "kaio_matmul_sm90_bf16_nt_n128") \
  X(matmul_sm90_n128_bf16_tn, matmul_sm90, "kaio_matmul_sm90_bf16_tn_n128") \
  X(matmul_sm90_n128_bf16_tt, matmul_sm90, "kaio_matmul_sm90_bf16_tt_n128") \
  X(kq_quantize_q8_0_ggml, kquant_quantize, "kaio_kq_quantize_q8_0_ggml") \
  X(kq_quantize_q8_0_candle, kquant_quantize, "kaio_kq_quantize_q8_0_candle") \
  X(kq_quantize_q4_k_ggml, kquant_quantize, "kaio_kq_quantize_q4_k_ggml") \
  X(kq_quantize_q4_k_candle, kquant_quantize, "kaio_kq_quantize_q4_k_candle") \
  X(kq_quantize_q5_k_ggml, kquant_quantize, "kaio_kq_quantize_q5_k_ggml") \
  X(kq_quantize_q5_k_candle, kquant_quantize, "kaio_kq_quantize_q5_k_candle") \
  X(kq_quantize_q6_k_ggml, kquant_quantize, "kaio_kq_quantize_q6_k_ggml") \
  X(kq_quantize_q6_k_candle, kquant_quantize, "kaio_kq_quantize_q6_k_candle") \
  X(kq_dequantize_q8_0, kquant_dequant, "kaio_kq_dequantize_q8_0") \
  X(kq_dequantize_q4_k, kquant_dequant, "kaio_kq_dequantize_q4_k") \
  X(kq_dequantize_q5_k, kquant_dequant, "kaio_kq_dequantize_q5_k") \
  X(kq_dequantize_q6_k, kquant_dequant, "kaio_kq_dequantize_q6_k") \
  X(kq_matvec_q8_0_m1, kquant_dequant, "kaio_kq_matvec_q8_0_m1") \
  X(kq_matvec_q8_0_m2, kquant_dequant, "kaio_kq_matvec_q8_0_m2") \
  X(kq_matvec_q8_0_m4, kquant_dequant, "kaio_kq_matvec_q8_0_m4") \
  X(kq_matvec_q8_0_m8, kquant_dequant, "kaio_kq_matvec_q8_0_m8") \
  X(kq_matvec_q4_k_m1, kquant_dequant, "kaio_kq_matvec_q4_k_m1") \
  X(kq_matvec_q4_k_m2, kquant_dequant, "kaio_kq_matvec_q4_k_m2") \
  X(kq_matvec_q4_k_m4, kquant_dequant, "kaio_kq_matvec_q4_k_m4") \
  X(kq_matvec_q4_k_m8, kquant_dequant, "kaio_kq_matvec_q4_k_m8") \
  X(kq_matvec_q5_k_m1, kquant_dequant, "kaio_kq_matvec_q5_k_m1") \
  X(kq_matvec_q5_k_m2, kquant_dequant, "kaio_kq_matvec_q5_k_m2") \
  X(kq_matvec_q5_k_m4, kquant_dequant, "kaio_kq_matvec_q5_k_m4") \
  X(kq_matvec_q5_k_m8, kquant_dequant, "kaio_kq_matvec_q5_k_m8") \
  X(kq_matvec_q6_k_m1, kquant_dequant, "kaio_kq_matvec_q6_k_m1") \
  X(kq_matvec_q6_k_m2, kquant_dequant, "kaio_kq_matvec_q6_k_m2") \
  X(kq_matvec_q6_k_m4, kquant_dequant, "kaio_kq_matvec_q6_k_m4") \
  X(kq_matvec_q6_k_m8, kquant_dequant, "kaio_kq_matvec_q6_k_m8") \
  X(matmul_int8_sm80_async, quant_int8, "kaio_matmul_int8_sm80_async") \
  X(int4_gemv_f16_m8, quant_int4, "kaio_int4_gemv_f16_m8") \
  X(int4_gemv_f16_m16, quant_int4, "kaio_int4_gemv_f16_m16") \
  X(int4_gemv_bf16_m8, quant_int4, "kaio_int4_gemv_bf16_m8") \
  X(int4_gemv_bf16_m16, quant_int4, "kaio_int4_gemv_bf16_m16") \
  X(int4_dequant_f16, quant_int4, "kaio_int4_dequant_f16") \
  X(int4_dequant_bf16, quant_int4, "kaio_int4_dequant_bf16") \
  X(int4_transpose_u32, quant_int4, "kaio_int4_transpose_u32") \
  X(int8w_gemv_f16_m8, quant_int4, "kaio_int8w_gemv_f16_m8") \
  X(int8w_gemv_f16_m16, quant_int4, "kaio_int8w_gemv_f16_m16") \
  X(int4_gemv_f16_m8_g128, quant_int4, "kaio_int4_gemv_f16_m8_g128") \
  X(int4_gemv_bf16_m8_g128, quant_int4, "kaio_int4_gemv_bf16_m8_g128") \
  X(matmul_int8_sm90, matmul_sm90, "kaio_matmul_sm90_s8_nt") \
  X(matmul_int8_sm90_n128, matmul_sm90, "kaio_matmul_sm90_s8_nt_n128") \
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
  X(attn_f32_rowsum, attention_f32_tc, "kaio_attn_f32_rowsum") \
  X(attn_f32x3_fwd_d32, attention_f32_tc, "kaio_attn_f32x3_fwd_d32") \
  X(attn_f32x3_fwd_d64, attention_f32_tc, "kaio_attn_f32x3_fwd_d64") \
  X(attn_f32x3_fwd_d128, attention_f32_tc, "kaio_attn_f32x3_fwd_d128") \
  X(attn_f32x3_dq_d32, attention_f32_tc, "kaio_attn_f32x3_dq_d32") \
  X(attn_f32x3_dq_d64, attention_f32_tc, "kaio_attn_f32x3_dq_d64") \
  X(attn_f32x3_dq_d128, attention_f32_tc, "kaio_attn_f32x3_dq_d128") \
  X(attn_f32x3_dkdv_d32, attention_f32_tc, "kaio_attn_f32x3_dkdv_d32") \
  X(attn_f32x3_dkdv_d64, attention_f32_tc, "kaio_attn_f32x3_dkdv_d64") \
  X(attn_f32x3_dkdv_d128, attention_f32_tc, "kaio_attn_f32x3_dkdv_d128") \
  X(attn_fwd_m128_f16_d32, attention_fwd_sm80, "kaio_attn_fwd_m128_f16_d32") \
  X(attn_fwd_m128_f16_d64, attention_fwd_sm80, "kaio_attn_fwd_m128_f16_d64") \
  X(attn_fwd_m128_f16_d96, attention_fwd_sm80, "kaio_attn_fwd_m128_f16_d96") \
  X(attn_fwd_m128_f16_d128, attention_fwd_sm80, "kaio_attn_fwd_m128_f16_d128") \
  X(attn_fwd_m128_bf16_d32, attention_fwd_sm80, "kaio_attn_fwd_m128_bf16_d32") \
  X(attn_fwd_m128_bf16_d64, attention_fwd_sm80, "kaio_attn_fwd_m128_bf16_d64") \
  X(attn_fwd_m128_bf16_d96, attention_fwd_sm80, "kaio_attn_fwd_m128_bf16_d96") \
  X(attn_fwd_m128_bf16_d128, attention_fwd_sm80, "kaio_attn_fwd_m128_bf16_d128") \
  X(kq_mma_q4_k_f16, kquant_dequant, "kaio_kq_mma_q4_k_f16") \
  X(kq_mma_q5_k_f16, kquant_dequant, "kaio_kq_mma_q5_k_f16") \
  X(kq_mma_q6_k_f16, kquant_dequant, "kaio_kq_mma_q6_k_f16") \
  X(kq_mma_q4_k_bf16, kquant_dequant, "kaio_kq_mma_q4_k_bf16") \
  X(kq_mma_q5_k_bf16, kquant_dequant, "kaio_kq_mma_q5_k_bf16") \
  X(kq_mma_q6_k_bf16, kquant_dequant, "kaio_kq_mma_q6_k_bf16") \
  X(int4_gemv_f16_m8_g128_w8, quant_int4, "kaio_int4_gemv_f16_m8_g128_w8") \
  X(int4_gemv_f16_m8_g128_w4, quant_int4, "kaio_int4_gemv_f16_m8_g128_w4") \
  X(int4_gemv_f16_m16_g128, quant_int4, "kaio_int4_gemv_f16_m16_g128") \
  X(int4_gemv_f16_m16_g128_w4, quant_int4, "kaio_int4_gemv_f16_m16_g128_w4") \
  X(int4_gemv_bf16_m8_g128_w8, quant_int4, "kaio_int4_gemv_bf16_m8_g128_w8") \
  X(int4_gemv_bf16_m8_g128_w4, quant_int4, "kaio_int4_gemv_bf16_m8_g128_w4") \
  X(int4_gemv_bf16_m16_g128, quant_int4, "kaio_int4_gemv_bf16_m16_g128") \
  X(int4_gemv_bf16_m16_g128_w4, quant_int4, "kaio_int4_gemv_bf16_m16_g128_w4") \
  X(kq_mma_q4_k_f16_w4, kquant_dequant, "kaio_kq_mma_q4_k_f16_w4") \
  X(kq_mma_q5_k_f16_w4, kquant_dequant, "kaio_kq_mma_q5_k_f16_w4") \
  X(kq_mma_q6_k_f16_w4, kquant_dequant, "kaio_kq_mma_q6_k_f16_w4") \
  X(kq_mma_q4_k_bf16_w4, kquant_dequant, "kaio_kq_mma_q4_k_bf16_w4") \
  X(kq_mma_q5_k_bf16_w4, kquant_dequant, "kaio_kq_mma_q5_k_bf16_w4") \
  X(kq_mma_q6_k_bf16_w4, kquant_dequant, "kaio_kq_mma_q6_k_bf16_w4") \
  X(kq_stream_q8_0_f32, kquant_stream_sm90, "kaio_kq_stream_q8_0_f32") \
  X(kq_stream_q4_k_f32, kquant_stream_sm90, "kaio_kq_stream_q4_k_f32") \
  X(kq_stream_q5_k_f32, kquant_stream_sm90, "kaio_kq_stream_q5_k_f32") \
  X(kq_stream_q6_k_f32, kquant_stream_sm90, "kaio_kq_stream_q6_k_f32") \
  X(kq_stream_q8_0_f16, kquant_stream_sm90, "kaio_kq_stream_q8_0_f16") \
  X(kq_stream_q4_k_f16, kquant_stream_sm90, "kaio_kq_stream_q4_k_f16") \
  X(kq_stream_q5_k_f16, kquant_stream_sm90, "kaio_kq_stream_q5_k_f16") \
  X(kq_stream_q6_k_f16, kquant_stream_sm90, "kaio_kq_stream_q6_k_f16") \
  X(kq_stream_q8_0_bf16, kquant_stream_sm90, "kaio_kq_stream_q8_0_bf16") \
  X(kq_stream_q4_k_bf16, kquant_stream_sm90, "kaio_kq_stream_q4_k_bf16") \
  X(kq_stream_q5_k_bf16, kquant_stream_sm90, "kaio_kq_stream_q5_k_bf16") \
  X(kq_stream_q6_k_bf16, kquant_stream_sm90, "kaio_kq_stream_q6_k_bf16") \
  X(int4_gemv_f16_m16_g128_w8, quant_int4, "kaio_int4_gemv_f16_m16_g128_w8") \
  X(int4_gemv_bf16_m16_g128_w8, quant_int4, "kaio_int4_gemv_bf16_m16_g128_w8") \
  X(int4_gemv_f16_m16_g128_w4s2, quant_int4, "kaio_int4_gemv_f16_m16_g128_w4s2") \
  X(int4_gemv_bf16_m16_g128_w4s2, quant_int4, "kaio_int4_gemv_bf16_m16_g128_w4s2") \
  X(attn_fwd_sm90_f16_d64, attention_fwd_sm90, "kaio_attn_fwd_sm90_f16_d64") \
  X(attn_fwd_sm90_f16_d128, attention_fwd_sm90, "kaio_attn_fwd_sm90_f16_d128") \
  X(attn_fwd_sm90_bf16_d64, attention_fwd_sm90, "kaio_attn_fwd_sm90_bf16_d64") \
  X(attn_fwd_sm90_bf16_d128, attention_fwd_sm90, "kaio_attn_fwd_sm90_bf16_d128") \
  X(attn_bwd_dq_sm90_f16_d64, attention_bwd_sm90, "kaio_attn_bwd_dq_sm90_f16_d64") \
  X(attn_bwd_dq_sm90_f16_d128, attention_bwd_sm90, "kaio_attn_bwd_dq_sm90_f16_d128") \
  X(attn_bwd_dq_sm90_bf16_d64, attention_bwd_sm90, "kaio_attn_bwd_dq_sm90_bf16_d64") \
  X(attn_bwd_dq_sm90_bf16_d128, attention_bwd_sm90, "kaio_attn_bwd_dq_sm90_bf16_d128") \
  X(attn_bwd_dkdv_sm90_f16_d64, attention_bwd_sm90, "kaio_attn_bwd_dkdv_sm90_f16_d64") \
  X(attn_bwd_dkdv_sm90_f16_d128, attention_bwd_sm90, "kaio_attn_bwd_dkdv_sm90_f16_d128") \
  X(attn_bwd_dkdv_sm90_bf16_d64, attention_bwd_sm90, "kaio_attn_bwd_dkdv_sm90_bf16_d64") \
  X(attn_bwd_dkdv_sm90_bf16_d128, attention_bwd_sm90, "kaio_attn_bwd_dkdv_sm90_bf16_d128") \
  X(int4_mm_sm90_f16_m256, quant_int4_sm90, "kaio_int4_mm_sm90_f16_m256") \
  X(int4_mm_sm90_f16_m128, quant_int4_sm90, "kaio_int4_mm_sm90_f16_m128") \
  X(int4_mm_sm90_bf16_m256, quant_int4_sm90, "kaio_int4_mm_sm90_bf16_m256") \
  X(int4_mm_sm90_bf16_m128, quant_int4_sm90, "kaio_int4_mm_sm90_bf16_m128") \
  X(int4_mm_sm90_f16_m256_k2, quant_int4_sm90, "kaio_int4_mm_sm90_f16_m256_k2") \
  X(int4_mm_sm90_bf16_m256_k2, quant_int4_sm90, "kaio_int4_mm_sm90_bf16_m256_k2")
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
// `// kaio-launch: <entry> block=<threads> cols_per_block=<columns>
// shared_fixed=<bytes> ring_stage=<bytes> ring_stages=<count>` (a kernel
// whose launch adds a sized tail to shared_fixed bytes of dynamic shared
// memory, up to shared_bytes, and a ring of up to ring_stages stages of
// ring_stage bytes, its depth a kernel parameter) and
// `// kaio-tma: <entry> <param> ... box=<inner>,<outer> ...`: box_a is the
// box of the entry's first tensor map (tmap_a; the attention kernels' tmap_q,
// whose box tmap_do shares; the int4 kernel's tmap_x), box_b of its second
// (tmap_b; tmap_k, whose box tmap_v shares; tmap_qw).
// Read once, when the kernel is resolved, so launches never parse PTX.
struct BuiltinFunction {
  cu::CUfunction function = nullptr;
  unsigned shared_bytes = 0;
  unsigned block = 0;           // 0 when not annotated
  unsigned cols_per_block = 0;  // 0 when not annotated
  unsigned shared_fixed = 0;    // 0 when not annotated
  unsigned ring_stage = 0;      // 0 when not annotated
  unsigned ring_stages = 0;     // 0 when not annotated
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
