// What every op family's plan shares. A plan type (ElementwisePlan,
// MatmulPlan, ...) has
//   kaio_status plan(kaio_device *device);
//   kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
// plan() does every check that does not depend on the views, resolves the
// kernels (loading their modules on first use) into Launch members and, for
// a prepared plan, may allocate a workspace; run() checks the stream and the
// views and enqueues, with no allocation, module load or host sync. A
// kaio_op holds one plan; a one-shot call builds one on the stack.
#pragma once

#include <kaio/kaio.h>

#include <functional>

#include "ops/launch.hpp"
#include "runtime/device.hpp"
#include "runtime/device_memory.hpp"

namespace kaio {

struct PlanBase {
  // Set by plan(): the device the kernels were resolved for. run() checks
  // the stream against it.
  kaio_device *device = nullptr;
  // Set by kaio_op_create_*: the plan may own a workspace, freed with the
  // op. One-shot plans never allocate.
  bool prepared = false;
};

// F32, F16 or BF16: the float dtypes most ops take.
bool is_float_dtype(kaio_dtype dtype);

// The stream handle, and that it belongs to the op's device.
kaio_status check_op_stream(const kaio_device *device, const kaio_stream *stream);

// The checks every launch makes before looking at the views: the stream is
// valid and on the op's device, and `count` tensors (`order` names them)
// were passed.
kaio_status check_launch(const kaio_device *device, kaio_stream *stream, const kaio_tensor *tensors,
                         size_t count, size_t expected, const char *order);

// The element-wise and row ops' planning around their family's part: a
// float dtype, at least 1 x 1, sm_80; then `resolve`, which fills the op's
// launch and logs its kernel (resolve_twin). Logged as "<rows> x <cols> <dtype>".
kaio_status plan_float_op(kaio_device *device, kaio_dtype dtype, int64_t rows, int64_t cols,
                          const std::function<kaio_status()> &resolve);

}  // namespace kaio
