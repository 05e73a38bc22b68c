// Tensor-core matmul: C = alpha·op(A)·op(B) + beta·C on the sm_80 mma.sync
// kernels (ptx/gen_matmul_sm80.py), f32 accumulation, any M and N.
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/kernel_family.hpp"
#include "ops/matmul.hpp"
#include "ops/matmul_sm90.hpp"
#include "ops/plan_log.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

// The sm_80 kernels' CTA tile, from the kernel registry (every variant,
// dtype and layout has the same); the grid covers C with it.
constexpr const KernelInfo &kSm80Kernel =
    kernel_info(kernels::matmul_sm80(kernels::Variant::sync, KAIO_DTYPE_F16, false, false));
constexpr int64_t kTileM = kSm80Kernel.tile_m;
constexpr int64_t kTileN = kSm80Kernel.tile_n;
constexpr int64_t kMaxGridY = 65535;
// 16-byte cp.async / vector loads of 2-byte elements along K (or M, N).
constexpr int64_t kChunkElems = 8;

bool is_half(kaio_dtype d) { return d == KAIO_DTYPE_F16 || d == KAIO_DTYPE_BF16; }
bool is_float(kaio_dtype d) { return d == KAIO_DTYPE_F32 || is_half(d); }

// Decode shapes (a few activation rows against nn.Linear weights) read the
// weight once on the CUDA cores; a 128-row tile would leave most of the
// tensor cores' work padding.
constexpr int64_t kGemvMaxRows = 16;

bool use_gemv(const MatmulPlan &p) {
  return p.variant == KAIO_MATMUL_AUTO && p.rows <= kGemvMaxRows &&
         p.trans_a == KAIO_TRANS_N && p.trans_b == KAIO_TRANS_T;
}

KernelId gemv_kernel_for(const MatmulPlan &plan) {
  int64_t rows = 1;  // rows per kernel: 1, 2, 4, 8, 16
  while (rows < plan.rows) rows *= 2;
  return kernels::matmul_gemv(plan.dtype, rows);
}

KernelId kernel_for(const MatmulPlan &p) {
  return kernels::matmul_sm80(
      p.variant == KAIO_MATMUL_ASYNC ? kernels::Variant::async : kernels::Variant::sync,
      p.dtype, p.trans_a == KAIO_TRANS_T, p.trans_b == KAIO_TRANS_T);
}

kaio_status check_operand(const char *arg, const kaio_tensor *t, const kaio_device *device,
                          kaio_dtype dtype, int64_t rows, int64_t cols, CheckedView *out) {
  KAIO_TRY(check_view(arg, t, device, out));
  KAIO_TRY(check_dtype(arg, *out, dtype));
  KAIO_TRY(check_shape(arg, *out, rows, cols));
  if (out->address % 16 != 0 || out->row_stride % kChunkElems != 0)
    return fail(KAIO_ERROR_MISALIGNED,
                "%s: argument '%s' starts at byte offset %" PRIu64 " of a 256-byte-aligned "
                "allocation with row_stride %" PRId64 "; the tensor-core kernels need a 16-byte "
                "aligned start and a row_stride that is a multiple of 8 elements. Pad the rows "
                "or copy into an aligned buffer.",
                api_name(), arg, static_cast<uint64_t>(out->address % 256), out->row_stride);
  return KAIO_OK;
}

}  // namespace

