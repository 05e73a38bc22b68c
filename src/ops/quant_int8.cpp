// INT8 W8A8 matmul: exact int32 sums, then alpha and the optional row / column
// scales. Compute capability 9.0 runs the wgmma s8 kernels fed by TMA
// (gen_matmul_sm90.py); elsewhere, or with KAIO_MATMUL_ASYNC, the mma.sync
// m16n8k32 kernel (gen_quant_int8.py). Both scale in the same order.
#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <string>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/kernel_family.hpp"
#include "ops/plan_log.hpp"
#include "ops/quant.hpp"
#include "ops/tensor_map.hpp"
#include "runtime/context_scope.hpp"

namespace kaio {
namespace {

// The kernels' tiles, from the kernel registry: the sm_80 kernel's square
// CTA tile, and the sm_90a ones' M, K step and wide N.
constexpr const KernelInfo &kSm80Kernel = kernel_info(kernels::matmul_int8_sm80());
constexpr const KernelInfo &kHopperKernel =
    kernel_info(kernels::matmul_sm90(KAIO_DTYPE_I8, false, true, kernels::Tile::n256));
constexpr int64_t kTile = kSm80Kernel.tile_m;
static_assert(kSm80Kernel.tile_n == kTile);
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kKAlign = 16;           // 16-byte cp.async chunks of s8 along K
constexpr int64_t kMaxK = 131071;         // K * 128 * 128 stays below 2^31
constexpr int64_t kHopperTileM = kHopperKernel.tile_m, kHopperStepK = kHopperKernel.tile_k;
constexpr int64_t kHopperTileN = kHopperKernel.tile_n;

// 128 x 256 tiles, or 128 x 128 when the wide ones would leave more than
// half the SMs idle (the same trade as the f16 matmul's narrow tiles).
kernels::Tile hopper_tile(int64_t m, int64_t n, int64_t sms) {
  const int64_t wide =
      ((m + kHopperTileM - 1) / kHopperTileM) * ((n + kHopperTileN - 1) / kHopperTileN);
  return wide * 2 <= sms ? kernels::Tile::n128 : kernels::Tile::n256;
}

bool int8_out(kaio_dtype d) {
  return d == KAIO_DTYPE_F32 || d == KAIO_DTYPE_F16 || d == KAIO_DTYPE_BF16 ||
         d == KAIO_DTYPE_I32;
}

// An optional f32 scale vector: absent, or a 1 x len view.
kaio_status check_scale_vector(const char *arg, const kaio_tensor &t, const kaio_device *device,
                               int64_t len, const char *what, unsigned long long *address) {
  *address = 0;
  if (absent(t)) return KAIO_OK;
  CheckedView v;
  KAIO_TRY(check_view(arg, &t, device, &v));
  KAIO_TRY(check_dtype(arg, v, KAIO_DTYPE_F32));
  if (v.rows != 1 || v.cols != len)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: argument '%s' is %" PRId64 " x %" PRId64 " but must be 1 x %" PRId64
                " (one f32 per %s), or a view with a NULL buffer for no scale.",
                api_name(), arg, v.rows, v.cols, len, what);
  *address = v.address;
  return KAIO_OK;
}

kaio_status plan_unlogged(kaio_device *device, Int8Plan *plan) {
  if (!int8_out(plan->out_dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: out_dtype is %s (%d); use KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16 "
                "or KAIO_DTYPE_I32.",
                api_name(), kaio_dtype_name(plan->out_dtype), plan->out_dtype);
  const int64_t m = plan->m, n = plan->n, k = plan->k;
  if (m < 1 || n < 1 || k < 1 || m > INT32_MAX || n > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: M, N, K are %" PRId64 ", %" PRId64 ", %" PRId64
                "; each must be between 1 and %d.",
                api_name(), m, n, k, INT32_MAX);
  if (k % kKAlign != 0 || k > kMaxK)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: K is %" PRId64 " but must be a multiple of 16 and at most %" PRId64
                " (int32 sums of K products of 8-bit values); pad K with zeros to a multiple "
                "of 16, or split K.",
                api_name(), k, kMaxK);
  if ((m + kTile - 1) / kTile > kMaxGridY)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: M is %" PRId64 "; at most %" PRId64 " rows per call. Split M.", api_name(), m,
                kMaxGridY * kTile);
  if (!std::isfinite(plan->alpha))
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: alpha is %g; it must be finite.", api_name(),
                static_cast<double>(plan->alpha));
  if (plan->out_dtype == KAIO_DTYPE_I32 && plan->alpha != 1.0f)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: alpha is %g but an i32 output holds the exact integer sums; use alpha 1 "
                "(and no scale vectors) or a float output dtype.",
                api_name(), static_cast<double>(plan->alpha));
  if (plan->variant != KAIO_MATMUL_AUTO && plan->variant != KAIO_MATMUL_ASYNC)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: variant is %d; int8 matmul takes KAIO_MATMUL_AUTO or KAIO_MATMUL_ASYNC (the "
                "mma.sync kernel).",
                api_name(), plan->variant);
  KAIO_TRY(require_arch(device, 8, 0, "int8 matmul (mma.sync m16n8k32 s8)"));
  BuiltinFunction fn;
  // AUTO: wgmma s8 where the device runs sm_90a and the driver loads it.
  const FamilyCheck hopper = plan->variant == KAIO_MATMUL_AUTO
                                 ? check_family(device, ModuleId::matmul_sm90, true)
                                 : FamilyCheck{};
  if (hopper.ok()) {
    KAIO_TRY(device->modules->function(
        kernels::matmul_sm90(KAIO_DTYPE_I8, false, true, hopper_tile(m, n, device->info.sm_count)),
        &fn));
    const int64_t tile_n = fn.info->tile_n;
    if (!tma_box(fn, "tmap_a", plan->box_a) || !tma_box(fn, "tmap_b", plan->box_b))
      return fail(KAIO_ERROR_INTERNAL, "%s: the Hopper int8 kernel lacks its TMA boxes.",
                  api_name());
    plan->tma = true;
    Launch &kp = plan->kernel = launch_of(fn);
    // Persistent: at most one CTA per SM, each walking tiles.
    const int64_t tiles = ((m + kHopperTileM - 1) / kHopperTileM) * ((n + tile_n - 1) / tile_n);
    kp.grid = static_cast<unsigned>(std::min<int64_t>(tiles, device->info.sm_count));
    if (log_enabled()) log_kernel(device, fn.function, "AUTO: " + hopper.why);
    return KAIO_OK;
  }
  KAIO_TRY(device->modules->function(kernels::matmul_int8_sm80(), &fn));
  if (log_enabled())
    log_kernel(device, fn.function,
               plan->variant == KAIO_MATMUL_AUTO ? "AUTO: sm_80 cp.async; " + hopper.why
                                                 : std::string("variant KAIO_MATMUL_ASYNC"));
  Launch &kp = plan->kernel = launch_of(fn);
  kp.grid = static_cast<unsigned>((n + kTile - 1) / kTile);
  kp.grid_y = static_cast<unsigned>((m + kTile - 1) / kTile);
  return KAIO_OK;
}

