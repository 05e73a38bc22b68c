// Row-wise ops over strided views: RMSNorm and softmax.
#pragma once

#include <kaio/kaio.h>

#include "ops/plan.hpp"

namespace kaio {

struct RowsPlan : PlanBase {
  enum class Op { rmsnorm, softmax };
  Op op = Op::rmsnorm;
  kaio_dtype dtype = KAIO_DTYPE_INVALID;
  int64_t rows = 0, cols = 0;
  float eps = 0.0f;
  Launch launch;

  kaio_status plan(kaio_device *device);
  // Tensors: rmsnorm {x, weight, out}, softmax {x, out}.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

}  // namespace kaio
