// The Hopper matmul path: wgmma fed by TMA (ptx/gen_matmul_sm90.py). A and
// B reach the kernel as tensor maps encoded from the views at each launch.
#pragma once

#include <string>

#include "ops/op_plan.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {

// AUTO's plan where check_family(matmul_sm90) passed; `why` is its reason,
// for KAIO_LOG.
kaio_status plan_matmul_sm90(const char *caller, kaio_device *device, OpPlan *plan,
                             const std::string &why);

kaio_status launch_matmul_sm90(const char *caller, const kaio_device *device, const OpPlan &plan,
                               kaio_stream *stream, const CheckedView &a, const CheckedView &b,
                               const CheckedView &c);

}  // namespace kaio