kaio_status run_int8(const kaio_device *device, const Int8Plan &plan,
                     kaio_stream *stream, const kaio_tensor *t) {
  const int64_t m = plan.m, n = plan.n, k = plan.k;
  const char *why = "the int8 kernel (16-byte cp.async of s8)";
  CheckedView a, b, c;
  KAIO_TRY(check_aligned_view("A", &t[0], device, 16, kKAlign, why, &a));
  KAIO_TRY(check_dtype("A", a, KAIO_DTYPE_I8));
  KAIO_TRY(check_shape("A", a, m, k));
  KAIO_TRY(check_view("B", &t[1], device, &b));
  KAIO_TRY(check_dtype("B", b, KAIO_DTYPE_I8));
  if (b.rows != n || b.cols != k)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: argument 'B' is %" PRId64 " x %" PRId64 " but must be N x K = %" PRId64
                " x %" PRId64 " (int8 weights are taken transposed, as nn.Linear stores them); "
                "transpose a K x N weight once when loading it.",
                api_name(), b.rows, b.cols, n, k);
  KAIO_TRY(check_aligned_view("B", &t[1], device, 16, kKAlign, why, &b));
  unsigned long long psa = 0, psb = 0;
  KAIO_TRY(check_scale_vector("sa", t[2], device, m, "row of A", &psa));
  KAIO_TRY(check_scale_vector("sb", t[3], device, n, "column of B", &psb));
  if (plan.out_dtype == KAIO_DTYPE_I32 && (psa || psb))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: C is i32 (the exact integer sums) but a scale vector was given; pass "
                "views with NULL buffers for sa and sb, or use a float C.",
                api_name());
  KAIO_TRY(check_view("C", &t[4], device, &c));
  KAIO_TRY(check_dtype("C", c, plan.out_dtype));
  KAIO_TRY(check_shape("C", c, m, n));
  KAIO_TRY(check_no_partial_overlap("A", a, "C", c, false));
  KAIO_TRY(check_no_partial_overlap("B", b, "C", c, false));

  unsigned long long pa = a.address, pb = b.address, pc = c.address;
  unsigned um = static_cast<unsigned>(m), un = static_cast<unsigned>(n),
           uk = static_cast<unsigned>(k);
  unsigned long long lda = a.row_stride, ldb = b.row_stride, ldc = c.row_stride;
  float alpha = plan.alpha;
  unsigned out_dtype = static_cast<unsigned>(plan.out_dtype);
  if (plan.tma) {
    TensorMap map_a, map_b;
    {
      ContextScope scope(device);
      KAIO_TRY(scope.status());
      KAIO_TRY(encode_tensor_map(device, a, KAIO_DTYPE_I8, plan.box_a, &map_a));
      KAIO_TRY(encode_tensor_map(device, b, KAIO_DTYPE_I8, plan.box_b, &map_b));
    }
    // No beta, and K in one split: the s32 sums stay exact.
    float beta = 0.0f;
    unsigned kper = static_cast<unsigned>((k + kHopperStepK - 1) / kHopperStepK);
    unsigned long long split_elems = 0;
    void *params[] = {&map_a, &map_b, &pc,   &um,   &un,          &uk,  &ldc,
                      &alpha, &beta,  &out_dtype, &kper, &split_elems, &psa, &psb};
    return launch_builtin(device, plan.kernel, stream, params);
  }
  void *params[] = {&pa, &pb, &pc, &um, &un, &uk, &lda, &ldb, &ldc, &alpha, &psa, &psb,
                    &out_dtype};
  return launch_builtin(device, plan.kernel, stream, params);
}

}  // namespace

kaio_status Int8Plan::plan(kaio_device *device) {
  this->device = device;
  return log_plan([&] { return plan_unlogged(device, this); },
                  [&] { return quant_subject("int8", m, &n, 1, k, KAIO_DTYPE_I8); });
}

kaio_status Int8Plan::run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const {
  KAIO_TRY(check_launch(device, stream, tensors, count, kInt8Tensors, "{A, B, sa, sb, C}"));
  return run_int8(device, *this, stream, tensors);
}

}  // namespace kaio
