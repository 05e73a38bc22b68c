// Matmul backward for C = A·B: dA = dC·Bᵀ and dB = Aᵀ·dC, each one call of
// the forward kernels with a transposed operand, so nothing is copied. An
// f32 dC is rounded to the 16-bit input type first, into the op's workspace.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/kquant_plan.hpp"
#include "ops/matmul_launch.hpp"
#include "ops/op_plan.hpp"
#include "ops/plan_log.hpp"
#include "runtime/buffer.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

constexpr int64_t kConvertPerThread = 8;

OpPlan product(const BackwardPlan &p, const char *dims, int64_t m, int64_t n, int64_t k,
               kaio_trans ta, kaio_trans tb, kaio_matmul_variant variant, float beta) {
  OpPlan q;
  q.kind = OpKind::matmul;
  q.dtype = p.in_dtype;
  q.rows = m;
  q.cols = n;
  q.matmul.out_dtype = p.out_dtype;
  q.matmul.trans_a = ta;
  q.matmul.trans_b = tb;
  q.matmul.variant = variant;
  q.matmul.k = k;
  q.matmul.dims = dims;
  q.matmul.beta = beta;
  return q;
}

bool skipped(const kaio_tensor &t) { return t.buffer == nullptr; }

kaio_status plan_unlogged(const char *caller, kaio_device *device, BackwardPlan *plan) {
  if (plan->grad_dtype != plan->in_dtype && plan->grad_dtype != KAIO_DTYPE_F32)
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: grad_dtype is %s but must be in_dtype (%s) or KAIO_DTYPE_F32.", caller,
                kaio_dtype_name(plan->grad_dtype), kaio_dtype_name(plan->in_dtype));
  // dA's product reduces over N and dB's over M: both must meet the K rules.
  KAIO_TRY(plan_matmul(caller, device, &plan->da));
  KAIO_TRY(plan_matmul(caller, device, &plan->db));
  if (plan->grad_dtype != KAIO_DTYPE_F32) return KAIO_OK;

  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(caller, kernels::convert(plan->in_dtype), &fn));
  OpPlan &c = plan->convert;
  c.function = fn.function;
  c.block = fn.block;
  const int64_t elems = plan->m * plan->n;
  const int64_t per_block = int64_t{fn.block} * kConvertPerThread;
  c.grid = static_cast<unsigned>(std::min<int64_t>((elems + per_block - 1) / per_block, INT32_MAX));
  log_kernel(device, c.function, "dC is f32: rounded first");
  return DeviceMemory::allocate(caller, device, static_cast<uint64_t>(elems) * 2, &plan->workspace);
}

}  // namespace

// Logs dA's and dB's kernels (plan_matmul notes them), then the rounding.
kaio_status plan_matmul_backward(const char *caller, kaio_device *device, BackwardPlan *plan) {
  return log_plan(
      caller, [&] { return plan_unlogged(caller, device, plan); },
      [&] {
        char s[128];
        std::snprintf(s, sizeof s, "backward M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " %s",
                      plan->m, plan->n, plan->k, kaio_dtype_name(plan->in_dtype));
        return std::string(s);
      });
}

kaio_status run_matmul_backward(const char *caller, const kaio_device *device,
                                const BackwardPlan &plan, kaio_stream *stream,
                                const kaio_tensor *tensors, size_t count) {
  KAIO_TRY(check_stream(caller, stream));
  if (stream->device != device)
    return fail(KAIO_ERROR_WRONG_DEVICE,
                "%s: the op belongs to device %d but 'stream' is on device %d.", caller,
                device->ordinal, stream->device->ordinal);
  if (!tensors || count != 5)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'count' is %zu but matmul backward takes 5 tensors: {dC, A, B, dA, "
                "dB}.",
                caller, tensors ? count : 0);
  const kaio_tensor &dc = tensors[0], &a = tensors[1], &b = tensors[2], &da = tensors[3],
                    &db = tensors[4];
  const bool want_da = !skipped(da), want_db = !skipped(db);
  if (!want_da && !want_db) return KAIO_OK;  // nothing asked for

  // Everything is checked, under the names of the caller's arguments, before
  // anything is enqueued: a failing call leaves the stream untouched.
  CheckedView g;
  KAIO_TRY(check_view(caller, "dC", &dc, device, &g));
  KAIO_TRY(check_dtype(caller, "dC", g, plan.grad_dtype));
  KAIO_TRY(check_shape(caller, "dC", g, plan.m, plan.n));
  const bool round_dc = plan.grad_dtype == KAIO_DTYPE_F32;
  if (round_dc) KAIO_TRY(check_contiguous(caller, "dC", g));
  const kaio_tensor dc16 =
      round_dc ? kaio_tensor_2d(plan.workspace->handle(), plan.in_dtype, plan.m, plan.n) : dc;
  MatmulLaunch for_da, for_db;
  if (want_da) {
    const kaio_tensor t[] = {dc16, b, da};
    KAIO_TRY(prepare_matmul(caller, device, plan.da, t, {"dC", "B", "dA"}, &for_da));
  }
  if (want_db) {
    const kaio_tensor t[] = {a, dc16, db};
    KAIO_TRY(prepare_matmul(caller, device, plan.db, t, {"A", "dC", "dB"}, &for_db));
  }
  // Gradients must not share memory with each other or with any input: dA is
  // written before dB's product reads A and dC.
  if (want_da && want_db) {
    KAIO_TRY(check_no_partial_overlap(caller, "dA", for_da.c, "dB", for_db.c, false));
    KAIO_TRY(check_no_partial_overlap(caller, "dA", for_da.c, "A", for_db.a, false));
    KAIO_TRY(check_no_partial_overlap(caller, "dB", for_db.c, "B", for_da.b, false));
  }
  if (round_dc && want_da) KAIO_TRY(check_no_partial_overlap(caller, "dA", for_da.c, "dC", g, false));
  if (round_dc && want_db) KAIO_TRY(check_no_partial_overlap(caller, "dB", for_db.c, "dC", g, false));
  if (round_dc) {
    unsigned long long src = g.address, dst = plan.workspace->ptr();
    unsigned long long n = static_cast<unsigned long long>(plan.m * plan.n);
    void *params[] = {&src, &dst, &n};
    KAIO_TRY(launch_builtin(caller, device, plan.convert, stream, params));
  }
  if (want_da) KAIO_TRY(enqueue_matmul(caller, device, plan.da, stream, for_da));
  if (want_db) KAIO_TRY(enqueue_matmul(caller, device, plan.db, stream, for_db));
  return KAIO_OK;
}

BackwardPlan make_backward_plan(const kaio_matmul_backward_desc &d) {
  BackwardPlan p;
  p.m = d.m;
  p.n = d.n;
  p.k = d.k;
  p.in_dtype = d.in_dtype;
  p.grad_dtype = d.grad_dtype;
  p.out_dtype = d.out_dtype;
  p.da = product(p, "MKN", d.m, d.k, d.n, KAIO_TRANS_N, KAIO_TRANS_T, d.variant, d.beta);
  p.db = product(p, "KNM", d.k, d.n, d.m, KAIO_TRANS_T, KAIO_TRANS_N, d.variant, d.beta);
  return p;
}

}  // namespace kaio


