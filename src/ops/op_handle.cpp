#include "ops/op_handle.hpp"

#include <type_traits>

#include "ops/attention.hpp"
#include "ops/kquant_plan.hpp"
#include "ops/quant.hpp"

kaio_op::kaio_op() = default;

kaio_op::~kaio_op() {
  if (auto *plan = std::get_if<kaio::OpPlan>(&body)) kaio_buffer_destroy(plan->workspace);
  if (auto *backward = std::get_if<std::unique_ptr<kaio::BackwardPlan>>(&body); backward && *backward)
    kaio_buffer_destroy((*backward)->workspace);
}

namespace kaio {

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
