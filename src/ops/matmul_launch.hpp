// A matmul launch in two steps, so that an op running several products (the
// backward, int4 prefill) checks every view, and encodes every tensor map,
// before it enqueues anything: a failing call leaves the stream untouched.
#pragma once

#include <array>

#include "ops/op_plan.hpp"
#include "ops/tensor_map.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {

// The three views' names in messages: the forward op's {"A", "B", "C"}, or
// the names of the caller's arguments that feed the product.
using MatmulNames = std::array<const char *, 3>;

struct MatmulLaunch {
  CheckedView a, b, c;
  TensorMap map_a, map_b;  // the sm_90 kernels' operands
};

kaio_status prepare_matmul(const char *caller, const kaio_device *device, const OpPlan &plan,
                           const kaio_tensor *tensors, const MatmulNames &names,
                           MatmulLaunch *out);
kaio_status enqueue_matmul(const char *caller, const kaio_device *device, const OpPlan &plan,
                           kaio_stream *stream, const MatmulLaunch &launch);

}  // namespace kaio
