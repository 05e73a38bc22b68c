// Row-wise ops over strided views: RMSNorm and softmax. One warp per row for
// short rows, one block per row for long ones.
#include <cinttypes>
#include <climits>
#include <cmath>

#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/op_plan.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

// Up to this many columns a warp per row keeps every lane busy without
// leaving most of a 256-thread block idle.
constexpr int64_t kWarpMaxCols = 1024;

bool warp_per_row(const OpPlan &plan) { return plan.cols <= kWarpMaxCols; }

KernelId row_kernel(const OpPlan &plan) {
  return kernels::rows(plan.kind == OpKind::rmsnorm ? kernels::Op::rmsnorm : kernels::Op::softmax,
                       plan.dtype,
                       warp_per_row(plan) ? kernels::RowBucket::warp : kernels::RowBucket::block);
}

}  // namespace

kaio_status plan_rows(const char *caller, kaio_device *device, OpPlan *plan) {
  if (plan->rows > INT32_MAX || plan->cols > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: the shape is %" PRId64 " x %" PRId64 "; row ops take at most %d rows and "
                "%d cols. Split the rows into several calls.",
                caller, plan->rows, plan->cols, INT32_MAX, INT32_MAX);
  if (plan->kind == OpKind::rmsnorm && !(std::isfinite(plan->eps) && plan->eps >= 0.0f))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'eps' is %g; it must be finite and >= 0 (1e-5 or 1e-6 are usual).",
                caller, static_cast<double>(plan->eps));
  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(caller, row_kernel(*plan), &fn));
  plan->function = fn.function;
  plan->shared_bytes = fn.shared_bytes;
  plan->block = fn.block;
  const int64_t rows_per_block = fn.block / 32;  // a warp per row
  plan->grid = static_cast<unsigned>(warp_per_row(*plan)
                                         ? (plan->rows + rows_per_block - 1) / rows_per_block
                                         : plan->rows);
  return KAIO_OK;
}

kaio_status run_rows(const char *caller, const kaio_device *device, const OpPlan &plan,
                     kaio_stream *stream, const kaio_tensor *tensors) {
  const bool norm = plan.kind == OpKind::rmsnorm;
  CheckedView x, w, out;
  const kaio_tensor *out_view = &tensors[norm ? 2 : 1];
  KAIO_TRY(check_view(caller, "x", &tensors[0], device, &x));
  KAIO_TRY(check_dtype(caller, "x", x, plan.dtype));
  KAIO_TRY(check_shape(caller, "x", x, plan.rows, plan.cols));
  if (norm) {
    KAIO_TRY(check_view(caller, "weight", &tensors[1], device, &w));
    KAIO_TRY(check_dtype(caller, "weight", w, plan.dtype));
    KAIO_TRY(check_shape(caller, "weight", w, 1, plan.cols));
  }
  KAIO_TRY(check_view(caller, "out", out_view, device, &out));
  KAIO_TRY(check_dtype(caller, "out", out, plan.dtype));
  KAIO_TRY(check_shape(caller, "out", out, plan.rows, plan.cols));
  // Each output element is written by the thread that last read it, so the
  // very same view in and out is safe; any other overlap is not.
  KAIO_TRY(check_no_partial_overlap(caller, "x", x, "out", out, true));
  if (norm) KAIO_TRY(check_no_partial_overlap(caller, "weight", w, "out", out, false));

  unsigned long long xa = x.address, wa = norm ? w.address : 0, oa = out.address;
  unsigned rows = static_cast<unsigned>(plan.rows), cols = static_cast<unsigned>(plan.cols);
  unsigned long long xs = static_cast<unsigned long long>(x.row_stride);
  unsigned long long os = static_cast<unsigned long long>(out.row_stride);
  float eps = plan.eps;
  void *norm_params[] = {&xa, &wa, &oa, &rows, &cols, &xs, &os, &eps};
  void *softmax_params[] = {&xa, &oa, &rows, &cols, &xs, &os};
  return launch_builtin(caller, device, plan, stream, norm ? norm_params : softmax_params);
}

}  // namespace kaio
