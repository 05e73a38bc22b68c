// Matmul backward: each product one call of the forward kernels with a
// transposed operand, so nothing is copied. An f32 dC is rounded to the
// 16-bit input type first, into the op's workspace.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/matmul_backward.hpp"
#include "ops/plan_log.hpp"
#include "runtime/buffer.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

constexpr int64_t kConvertPerThread = 8;

MatmulPlan product(const MatmulBackwardPlan &p, const char *dims, int64_t m, int64_t n,
                   int64_t k, kaio_trans ta, kaio_trans tb, kaio_matmul_variant variant,
                   float beta) {
  MatmulPlan q;
  q.dtype = p.in_dtype;
  q.rows = m;
  q.cols = n;
  q.out_dtype = p.out_dtype;
  q.trans_a = ta;
  q.trans_b = tb;
  q.variant = variant;
  q.k = k;
  q.dims = dims;
  q.beta = beta;
  return q;
}

bool skipped(const kaio_tensor &t) { return t.buffer == nullptr; }

kaio_status plan_unlogged(kaio_device *device, MatmulBackwardPlan *plan) {
  if (plan->grad_dtype != plan->in_dtype && plan->grad_dtype != KAIO_DTYPE_F32)
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: grad_dtype is %s but must be in_dtype (%s) or KAIO_DTYPE_F32.", api_name(),
                kaio_dtype_name(plan->grad_dtype), kaio_dtype_name(plan->in_dtype));
  // dA's product reduces over N and dB's over M: both must meet the K rules.
  KAIO_TRY(plan->da.plan_product(device));
  KAIO_TRY(plan->db.plan_product(device));
  if (plan->grad_dtype != KAIO_DTYPE_F32) return KAIO_OK;

  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(kernels::convert(plan->in_dtype), &fn));
  Launch &c = plan->convert;
  c.function = fn.function;
  c.block = fn.info->block[0];
  const int64_t elems = plan->m * plan->n;
  const int64_t per_block = int64_t{fn.info->block[0]} * kConvertPerThread;
  c.grid = static_cast<unsigned>(std::min<int64_t>((elems + per_block - 1) / per_block, INT32_MAX));
  log_kernel(device, c.function, "dC is f32: rounded first");
  return DeviceMemory::allocate(device, static_cast<uint64_t>(elems) * 2, &plan->workspace);
}

}  // namespace

// Logs dA's and dB's kernels (plan_product notes them), then the rounding.
kaio_status MatmulBackwardPlan::plan(kaio_device *device) {
  this->device = device;
  return log_plan(
      [&] { return plan_unlogged(device, this); },
      [&] {
        char s[128];
        std::snprintf(s, sizeof s, "backward M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " %s", m,
                      n, k, kaio_dtype_name(in_dtype));
        return std::string(s);
      });
}

kaio_status MatmulBackwardPlan::run(kaio_stream *stream,
                                    const kaio_tensor *tensors, size_t count) const {
  KAIO_TRY(check_stream(stream));
  if (stream->device != device)
    return fail(KAIO_ERROR_WRONG_DEVICE,
                "%s: the op belongs to device %d but 'stream' is on device %d.", api_name(),
                device->ordinal, stream->device->ordinal);
  if (!tensors || count != 5)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'count' is %zu but matmul backward takes 5 tensors: {dC, A, B, dA, "
                "dB}.",
                api_name(), tensors ? count : 0);
  const kaio_tensor &dc = tensors[0], &a = tensors[1], &b = tensors[2], &grad_a = tensors[3],
                    &grad_b = tensors[4];
  const bool want_da = !skipped(grad_a), want_db = !skipped(grad_b);
  if (!want_da && !want_db) return KAIO_OK;  // nothing asked for

  // Everything is checked, under the names of the caller's arguments, before
  // anything is enqueued: a failing call leaves the stream untouched.
  CheckedView g;
  KAIO_TRY(check_view("dC", &dc, device, &g));
  KAIO_TRY(check_dtype("dC", g, grad_dtype));
  KAIO_TRY(check_shape("dC", g, m, n));
  const bool round_dc = grad_dtype == KAIO_DTYPE_F32;
  if (round_dc) KAIO_TRY(check_contiguous("dC", g));
  const kaio_tensor dc16 = round_dc ? kaio_tensor_2d(workspace->handle(), in_dtype, m, n) : dc;
  MatmulViews for_da, for_db;
  if (want_da) {
    const kaio_tensor t[] = {dc16, b, grad_a};
    KAIO_TRY(prepare_matmul(da, t, {"dC", "B", "dA"}, &for_da));
  }
  if (want_db) {
    const kaio_tensor t[] = {a, dc16, grad_b};
    KAIO_TRY(prepare_matmul(db, t, {"A", "dC", "dB"}, &for_db));
  }
  // Gradients must not share memory with each other or with any input: dA is
  // written before dB's product reads A and dC.
  if (want_da && want_db) {
    KAIO_TRY(check_no_partial_overlap("dA", for_da.c, "dB", for_db.c, false));
    KAIO_TRY(check_no_partial_overlap("dA", for_da.c, "A", for_db.a, false));
    KAIO_TRY(check_no_partial_overlap("dB", for_db.c, "B", for_da.b, false));
  }
  if (round_dc && want_da) KAIO_TRY(check_no_partial_overlap("dA", for_da.c, "dC", g, false));
  if (round_dc && want_db) KAIO_TRY(check_no_partial_overlap("dB", for_db.c, "dC", g, false));
  if (round_dc) {
    unsigned long long src = g.address, dst = workspace->ptr();
    unsigned long long elems = static_cast<unsigned long long>(m * n);
    void *params[] = {&src, &dst, &elems};
    KAIO_TRY(launch_builtin(device, convert, stream, params));
  }
  if (want_da) KAIO_TRY(enqueue_matmul(da, stream, for_da));
  if (want_db) KAIO_TRY(enqueue_matmul(db, stream, for_db));
  return KAIO_OK;
}

MatmulBackwardPlan::MatmulBackwardPlan(const kaio_matmul_backward_desc &d)
    : m(d.m), n(d.n), k(d.k), in_dtype(d.in_dtype), grad_dtype(d.grad_dtype),
      out_dtype(d.out_dtype) {
  da = product(*this, "MKN", d.m, d.k, d.n, KAIO_TRANS_N, KAIO_TRANS_T, d.variant, d.beta);
  db = product(*this, "KNM", d.k, d.n, d.m, KAIO_TRANS_T, KAIO_TRANS_N, d.variant, d.beta);
}

}  // namespace kaio


