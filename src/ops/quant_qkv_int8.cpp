// Fused QKV projection with s8 K x N weights and f16 activations (W8A16): the
// int8-weight decode kernel of ptx/gen_quant_int4.py, one launch for the three
// weight sets (grid.y), the f32 scale (per tensor or per column) applied to
// the f32 sums.
#include <cinttypes>
#include <climits>
#include <string>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/plan_log.hpp"
#include "ops/quant.hpp"

namespace kaio {
namespace {

constexpr int64_t kKStep = 32;
constexpr int64_t kRowsPerTile = 16;
constexpr int64_t kMaxGridZ = 65535;
const char *const kProj[3] = {"q", "k", "v"};

std::string named(const char *base, int p) { return std::string(base) + "_" + kProj[p]; }

kaio_status plan_unlogged(kaio_device *device, QkvInt8Plan *p) {
  const kaio_dtype out = p->out_dtype;
  if (out != KAIO_DTYPE_F16 && out != KAIO_DTYPE_BF16 && out != KAIO_DTYPE_F32)
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: out_dtype is %s (%d); use KAIO_DTYPE_F16, KAIO_DTYPE_BF16 or KAIO_DTYPE_F32.",
                api_name(), kaio_dtype_name(out), out);
  if (p->m < 1 || p->k < 1 || p->m > INT32_MAX || p->k > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: M and K are %" PRId64 " and %" PRId64 "; each must be between 1 and %d.",
                api_name(), p->m, p->k, INT32_MAX);
  if (p->k % kKStep != 0)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: K is %" PRId64 " but must be a multiple of 32 (the kernel's K step); pad K "
                "with zero weights to %" PRId64 ".",
                api_name(), p->k, (p->k + kKStep - 1) / kKStep * kKStep);
  int64_t nmax = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t n = p->n[i];
    if (n < 1 || n > INT32_MAX || n % 4 != 0)
      return fail(KAIO_ERROR_INVALID_DIMENSION,
                  "%s: N_%s is %" PRId64 "; it must be a positive multiple of 4 (4 columns of "
                  "s8 per load).",
                  api_name(), kProj[i], n);
    nmax = n > nmax ? n : nmax;
  }
  if ((p->m + kRowsPerTile - 1) / kRowsPerTile > kMaxGridZ)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: M is %" PRId64 "; at most %" PRId64 " rows per call. Split M.", api_name(),
                p->m, kMaxGridZ * kRowsPerTile);
  KAIO_TRY(require_arch(device, 8, 0, "int8 QKV projection (mma.sync m16n8k16)"));
  BuiltinFunction fn;
  const int64_t rows = p->m <= 8 ? 8 : kRowsPerTile;
  KAIO_TRY(device->modules->function(
      kernels::quant_gemv(kernels::Weights::int8, kernels::Variant::none, KAIO_DTYPE_F16, rows),
      &fn));
  if (fn.info->cols_per_block == 0)
    return fail(KAIO_ERROR_INTERNAL, "%s: the int8 QKV kernel lacks its annotation.", api_name());
  Launch &kp = p->kernel = launch_of(fn);
  kp.grid = static_cast<unsigned>((nmax + fn.info->cols_per_block - 1) / fn.info->cols_per_block);
  kp.grid_y = 3;
  kp.grid_z = static_cast<unsigned>((p->m + rows - 1) / rows);
  log_kernel(device, kp.function, "sm_80, the only family");
  return KAIO_OK;
}

