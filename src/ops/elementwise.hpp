// Element-wise ops over contiguous views: fused SiLU gate and GELU.
#pragma once

#include <kaio/kaio.h>

#include "ops/plan.hpp"

namespace kaio {

struct ElementwisePlan : PlanBase {
  enum class Op { silu_gate, gelu };
  Op op = Op::silu_gate;
  kaio_dtype dtype = KAIO_DTYPE_INVALID;
  int64_t rows = 0, cols = 0;
  kaio_gelu_mode gelu_mode = 0;
  Launch launch;

  kaio_status plan(kaio_device *device);
  // Tensors: silu_gate {x, gate, out}, gelu {x, out}.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

}  // namespace kaio
