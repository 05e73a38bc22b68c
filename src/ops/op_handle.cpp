#include "ops/op_handle.hpp"

#include <type_traits>

#include "ops/attention.hpp"
#include "ops/kquant_plan.hpp"
#include "ops/quant.hpp"
#include "runtime/handle_check.hpp"

kaio_op::kaio_op() = default;

kaio_op::~kaio_op() = default;  // the plans' workspaces free themselves

namespace kaio {

kaio_status publish_op(const char *caller, kaio_op **out, kaio_device *device,
                       std::unique_ptr<kaio_op> op) {
  KAIO_TRY(publish_handle(caller, out, op.get()));
  op.release()->device = device;
  device_retain(device);
  return KAIO_OK;
}

kaio_status run_op_handle(const char *caller, const kaio_op &op, kaio_stream *stream,
                          const kaio_tensor *tensors, size_t count) {
  return std::visit(
      [&](const auto &plan) -> kaio_status {
        using Plan = std::decay_t<decltype(plan)>;
        if constexpr (std::is_same_v<Plan, OpPlan>)
          return run_op(caller, op.device, plan, stream, tensors, count);
        else if constexpr (std::is_same_v<Plan, std::unique_ptr<BackwardPlan>>)
          return run_matmul_backward(caller, op.device, *plan, stream, tensors, count);
        else if constexpr (std::is_same_v<Plan, std::unique_ptr<KquantPlan, KquantPlanDeleter>>)
          return run_kquant(caller, op.device, *plan, stream, tensors, count);
        else if constexpr (std::is_same_v<Plan, std::unique_ptr<QuantPlan, QuantPlanDeleter>>)
          return run_quant(caller, op.device, *plan, stream, tensors, count);
        else
          return run_attention(caller, op.device, *plan, stream, tensors, count);
      },
      op.body);
}

}  // namespace kaio
