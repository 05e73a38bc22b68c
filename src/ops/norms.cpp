// run() of the row normalisations that take more than x and a weight: the
// fused residual add + RMSNorm and LayerNorm (kernels in norms.ptx). Their
// plan() is RowsPlan's (rows.cpp): same checks, row shapes and grid.
#include "core/call_context.hpp"
#include "core/error.hpp"
#include "ops/rows.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

// A view the op reads or writes row by row: the plan's dtype and rows x cols.
kaio_status check_rows_view(const char *name, const kaio_tensor *t, const RowsPlan &plan,
                            CheckedView *v) {
  KAIO_TRY(check_view(name, t, plan.device, v));
  KAIO_TRY(check_dtype(name, *v, plan.dtype));
  return check_shape(name, *v, plan.rows, plan.cols);
}

// A per-column vector (weight, bias): the plan's dtype, 1 x cols, and no
// overlap with an output.
kaio_status check_column_vector(const char *name, const kaio_tensor *t, const RowsPlan &plan,
                                const CheckedView &out, CheckedView *v) {
  KAIO_TRY(check_view(name, t, plan.device, v));
  KAIO_TRY(check_dtype(name, *v, plan.dtype));
  KAIO_TRY(check_shape(name, *v, 1, plan.cols));
  return check_no_partial_overlap(name, *v, "out", out, false);
}

unsigned long long u64(int64_t v) { return static_cast<unsigned long long>(v); }

}  // namespace

kaio_status run_norm(const RowsPlan &plan, kaio_stream *stream, const kaio_tensor *t,
                     size_t count) {
  const bool add = plan.op == RowsPlan::Op::add_rmsnorm;
  KAIO_TRY(check_launch(plan.device, stream, t, count, 4,
                        add ? "{x, residual, weight, out}" : "{x, weight, bias, out}"));
  CheckedView x, out;
  KAIO_TRY(check_rows_view("x", &t[0], plan, &x));
  KAIO_TRY(check_rows_view("out", &t[3], plan, &out));
  // Each element of out is written by the thread that read x there, after
  // it did: the very same view as x and out is safe, any other overlap not.
  KAIO_TRY(check_no_partial_overlap("x", x, "out", out, true));

  unsigned long long xa = x.address, oa = out.address;
  unsigned long long xs = u64(x.row_stride), os = u64(out.row_stride);
  unsigned urows = static_cast<unsigned>(plan.rows), ucols = static_cast<unsigned>(plan.cols);
  float eps = plan.eps;
  if (add) {
    CheckedView res, w;
    KAIO_TRY(check_rows_view("residual", &t[1], plan, &res));
    // The residual is updated in place and read back: it must not overlap
    // x, out or the weight at all.
    KAIO_TRY(check_no_partial_overlap("residual", res, "x", x, false));
    KAIO_TRY(check_no_partial_overlap("residual", res, "out", out, false));
    KAIO_TRY(check_column_vector("weight", &t[2], plan, out, &w));
    KAIO_TRY(check_no_partial_overlap("weight", w, "residual", res, false));
    unsigned long long ra = res.address, wa = w.address, rs = u64(res.row_stride);
    void *params[] = {&xa, &ra, &wa, &oa, &urows, &ucols, &xs, &rs, &os, &eps};
    return launch_builtin(plan.device, plan.launch, stream, params);
  }
  // LayerNorm: an absent (NULL-buffer) weight is 1, an absent bias none;
  // the kernel takes address 0 for either.
  unsigned long long wa = 0, ba = 0;
  CheckedView w, b;
  if (t[1].buffer) {
    KAIO_TRY(check_column_vector("weight", &t[1], plan, out, &w));
    wa = w.address;
  }
  if (t[2].buffer) {
    KAIO_TRY(check_column_vector("bias", &t[2], plan, out, &b));
    ba = b.address;
  }
  void *params[] = {&xa, &wa, &ba, &oa, &urows, &ucols, &xs, &os, &eps};
  return launch_builtin(plan.device, plan.launch, stream, params);
}

}  // namespace kaio
