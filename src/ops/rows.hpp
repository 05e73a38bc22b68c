// Row-wise ops over strided views: RMSNorm, softmax, fused residual add +
// RMSNorm and LayerNorm.
#pragma once

#include <kaio/kaio.h>

#include "ops/plan.hpp"

namespace kaio {

struct RowsPlan : PlanBase {
  enum class Op { rmsnorm, softmax, add_rmsnorm, layernorm };
  Op op = Op::rmsnorm;
  kaio_dtype dtype = KAIO_DTYPE_INVALID;
  int64_t rows = 0, cols = 0;
  float eps = 0.0f;
  Launch launch;

  kaio_status plan(kaio_device *device);
  // Tensors: rmsnorm {x, weight, out}, softmax {x, out}, add_rmsnorm
  // {x, residual, weight, out}, layernorm {x, weight, bias, out} (weight
  // and bias may be absent: a NULL buffer).
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// run() for add_rmsnorm and layernorm (ops/norms.cpp).
kaio_status run_norm(const RowsPlan &plan, kaio_stream *stream, const kaio_tensor *tensors,
                     size_t count);

}  // namespace kaio
