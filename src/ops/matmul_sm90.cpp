#include "ops/matmul_sm90.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/stream.hpp"

namespace kaio {
namespace {

constexpr int64_t kTileM = 128;
constexpr int64_t kTileN = 256;

// CUtensorMap: 128 opaque bytes, 64-byte aligned.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// cuTensorMapEncodeTiled enums (values fixed by the driver ABI).
constexpr int kTmaFloat16 = 6, kTmaBfloat16 = 9;
constexpr int kInterleaveNone = 0, kSwizzle128 = 3, kL2Promote128 = 2, kOobZeroFill = 0;

KernelId kernel_for(const OpPlan &plan) {
  const MatmulParams &p = plan.matmul;
  return with_dtype_offset(KernelId::matmul_sm90_f16_nn,
                           (plan.dtype == KAIO_DTYPE_BF16 ? 4 : 0) + p.trans_a * 2 + p.trans_b);
}

// A row-major view as a 2-D tensor map: dim 0 is the view's columns (the
// contiguous one, K or M/N depending on the layout), dim 1 its rows.
kaio_status encode(const char *caller, const kaio_device *device, const CheckedView &v,
                   kaio_dtype dtype, const unsigned box[2], TensorMap *out) {
  unsigned long long dims[2] = {static_cast<unsigned long long>(v.cols),
                                static_cast<unsigned long long>(v.rows)};
  unsigned long long strides[1] = {static_cast<unsigned long long>(v.row_stride) * 2};
  unsigned element_strides[2] = {1, 1};
  cu::CUresult r = device->api->cuTensorMapEncodeTiled(
      out, dtype == KAIO_DTYPE_BF16 ? kTmaBfloat16 : kTmaFloat16, 2,
      reinterpret_cast<void *>(v.address), dims, strides, box, element_strides, kInterleaveNone,
      kSwizzle128, kL2Promote128, kOobZeroFill);
  if (r) return fail_driver(r, caller, "cuTensorMapEncodeTiled");
  return KAIO_OK;
}

}  // namespace

bool sm90_applies(const kaio_device *device, const OpPlan &plan) {
  const MatmulParams &p = plan.matmul;
  // sm_90a code runs on compute capability 9.0 exactly.
  return p.variant == KAIO_MATMUL_AUTO && device->info.cc_major == 9 &&
         device->info.cc_minor == 0 && device->api->cuTensorMapEncodeTiled != nullptr;
}

kaio_status plan_matmul_sm90(const char *caller, kaio_device *device, OpPlan *plan) {
  BuiltinFunction fn;
  const KernelId id = kernel_for(*plan);
  KAIO_TRY(device->modules->function(caller, id, &fn));
  MatmulParams &p = plan->matmul;
  if (fn.block == 0 || fn.box_a[0] == 0 || fn.box_b[0] == 0)
    return fail(KAIO_ERROR_INTERNAL, "%s: the Hopper matmul kernel lacks its annotations.",
                caller);
  for (int i = 0; i < 2; ++i) {
    p.box_a[i] = fn.box_a[i];
    p.box_b[i] = fn.box_b[i];
  }
  p.tma = true;
  plan->function = fn.function;
  plan->shared_bytes = fn.shared_bytes;
  plan->block = fn.block;
  // Persistent: at most one CTA per SM, each walking tiles.
  const int64_t tiles =
      ((plan->rows + kTileM - 1) / kTileM) * ((plan->cols + kTileN - 1) / kTileN);
  plan->grid = static_cast<unsigned>(std::min<int64_t>(tiles, device->info.sm_count));
  plan->grid_y = 1;
  return KAIO_OK;
}

kaio_status launch_matmul_sm90(const char *caller, const kaio_device *device, const OpPlan &plan,
                               kaio_stream *stream, const CheckedView &a, const CheckedView &b,
                               const CheckedView &c) {
  const MatmulParams &p = plan.matmul;
  TensorMap map_a, map_b;
  {
    ContextScope scope(device);
    KAIO_TRY(scope.status(caller));
    KAIO_TRY(encode(caller, device, a, plan.dtype, p.box_a, &map_a));
    KAIO_TRY(encode(caller, device, b, plan.dtype, p.box_b, &map_b));
  }
  unsigned long long pc = c.address, ldc = c.row_stride;
  unsigned m = static_cast<unsigned>(plan.rows), n = static_cast<unsigned>(plan.cols),
           k = static_cast<unsigned>(p.k);
  float alpha = p.alpha, beta = p.beta;
  unsigned out_dtype = static_cast<unsigned>(p.out_dtype);
  void *params[] = {&map_a, &map_b, &pc, &m, &n, &k, &ldc, &alpha, &beta, &out_dtype};
  return launch_builtin(caller, device, plan, stream, params);
}

}  // namespace kaio
