// Matmul backward for C = A·B: dA = dC·Bᵀ and dB = Aᵀ·dC, each one product
// on the forward kernels with a transposed operand, plus a rounding pass
// when dC is f32 (into a workspace the op owns).
#pragma once

#include <kaio/kaio.h>

#include "ops/matmul.hpp"

namespace kaio {

struct MatmulBackwardPlan : PlanBase {
  int64_t m = 0, n = 0, k = 0;
  kaio_dtype in_dtype = KAIO_DTYPE_INVALID;
  kaio_dtype grad_dtype = KAIO_DTYPE_INVALID;
  kaio_dtype out_dtype = KAIO_DTYPE_INVALID;
  MatmulPlan da;   // dA = dC · Bᵀ
  MatmulPlan db;   // dB = Aᵀ · dC
  Launch convert;  // f32 dC -> in_dtype, when grad_dtype is f32
  Workspace workspace;

  MatmulBackwardPlan() = default;
  explicit MatmulBackwardPlan(const kaio_matmul_backward_desc &desc);

  kaio_status plan(kaio_device *device);
  // Tensors: {dC, A, B, dA, dB}; a NULL buffer skips a gradient.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

}  // namespace kaio