kaio_status MatmulPlan::plan_product(kaio_device *device) {
  this->device = device;
  MatmulPlan &p = *this;
  if (!is_half(p.dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: in_dtype is %s (%d); tensor-core matmul takes KAIO_DTYPE_F16 or "
                "KAIO_DTYPE_BF16 inputs.",
                api_name(), kaio_dtype_name(p.dtype), p.dtype);
  if (!is_float(p.out_dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: out_dtype is %s (%d); use KAIO_DTYPE_F32, KAIO_DTYPE_F16 or KAIO_DTYPE_BF16.",
                api_name(), kaio_dtype_name(p.out_dtype), p.out_dtype);
  if ((p.trans_a != KAIO_TRANS_N && p.trans_a != KAIO_TRANS_T) ||
      (p.trans_b != KAIO_TRANS_N && p.trans_b != KAIO_TRANS_T))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: trans_a is %d and trans_b is %d; each must be KAIO_TRANS_N (0) or "
                "KAIO_TRANS_T (1).",
                api_name(), p.trans_a, p.trans_b);
  if (p.variant < KAIO_MATMUL_AUTO || p.variant > KAIO_MATMUL_ASYNC)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: variant is %d; use KAIO_MATMUL_AUTO, KAIO_MATMUL_SYNC or KAIO_MATMUL_ASYNC.",
                api_name(), p.variant);
  const int64_t m = p.rows, n = p.cols;
  const char *dim = p.dims;  // [0] rows, [1] cols, [2] the reduction
  if (m < 1 || n < 1 || k < 1 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: M, N, K are %" PRId64 ", %" PRId64 ", %" PRId64
                "; each must be between 1 and %d.",
                api_name(), dim[0] == 'M' ? m : dim[1] == 'M' ? n : k,
                dim[0] == 'N' ? m : dim[1] == 'N' ? n : k,
                dim[0] == 'K' ? m : dim[1] == 'K' ? n : k, INT32_MAX);
  if (k % kChunkElems != 0)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: %c is %" PRId64 " but must be a multiple of 8 (the products reduce over "
                "it); pad the operands' %c dimension with zeros to %" PRId64 ".",
                api_name(), dim[2], k, dim[2], (k + kChunkElems - 1) / kChunkElems * kChunkElems);
  if ((m + kTileM - 1) / kTileM > kMaxGridY)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: %c is %" PRId64 "; at most %" PRId64 " rows per call. Split %c.", api_name(),
                dim[0], m, kMaxGridY * kTileM, dim[0]);
  if (!std::isfinite(p.alpha) || !std::isfinite(p.beta))
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: alpha is %g and beta is %g; both must be finite.",
                api_name(), static_cast<double>(p.alpha), static_cast<double>(p.beta));
  KAIO_TRY(require_arch(device, 8, 0, "tensor-core matmul (mma.sync m16n8k16)"));
  if (use_gemv(p)) {
    BuiltinFunction fn;
    KAIO_TRY(device->modules->function(gemv_kernel_for(p), &fn));
    if (fn.info->block[0] == 0 || fn.info->cols_per_block == 0)
      return fail(KAIO_ERROR_INTERNAL, "%s: the decode matmul kernel lacks its launch annotation.",
                  api_name());
    launch = launch_of(fn);
    launch.grid =
        static_cast<unsigned>((n + fn.info->cols_per_block - 1) / fn.info->cols_per_block);
    log_kernel(device, fn.function, "AUTO: M <= 16, B transposed: the decode kernel");
    return KAIO_OK;
  }
  const kaio_matmul_variant asked = p.variant;
  FamilyCheck hopper;
  if (p.variant == KAIO_MATMUL_AUTO) {
    // The wgmma kernels where the device runs sm_90a and the driver loads
    // their PTX; elsewhere AUTO means the cp.async pipeline.
    hopper = check_family(device, ModuleId::matmul_sm90, true);
    if (hopper.ok()) return plan_matmul_sm90(device, this, hopper.why);
    p.variant = KAIO_MATMUL_ASYNC;
  }
  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(kernel_for(p), &fn));
  if (log_enabled())
    log_kernel(device, fn.function,
               asked == KAIO_MATMUL_AUTO ? "AUTO: sm_80 cp.async; " + hopper.why
               : asked == KAIO_MATMUL_SYNC ? std::string("variant KAIO_MATMUL_SYNC")
                                           : std::string("variant KAIO_MATMUL_ASYNC"));
  launch = launch_of(fn);
  launch.grid = static_cast<unsigned>((n + kTileN - 1) / kTileN);
  launch.grid_y = static_cast<unsigned>((m + kTileM - 1) / kTileM);
  return KAIO_OK;
}

kaio_status MatmulPlan::plan(kaio_device *device) {
  return log_plan([&] { return plan_product(device); },
                  [&] {
                    char s[160];
                    std::snprintf(s, sizeof s, "M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " %s %s%s",
                                  rows, cols, k, kaio_dtype_name(dtype), trans_a ? "t" : "n",
                                  trans_b ? "t" : "n");
                    return std::string(s);
                  });
}

kaio_status prepare_matmul(const MatmulPlan &p, const kaio_tensor *tensors,
                           const MatmulNames &names, MatmulViews *out) {
  const kaio_device *device = p.device;
  const int64_t m = p.rows, n = p.cols, k = p.k;
  CheckedView &a = out->a, &b = out->b, &c = out->c;
  KAIO_TRY(check_operand(names[0], &tensors[0], device, p.dtype,
                         p.trans_a == KAIO_TRANS_T ? k : m, p.trans_a == KAIO_TRANS_T ? m : k, &a));
  KAIO_TRY(check_operand(names[1], &tensors[1], device, p.dtype,
                         p.trans_b == KAIO_TRANS_T ? n : k, p.trans_b == KAIO_TRANS_T ? k : n, &b));
  KAIO_TRY(check_view(names[2], &tensors[2], device, &c));
  KAIO_TRY(check_dtype(names[2], c, p.out_dtype));
  KAIO_TRY(check_shape(names[2], c, m, n));
  KAIO_TRY(check_no_partial_overlap(names[0], a, names[2], c, false));
  KAIO_TRY(check_no_partial_overlap(names[1], b, names[2], c, false));
  if (p.tma) return encode_matmul_sm90_maps(p, out);
  return KAIO_OK;
}

kaio_status MatmulPlan::run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const {
  KAIO_TRY(check_launch(device, stream, tensors, count, 3, "{A, B, C}"));
  MatmulViews views;
  KAIO_TRY(prepare_matmul(*this, tensors, {"A", "B", "C"}, &views));
  return enqueue_matmul(*this, stream, views);
}

kaio_status enqueue_matmul(const MatmulPlan &p, kaio_stream *stream, const MatmulViews &views) {
  if (p.tma) return enqueue_matmul_sm90(p, stream, views);
  const CheckedView &a = views.a, &b = views.b, &c = views.c;
  const int64_t m = p.rows, n = p.cols, k = p.k;
  unsigned long long pa = a.address, pb = b.address, pc = c.address;
  unsigned um = static_cast<unsigned>(m), un = static_cast<unsigned>(n),
           uk = static_cast<unsigned>(k);
  unsigned long long lda = a.row_stride, ldb = b.row_stride, ldc = c.row_stride;
  float alpha = p.alpha, beta = p.beta;
  unsigned out_dtype = static_cast<unsigned>(p.out_dtype);
  void *params[] = {&pa, &pb, &pc, &um, &un, &uk, &lda, &ldb, &ldc, &alpha, &beta, &out_dtype};
  return launch_builtin(p.device, p.launch, stream, params);
}

}  // namespace kaio
