// Tensor-core matmul, C = alpha·op(A)·op(B) + beta·C: the sm_80 mma.sync
// kernels (matmul.cpp), the decode kernel, and the sm_90a wgmma + TMA path
// (matmul_sm90.cpp). Other families nest a MatmulPlan for their products.
#pragma once

#include <kaio/kaio.h>

#include <array>

#include "ops/plan.hpp"
#include "ops/tensor_map.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {

struct MatmulPlan : PlanBase {
  kaio_dtype dtype = KAIO_DTYPE_INVALID;  // of A and B
  kaio_dtype out_dtype = KAIO_DTYPE_F32;
  int64_t rows = 0, cols = 0, k = 0;      // of C, and the reduction
  kaio_trans trans_a = KAIO_TRANS_N;
  kaio_trans trans_b = KAIO_TRANS_N;
  kaio_matmul_variant variant = KAIO_MATMUL_AUTO;
  // the names of (rows, cols, k) in the caller's terms: the backward's
  // products are dA [M, K] reducing N and dB [K, N] reducing M
  const char *dims = "MNK";
  float alpha = 1.0f;
  float beta = 0.0f;
  Launch launch;
  // Hopper path: A and B reach the kernel as TMA tensor maps with these
  // boxes (inner, outer), encoded at every launch from the views.
  bool tma = false;
  unsigned box_a[2] = {0, 0};
  unsigned box_b[2] = {0, 0};
  // Split-K (Hopper path, prepared plans only): K cut into `splits` slices
  // of `k_steps_per_split` steps of 64, partial products in the workspace,
  // summed in split order by `reduce`, or, when `split_in_kernel`, by the
  // kernel itself (the last CTA of each tile; u32 counts per tile at
  // `count_offset` in the workspace, zero between launches).
  unsigned splits = 1;
  unsigned k_steps_per_split = 0;
  bool split_in_kernel = false;
  uint64_t count_offset = 0;
  // Hopper path, 16-bit inputs: K steps per f32 accumulation chunk (the
  // kernels' kchunk; 0: one chunk).
  unsigned k_chunk = 0;
  Launch reduce;
  Workspace workspace;

  // Logged as the op's own plan (KAIO_LOG).
  kaio_status plan(kaio_device *device);
  // The same, unlogged: for a product of another family's plan that logs
  // its kernels under its own line (the backward).
  kaio_status plan_product(kaio_device *device);
  // Tensors: {A, B, C}.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// A matmul launch in two steps, so that an op running several products (the
// backward, int4 prefill) checks every view, and encodes every tensor map,
// before it enqueues anything: a failing call leaves the stream untouched.

// The three views' names in messages: the forward op's {"A", "B", "C"}, or
// the names of the caller's arguments that feed the product.
using MatmulNames = std::array<const char *, 3>;

struct MatmulViews {
  CheckedView a, b, c;
  TensorMap map_a, map_b;  // the sm_90 kernels' operands
};

kaio_status prepare_matmul(const MatmulPlan &plan, const kaio_tensor *tensors,
                           const MatmulNames &names, MatmulViews *out);
kaio_status enqueue_matmul(const MatmulPlan &plan, kaio_stream *stream, const MatmulViews &views);

}  // namespace kaio
