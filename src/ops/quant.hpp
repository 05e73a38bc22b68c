// Quantized matmul plans: INT8 W8A8 (quant_int8.cpp), INT4 W4A16 in the
// GPTQ layout and the fused INT4 QKV projection (quant_int4.cpp). A plan is
// what an op handle stores; one-shot calls build one on the stack.
#pragma once

#include <kaio/kaio.h>

#include <string>

#include "ops/matmul.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {

enum class QuantKind { int8, int4, qkv_int4, qkv_int8 };

struct QuantPlan : PlanBase {
  QuantKind kind = QuantKind::int8;
  kaio_dtype in_dtype = KAIO_DTYPE_INVALID;   // int4: activations and scales
  kaio_dtype out_dtype = KAIO_DTYPE_INVALID;
  int64_t m = 0, k = 0;
  int64_t n[3] = {0, 0, 0};                   // one per projection
  int nproj = 1;
  float alpha = 1.0f;                         // int8
  kaio_matmul_variant variant = KAIO_MATMUL_AUTO;
  bool tma = false;                           // int8 on the Hopper (wgmma) kernel
  unsigned box_a[2] = {0, 0}, box_b[2] = {0, 0};
  int64_t group = 0;                          // int4
  kaio_int4_format format = KAIO_INT4_GPTQ;
  uint32_t zeros_offset = 0;
  Launch kernel;                              // the int8 kernel or the int4 decode kernel
  // int4 with M > 16 on sm_90a: one kernel that dequantizes in registers for
  // wgmma (ptx/gen_quant_int4_sm90.py), no workspace; kernel is that kernel.
  bool fused = false;
  // int4 prefill elsewhere (op handles, M > 16): dequantize into workspace,
  // then matmul.
  bool prefill = false;
  Launch dequant;
  MatmulPlan matmul;
  Workspace workspace;

  kaio_status plan(const char *caller, kaio_device *device);
  // Tensors: int8 {A, B, sa, sb, C}, int4 {A, qweight, qzeros, scales, C},
  // qkv_int4 {x, (qweight, qzeros, scales) x 3, out x 3}, qkv_int8
  // {x, (w, scale) x 3, out x 3}.
  kaio_status run(const char *caller, kaio_stream *stream, const kaio_tensor *tensors,
                  size_t count) const;
};

// "int4 M=64 N=4096 K=4096 f16": a plan's line in KAIO_LOG.
std::string quant_subject(const QuantPlan &plan);

kaio_status plan_int8(const char *caller, kaio_device *device, QuantPlan *plan);
kaio_status run_int8(const char *caller, const kaio_device *device, const QuantPlan &plan,
                     kaio_stream *stream, const kaio_tensor *tensors);

// allow_prefill: the plan is prepared (an op handle's): it may own a workspace.
kaio_status plan_int4(const char *caller, kaio_device *device, QuantPlan *plan,
                      bool allow_prefill);
kaio_status run_int4(const char *caller, const kaio_device *device, const QuantPlan &plan,
                     kaio_stream *stream, const kaio_tensor *tensors);

// Fused QKV with s8 K x N weights and f16 activations (W8A16).
kaio_status plan_qkv_int8(const char *caller, kaio_device *device, QuantPlan *plan);
kaio_status run_qkv_int8(const char *caller, const kaio_device *device, const QuantPlan &plan,
                         kaio_stream *stream, const kaio_tensor *tensors);

kaio_status repack_kaio_int4(const char *caller, kaio_stream *stream, const kaio_tensor *src,
                             const kaio_tensor *dst);

// Tensor counts of the launch lists.
constexpr size_t kInt8Tensors = 5;   // {A, B, sa, sb, C}
constexpr size_t kInt4Tensors = 5;   // {A, qweight, qzeros, scales, C}
constexpr size_t kQkvTensors = 13;   // {x, (qweight, qzeros, scales) x 3, out x 3}
constexpr size_t kQkv8Tensors = 10;  // {x, (w, scale) x 3, out x 3}

// A view with a NULL buffer: an absent optional input.
inline bool absent(const kaio_tensor &t) { return t.buffer == nullptr; }

// check_view plus: the start on an `align`-byte boundary and the row stride
// a multiple of `stride_elems` (KAIO_ERROR_MISALIGNED otherwise).
kaio_status check_aligned_view(const char *caller, const char *arg, const kaio_tensor *t,
                               const kaio_device *device, unsigned align, int64_t stride_elems,
                               const char *why, CheckedView *out);

}  // namespace kaio
