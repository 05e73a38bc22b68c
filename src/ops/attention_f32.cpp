// KAIO's f32 single-head flash attention: plan (kernel for the head dim) and
// launch from [S, D] views. The kernels' contract is in ptx/gen_attention_f32.py.
#include <cinttypes>
#include <climits>
#include <cmath>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/attention.hpp"
#include "ops/key_list.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

using kernels::Pass;

// Head dims the CUDA-core kernels take (a D runs on the next one up, zero
// padded), and the split-TF32 tensor-core ones, which run up to their
// largest; from the kernel registry.
constexpr const auto &kDims = kernels::keys::attn_f32::head_dim;
constexpr const auto &kTensorCoreDims = kernels::keys::attn_f32x3::head_dim;
constexpr int64_t kMaxDim = last_of(kDims);
constexpr int64_t kMaxTensorCoreDim = last_of(kTensorCoreDims);

// The head dim of the kernel that takes D (kMaxDim at most).
int64_t dim_bucket(int64_t d) { return bucket_of(kDims, d); }
constexpr bool same_buckets() {
  for (int64_t d = 1; d <= kMaxTensorCoreDim; ++d)
    if (bucket_of(kTensorCoreDims, d) != bucket_of(kDims, d)) return false;
  return true;
}
static_assert(same_buckets(), "up to kMaxTensorCoreDim both families pad D alike");

kaio_status plan(kaio_device *device, KernelId id, int64_t seq, Launch *out) {
  KAIO_TRY(require_arch(device, 8, 0, "f32 flash attention (PTX sm_80)"));
  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(id, &fn));
  if (fn.info->cols_per_block == 0)
    return fail(KAIO_ERROR_INTERNAL, "%s: an f32 attention kernel lacks its launch annotation.",
                api_name());
  *out = launch_of(fn);
  out->grid = static_cast<unsigned>((seq + fn.info->cols_per_block - 1) / fn.info->cols_per_block);
  return KAIO_OK;
}

// Checks one [S, D] f32 view.
kaio_status check_sd(const char *arg, const kaio_tensor *t,
                     const kaio_device *device, int64_t seq, int64_t dim, CheckedView *out) {
  if (!t)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument '%s' is NULL; pass a kaio_tensor.",
                api_name(), arg);
  KAIO_TRY(check_view(arg, t, device, out));
  KAIO_TRY(check_dtype(arg, *out, KAIO_DTYPE_F32));
  return check_shape(arg, *out, seq, dim);
}

// S and D from q, with the limits every f32 flash call shares.
kaio_status shape_from_q(const kaio_tensor *q, const kaio_device *device, CheckedView *qv) {
  if (!q)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'q' is NULL; pass a kaio_tensor.",
                api_name());
  KAIO_TRY(check_view("q", q, device, qv));
  KAIO_TRY(check_dtype("q", *qv, KAIO_DTYPE_F32));
  if (qv->cols > kMaxDim)
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: argument 'q' has %" PRId64 " columns (the head dim D); the f32 flash kernels "
                "take D <= %" PRId64 ". Use the f16/bf16 kaio_attention for larger heads.",
                api_name(), qv->cols, kMaxDim);
  if (qv->rows > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION, "%s: S is %" PRId64 "; at most %d.", api_name(),
                qv->rows, INT32_MAX);
  return KAIO_OK;
}

kaio_status check_lse(const kaio_tensor *t, const kaio_device *device,
                      int64_t seq, CheckedView *out) {
  if (!t)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'lse' is NULL; pass a kaio_tensor.",
                api_name());
  KAIO_TRY(check_view("lse", t, device, out));
  KAIO_TRY(check_dtype("lse", *out, KAIO_DTYPE_F32));
  return check_shape("lse", *out, 1, seq);
}

}  // namespace

kaio_status run_attention_f32(kaio_stream *stream, const kaio_tensor *q,
                              const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *out,
                              const kaio_tensor *lse, bool causal) {
  KAIO_TRY(check_stream(stream));
  kaio_device *device = stream->device;
  CheckedView qv, kv, vv, ov, lv;
  KAIO_TRY(shape_from_q(q, device, &qv));
  const int64_t S = qv.rows, D = qv.cols;
  KAIO_TRY(check_sd("k", k, device, S, D, &kv));
  KAIO_TRY(check_sd("v", v, device, S, D, &vv));
  KAIO_TRY(check_sd("out", out, device, S, D, &ov));
  for (const auto &[name, in] : {std::pair{"q", &qv}, {"k", &kv}, {"v", &vv}})
    KAIO_TRY(check_no_partial_overlap("out", ov, name, *in, false));
  if (lse) {
    KAIO_TRY(check_lse(lse, device, S, &lv));
    for (const auto &[name, in] : {std::pair{"q", &qv}, {"k", &kv}, {"v", &vv}, {"out", &ov}})
      KAIO_TRY(check_no_partial_overlap("lse", lv, name, *in, false));
  }
  unsigned long long pq = qv.address, pk = kv.address, pv = vv.address, po = ov.address,
                     pl = lse ? lv.address : 0;
  unsigned long long ldq = qv.row_stride, ldk = kv.row_stride, ldv = vv.row_stride,
                     ldo = ov.row_stride;
  unsigned seq = static_cast<unsigned>(S), dim = static_cast<unsigned>(D), c = causal ? 1 : 0;
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  Launch p;
  if (D <= kMaxTensorCoreDim) {
    KAIO_TRY(plan(device, kernels::attn_f32x3(Pass::fwd, dim_bucket(D)), S, &p));
    // the backward's parameter list; the gradient slots are unused
    unsigned long long none = 0;
    void *params[] = {&none, &pq,  &pk,  &pv,   &po,   &pl,   &none, &none, &none, &none, &ldq,
                      &ldk,  &ldv, &ldo, &none, &none, &none, &seq,  &dim,  &scale, &c};
    return launch_builtin(device, p, stream, params);
  }
  KAIO_TRY(plan(device, kernels::attn_f32(Pass::fwd, dim_bucket(D)), S, &p));
  void *params[] = {&pq, &pk, &pv, &po, &pl, &ldq, &ldk, &ldv, &ldo, &seq, &dim, &scale, &c};
  return launch_builtin(device, p, stream, params);
}

