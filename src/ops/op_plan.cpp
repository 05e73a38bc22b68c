#include "ops/op_plan.hpp"

#include <cinttypes>
#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "ops/plan_log.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

size_t tensor_count(OpKind kind) {
  switch (kind) {
    case OpKind::silu_gate:
    case OpKind::rmsnorm:
    case OpKind::matmul: return 3;
    case OpKind::gelu:
    case OpKind::softmax: return 2;
  }
  return 0;
}

const char *tensor_order(OpKind kind) {
  switch (kind) {
    case OpKind::silu_gate: return "{x, gate, out}";
    case OpKind::gelu: return "{x, out}";
    case OpKind::rmsnorm: return "{x, weight, out}";
    case OpKind::softmax: return "{x, out}";
    case OpKind::matmul: return "{A, B, C}";
  }
  return "";
}

}  // namespace

bool is_float_dtype(kaio_dtype dtype) {
  return dtype == KAIO_DTYPE_F32 || dtype == KAIO_DTYPE_F16 || dtype == KAIO_DTYPE_BF16;
}

namespace {

kaio_status plan_unlogged(const char *caller, kaio_device *device, OpPlan *plan) {
  if (plan->kind == OpKind::matmul) return plan_matmul(caller, device, plan);
  if (!is_float_dtype(plan->dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: argument 'dtype' is %s (%d); this op takes KAIO_DTYPE_F32, KAIO_DTYPE_F16 "
                "or KAIO_DTYPE_BF16.",
                caller, kaio_dtype_name(plan->dtype), plan->dtype);
  if (plan->rows < 1 || plan->cols < 1)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: the shape is %" PRId64 " x %" PRId64 "; rows and cols must be >= 1.", caller,
                plan->rows, plan->cols);
  KAIO_TRY(require_arch(caller, device, 8, 0, "built-in ops (bf16 conversions, PTX sm_80)"));
  KAIO_TRY(plan->kind == OpKind::silu_gate || plan->kind == OpKind::gelu
               ? plan_elementwise(caller, device, plan)
               : plan_rows(caller, device, plan));
  log_kernel(device, plan->function, "sm_80, the only family");
  return KAIO_OK;
}

std::string subject(const OpPlan &plan) {
  char s[160];
  if (plan.kind == OpKind::matmul)
    std::snprintf(s, sizeof s, "M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " %s %s%s", plan.rows,
                  plan.cols, plan.matmul.k, kaio_dtype_name(plan.dtype),
                  plan.matmul.trans_a ? "t" : "n", plan.matmul.trans_b ? "t" : "n");
  else
    std::snprintf(s, sizeof s, "%" PRId64 " x %" PRId64 " %s", plan.rows, plan.cols,
                  kaio_dtype_name(plan.dtype));
  return s;
}

}  // namespace

kaio_status plan_op(const char *caller, kaio_device *device, OpPlan *plan) {
  return log_plan(caller, [&] { return plan_unlogged(caller, device, plan); },
                  [&] { return subject(*plan); });
}

kaio_status check_op_stream(const char *caller, const kaio_device *device,
                            const kaio_stream *stream) {
  KAIO_TRY(check_stream(caller, stream));
  if (stream->device != device)
    return fail(KAIO_ERROR_WRONG_DEVICE,
                "%s: the op belongs to device %d but 'stream' is on device %d; create the op on "
                "the stream's device.",
                caller, device->ordinal, stream->device->ordinal);
  return KAIO_OK;
}

kaio_status check_launch(const char *caller, const kaio_device *device, kaio_stream *stream,
                         const kaio_tensor *tensors, size_t count, size_t expected,
                         const char *order) {
  KAIO_TRY(check_op_stream(caller, device, stream));
  if (!tensors)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'tensors' is NULL; pass %s.", caller,
                order);
  if (count != expected)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'count' is %zu but this op takes %zu tensors: %s.", caller, count,
                expected, order);
  return KAIO_OK;
}

kaio_status run_op(const char *caller, const kaio_device *device, const OpPlan &plan,
                   kaio_stream *stream, const kaio_tensor *tensors, size_t count) {
  KAIO_TRY(check_launch(caller, device, stream, tensors, count, tensor_count(plan.kind),
                        tensor_order(plan.kind)));
  if (plan.kind == OpKind::silu_gate || plan.kind == OpKind::gelu)
    return run_elementwise(caller, device, plan, stream, tensors);
  if (plan.kind == OpKind::matmul) return run_matmul(caller, device, plan, stream, tensors);
  return run_rows(caller, device, plan, stream, tensors);
}

kaio_status launch_builtin(const char *caller, const kaio_device *device, const OpPlan &plan,
                           kaio_stream *stream, void **params) {
  // Planning refuses dims whose grid would not fit; this catches a plan that
  // missed one before the driver answers a bare CUDA_ERROR_INVALID_VALUE.
  const uint32_t grid[3] = {plan.grid, plan.grid_y, plan.grid_z}, block[3] = {plan.block, 1, 1};
  const DimOverLimit over = dim_over_limit(device, grid, block);
  if (over.what)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: the op's dimensions need a launch %s of %u in %c but device %d allows at "
                "most %u; split the call into smaller ones (and please report this: planning "
                "should have refused these dimensions).",
                caller, over.what, over.value, "xyz"[over.axis], device->ordinal, over.limit);
  ContextScope scope(device);
  KAIO_TRY(scope.status(caller));
  cu::CUresult r =
      device->api->cuLaunchKernel(plan.function, plan.grid, plan.grid_y, plan.grid_z, plan.block, 1, 1,
                                  plan.shared_bytes, stream->native, params, nullptr);
  if (r) return fail_driver(r, caller, "cuLaunchKernel");
  return KAIO_OK;
}

}  // namespace kaio
