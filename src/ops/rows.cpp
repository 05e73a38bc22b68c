// Row-wise ops over strided views: RMSNorm, softmax and (run in norms.cpp)
// add + RMSNorm and LayerNorm. One warp per row for short rows, one block per
// row for long ones.
#include <cinttypes>
#include <climits>
#include <cmath>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "ops/kernel_family.hpp"
#include "ops/rows.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

// Up to this many columns a warp per row keeps every lane busy without
// leaving most of a 256-thread block idle.
constexpr int64_t kWarpMaxCols = 1024;

bool warp_per_row(const RowsPlan &plan) { return plan.cols <= kWarpMaxCols; }

kernels::Op kernel_op(RowsPlan::Op op) {
  switch (op) {
    case RowsPlan::Op::rmsnorm: return kernels::Op::rmsnorm;
    case RowsPlan::Op::softmax: return kernels::Op::softmax;
    case RowsPlan::Op::add_rmsnorm: return kernels::Op::add_rmsnorm;
    case RowsPlan::Op::layernorm: return kernels::Op::layernorm;
  }
  return kernels::Op::rmsnorm;
}

// The kernel, or where it can run its sm_90 twin (a dependent launch).
kaio_status resolve_row_kernel(const kaio_device *device, const RowsPlan &plan,
                               BuiltinFunction *fn) {
  const kernels::Op op = kernel_op(plan.op);
  const auto bucket = warp_per_row(plan) ? kernels::RowBucket::warp : kernels::RowBucket::block;
  return resolve_twin(device, kernels::rows(op, plan.dtype, bucket),
                      kernels::rows_pdl(op, plan.dtype, bucket),
                      warp_per_row(plan) ? "a warp per row" : "a block per row", fn);
}

kaio_status plan_rows(kaio_device *device, RowsPlan *plan) {
  if (plan->rows > INT32_MAX || plan->cols > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: the shape is %" PRId64 " x %" PRId64 "; row ops take at most %d rows and "
                "%d cols. Split the rows into several calls.",
                api_name(), plan->rows, plan->cols, INT32_MAX, INT32_MAX);
  if (plan->op != RowsPlan::Op::softmax && !(std::isfinite(plan->eps) && plan->eps >= 0.0f))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'eps' is %g; it must be finite and >= 0 (1e-5 or 1e-6 are usual).",
                api_name(), static_cast<double>(plan->eps));
  BuiltinFunction fn;
  KAIO_TRY(resolve_row_kernel(device, *plan, &fn));
  plan->launch = launch_of(fn);
  const int64_t rows_per_block = fn.info->block[0] / 32;  // a warp per row
  plan->launch.grid = static_cast<unsigned>(
      warp_per_row(*plan) ? (plan->rows + rows_per_block - 1) / rows_per_block : plan->rows);
  return KAIO_OK;
}

}  // namespace

kaio_status RowsPlan::plan(kaio_device *device) {
  this->device = device;
  return plan_float_op(device, dtype, rows, cols, [&] { return plan_rows(device, this); });
}

kaio_status RowsPlan::run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const {
  if (op == Op::add_rmsnorm || op == Op::layernorm) return run_norm(*this, stream, tensors, count);
  const bool norm = op == Op::rmsnorm;
  KAIO_TRY(check_launch(device, stream, tensors, count, norm ? 3 : 2,
                        norm ? "{x, weight, out}" : "{x, out}"));
  CheckedView x, w, out;
  const kaio_tensor *out_view = &tensors[norm ? 2 : 1];
  KAIO_TRY(check_view("x", &tensors[0], device, &x));
  KAIO_TRY(check_dtype("x", x, dtype));
  KAIO_TRY(check_shape("x", x, rows, cols));
  if (norm) {
    KAIO_TRY(check_view("weight", &tensors[1], device, &w));
    KAIO_TRY(check_dtype("weight", w, dtype));
    KAIO_TRY(check_shape("weight", w, 1, cols));
  }
  KAIO_TRY(check_view("out", out_view, device, &out));
  KAIO_TRY(check_dtype("out", out, dtype));
  KAIO_TRY(check_shape("out", out, rows, cols));
  // Each output element is written by the thread that last read it, so the
  // very same view in and out is safe; any other overlap is not.
  KAIO_TRY(check_no_partial_overlap("x", x, "out", out, true));
  if (norm) KAIO_TRY(check_no_partial_overlap("weight", w, "out", out, false));

  unsigned long long xa = x.address, wa = norm ? w.address : 0, oa = out.address;
  unsigned urows = static_cast<unsigned>(rows), ucols = static_cast<unsigned>(cols);
  unsigned long long xs = static_cast<unsigned long long>(x.row_stride);
  unsigned long long os = static_cast<unsigned long long>(out.row_stride);
  float feps = eps;
  void *norm_params[] = {&xa, &wa, &oa, &urows, &ucols, &xs, &os, &feps};
  void *softmax_params[] = {&xa, &oa, &urows, &ucols, &xs, &os};
  return launch_builtin(device, launch, stream, norm ? norm_params : softmax_params);
}

}  // namespace kaio