kaio_status run_attention_f32_backward(kaio_stream *stream,
                                       const kaio_tensor *const views[9], bool causal) {
  KAIO_TRY(check_stream(stream));
  kaio_device *device = stream->device;
  // views: dout, q, k, v, out, lse, dq, dk, dv
  CheckedView qv;
  KAIO_TRY(shape_from_q(views[1], device, &qv));
  const int64_t S = qv.rows, D = qv.cols;
  const char *names[] = {"dout", "q", "k", "v", "out", "lse", "dq", "dk", "dv"};
  CheckedView v[9];
  for (int i = 0; i < 9; ++i) {
    if (i == 5)
      KAIO_TRY(check_lse(views[i], device, S, &v[i]));
    else
      KAIO_TRY(check_sd(names[i], views[i], device, S, D, &v[i]));
  }
  for (int o = 6; o < 9; ++o)
    for (int i = 0; i < 9; ++i)
      if (i != o) KAIO_TRY(check_no_partial_overlap(names[o], v[o], names[i], v[i], false));
  unsigned seq = static_cast<unsigned>(S), dim = static_cast<unsigned>(D), c = causal ? 1 : 0;
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  if (D <= kMaxTensorCoreDim) {
    // rowsum(dout ∘ out) into column 0 of dq, dK/dV reading it, then dQ
    // (which reads its own rows' sums before overwriting them).
    Launch rowsum, dq, dkdv;
    KAIO_TRY(plan(device, kernels::attn_f32_rowsum(), S, &rowsum));
    KAIO_TRY(plan(device, kernels::attn_f32x3(Pass::dq, dim_bucket(D)), S, &dq));
    KAIO_TRY(plan(device, kernels::attn_f32x3(Pass::dkdv, dim_bucket(D)), S, &dkdv));
    unsigned long long ptr[9], ld[9];
    for (int i = 0; i < 9; ++i) {
      ptr[i] = v[i].address;
      ld[i] = v[i].row_stride;
    }
    // ld[5] (lse) is not a parameter: the kernels index it densely.
    void *params[] = {&ptr[0], &ptr[1], &ptr[2], &ptr[3], &ptr[4], &ptr[5], &ptr[6], &ptr[7],
                      &ptr[8], &ld[0],  &ld[1],  &ld[2],  &ld[3],  &ld[4],  &ld[6],  &ld[7],
                      &ld[8],  &seq,    &dim,    &scale,  &c};
    KAIO_TRY(launch_builtin(device, rowsum, stream, params));
    KAIO_TRY(launch_builtin(device, dkdv, stream, params));
    return launch_builtin(device, dq, stream, params);
  }
  Launch dq, dkdv;
  KAIO_TRY(plan(device, kernels::attn_f32(Pass::dq, dim_bucket(D)), S, &dq));
  KAIO_TRY(plan(device, kernels::attn_f32(Pass::dkdv, dim_bucket(D)), S, &dkdv));
  unsigned long long p_do = v[0].address, pq = v[1].address, pk = v[2].address,
                     pv = v[3].address, po = v[4].address, pl = v[5].address,
                     ga = v[6].address, gb = 0;
  unsigned long long lddo = v[0].row_stride, ldq = v[1].row_stride, ldk = v[2].row_stride,
                     ldv = v[3].row_stride, ldo = v[4].row_stride, ldga = v[6].row_stride,
                     ldgb = 0;
  void *params[] = {&p_do, &pq,   &pk,   &pv,   &po,   &pl,   &ga,   &gb,    &lddo,
                    &ldq,  &ldk,  &ldv,  &ldo,  &ldga, &ldgb, &seq,  &dim,   &scale, &c};
  KAIO_TRY(launch_builtin(device, dq, stream, params));
  ga = v[7].address;
  ldga = v[7].row_stride;
  gb = v[8].address;
  ldgb = v[8].row_stride;
  return launch_builtin(device, dkdv, stream, params);
}

}  // namespace kaio