kaio_status run_qkv_int8(const kaio_device *device, const QkvInt8Plan &p,
                         kaio_stream *stream, const kaio_tensor *t) {
  CheckedView x;
  KAIO_TRY(check_aligned_view("x", &t[0], device, 16, 8,
                              "the QKV kernel (16-byte loads of activations)", &x));
  KAIO_TRY(check_dtype("x", x, KAIO_DTYPE_F16));
  KAIO_TRY(check_shape("x", x, p.m, p.k));
  CheckedView w[3], sc[3], out[3];
  unsigned long long pw[3], ldw[3], psc[3], po[3], ldo[3];
  unsigned scstep[3], un[3];
  for (int i = 0; i < 3; ++i) {
    const std::string wn = named("w", i), sn = named("scale", i), on = named("out", i);
    KAIO_TRY(check_aligned_view(wn.c_str(), &t[1 + 2 * i], device, 4, 4,
                                "the QKV kernel (4-byte loads of 4 s8 columns)", &w[i]));
    KAIO_TRY(check_dtype(wn.c_str(), w[i], KAIO_DTYPE_I8));
    if (w[i].rows != p.k || w[i].cols != p.n[i])
      return fail(KAIO_ERROR_SHAPE_MISMATCH,
                  "%s: argument '%s' is %" PRId64 " x %" PRId64 " but must be K x N_%s = %" PRId64
                  " x %" PRId64 " (s8 weights, row-major K x N).",
                  api_name(), wn.c_str(), w[i].rows, w[i].cols, kProj[i], p.k, p.n[i]);
    KAIO_TRY(check_view(sn.c_str(), &t[2 + 2 * i], device, &sc[i]));
    KAIO_TRY(check_dtype(sn.c_str(), sc[i], KAIO_DTYPE_F32));
    if (sc[i].rows != 1 || (sc[i].cols != 1 && sc[i].cols != p.n[i]))
      return fail(KAIO_ERROR_SHAPE_MISMATCH,
                  "%s: argument '%s' is %" PRId64 " x %" PRId64 " but must be 1 x 1 (one scale "
                  "for the tensor) or 1 x N_%s = 1 x %" PRId64 " (one per column).",
                  api_name(), sn.c_str(), sc[i].rows, sc[i].cols, kProj[i], p.n[i]);
    KAIO_TRY(check_view(on.c_str(), &t[7 + i], device, &out[i]));
    KAIO_TRY(check_dtype(on.c_str(), out[i], p.out_dtype));
    KAIO_TRY(check_shape(on.c_str(), out[i], p.m, p.n[i]));
    pw[i] = w[i].address;
    ldw[i] = w[i].row_stride;
    psc[i] = sc[i].address;
    scstep[i] = sc[i].cols == 1 ? 0u : 1u;
    po[i] = out[i].address;
    ldo[i] = out[i].row_stride;
    un[i] = static_cast<unsigned>(p.n[i]);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string on = named("out", i);
    KAIO_TRY(check_no_partial_overlap("x", x, on.c_str(), out[i], false));
    for (int j = 0; j < 3; ++j) {
      KAIO_TRY(check_no_partial_overlap(named("w", j).c_str(), w[j], on.c_str(), out[i], false));
      KAIO_TRY(
          check_no_partial_overlap(named("scale", j).c_str(), sc[j], on.c_str(), out[i], false));
      if (j < i)
        KAIO_TRY(check_no_partial_overlap(named("out", j).c_str(), out[j], on.c_str(),
                                          out[i], false));
    }
  }
  unsigned long long px = x.address, ldx = x.row_stride;
  unsigned um = static_cast<unsigned>(p.m), uk = static_cast<unsigned>(p.k),
           out_dtype = static_cast<unsigned>(p.out_dtype);
  void *params[5 + 7 * 3] = {&px, &ldx, &um, &uk, &out_dtype};
  for (int i = 0; i < 3; ++i) {
    void **q = params + 5 + 7 * i;
    q[0] = &pw[i];
    q[1] = &ldw[i];
    q[2] = &psc[i];
    q[3] = &scstep[i];
    q[4] = &po[i];
    q[5] = &ldo[i];
    q[6] = &un[i];
  }
  return launch_builtin(device, p.kernel, stream, params);
}

}  // namespace

kaio_status QkvInt8Plan::plan(kaio_device *device) {
  this->device = device;
  return log_plan([&] { return plan_unlogged(device, this); },
                  [&] { return quant_subject("qkv int8", m, n, 3, k, KAIO_DTYPE_F16); });
}

kaio_status QkvInt8Plan::run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const {
  KAIO_TRY(check_launch(device, stream, tensors, count, kQkv8Tensors,
                        "{x, w_q, scale_q, w_k, scale_k, w_v, scale_v, out_q, out_k, out_v}"));
  return run_qkv_int8(device, *this, stream, tensors);
}

}  // namespace kaio
