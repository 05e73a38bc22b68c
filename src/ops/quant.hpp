// Quantized matmul plans, one per op: INT8 W8A8, INT4 W4A16 (and its fused
// QKV projection), INT8-weight QKV. A plan is what an op handle stores;
// one-shot calls build one on the stack.
#pragma once

#include <kaio/kaio.h>

#include <string>

#include "ops/matmul.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {

// INT8 W8A8 matmul (quant_int8.cpp). Tensors: {A, B, sa, sb, C}.
struct Int8Plan : PlanBase {
  kaio_dtype out_dtype = KAIO_DTYPE_INVALID;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  kaio_matmul_variant variant = KAIO_MATMUL_AUTO;
  bool tma = false;  // the Hopper (wgmma) kernel
  unsigned box_a[2] = {0, 0}, box_b[2] = {0, 0};
  Launch kernel;

  kaio_status plan(kaio_device *device);
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// INT4 W4A16 matmul in the GPTQ layout, and the fused INT4 QKV projection
// (quant_int4.cpp). Tensors: {A, qweight, qzeros, scales, C}, or for QKV
// {x, (qweight, qzeros, scales) x 3, out x 3}.
struct Int4Plan : PlanBase {
  bool qkv = false;                           // three projections
  kaio_dtype in_dtype = KAIO_DTYPE_INVALID;   // activations and scales
  kaio_dtype out_dtype = KAIO_DTYPE_INVALID;
  int64_t m = 0, k = 0;
  int64_t n[3] = {0, 0, 0};                   // one per projection
  int nproj = 1;
  int64_t group = 0;
  kaio_int4_format format = KAIO_INT4_GPTQ;
  uint32_t zeros_offset = 0;
  Launch kernel;                              // the decode kernel (or the fused one)
  // M > 16 on sm_90a: one kernel that dequantizes in registers for wgmma
  // (ptx/gen_quant_int4_sm90.py), no workspace; kernel is that kernel, fed
  // by TMA maps with these boxes.
  bool fused = false;
  unsigned box_a[2] = {0, 0}, box_b[2] = {0, 0};
  // Prefill elsewhere (prepared plans, M > 16): dequantize into the
  // workspace, then matmul.
  bool prefill = false;
  Launch dequant;
  MatmulPlan matmul;
  Workspace workspace;

  kaio_status plan(kaio_device *device);
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// Fused QKV with s8 K x N weights and f16 activations, W8A16
// (quant_qkv_int8.cpp). Tensors: {x, (w, scale) x 3, out x 3}.
struct QkvInt8Plan : PlanBase {
  kaio_dtype out_dtype = KAIO_DTYPE_INVALID;
  int64_t m = 0, k = 0;
  int64_t n[3] = {0, 0, 0};
  Launch kernel;

  kaio_status plan(kaio_device *device);
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// "int4 M=64 N=4096 K=4096 f16": a plan's line in KAIO_LOG (n: nproj
// projections).
std::string quant_subject(const char *kind, int64_t m, const int64_t *n, int nproj, int64_t k,
                          kaio_dtype dtype);

kaio_status repack_kaio_int4(kaio_stream *stream, const kaio_tensor *src, const kaio_tensor *dst);

// Tensor counts of the launch lists.
constexpr size_t kInt8Tensors = 5;   // {A, B, sa, sb, C}
constexpr size_t kInt4Tensors = 5;   // {A, qweight, qzeros, scales, C}
constexpr size_t kQkvTensors = 13;   // {x, (qweight, qzeros, scales) x 3, out x 3}
constexpr size_t kQkv8Tensors = 10;  // {x, (w, scale) x 3, out x 3}

// A view with a NULL buffer: an absent optional input.
inline bool absent(const kaio_tensor &t) { return t.buffer == nullptr; }

// check_view plus: the start on an `align`-byte boundary and the row stride
// a multiple of `stride_elems` (KAIO_ERROR_MISALIGNED otherwise).
kaio_status check_aligned_view(const char *arg, const kaio_tensor *t,
                               const kaio_device *device, unsigned align, int64_t stride_elems,
                               const char *why, CheckedView *out);

}  // namespace kaio
