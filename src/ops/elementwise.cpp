// Element-wise ops over contiguous views: fused SiLU gate and GELU.
#include <algorithm>
#include <cinttypes>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "ops/elementwise.hpp"
#include "ops/kernel_family.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

// One trip of the grid-stride loop per thread, two 16-byte vectors each: on
// the H100 this beat persistent grids of 4-16 blocks per SM (~100% of copy
// bandwidth against 84-98%).
constexpr int64_t kVectorsPerThread = 2;

kernels::Op kernel_op(const ElementwisePlan &plan) {
  if (plan.op == ElementwisePlan::Op::silu_gate) return kernels::Op::silu_gate;
  return plan.gelu_mode == KAIO_GELU_ERF ? kernels::Op::gelu_erf : kernels::Op::gelu_tanh;
}

kaio_status plan_elementwise(kaio_device *device, ElementwisePlan *plan) {
  if (plan->op == ElementwisePlan::Op::gelu && plan->gelu_mode != KAIO_GELU_ERF &&
      plan->gelu_mode != KAIO_GELU_TANH)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'mode' is %d; use KAIO_GELU_ERF (1) or KAIO_GELU_TANH (2).",
                api_name(), plan->gelu_mode);
  int64_t n = 0;
  if (__builtin_mul_overflow(plan->rows, plan->cols, &n))
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: %" PRId64 " x %" PRId64 " elements overflow 64 bits.", api_name(), plan->rows,
                plan->cols);
  // The kernels walk u64 byte offsets and step up to a grid stride (< 2^45
  // bytes) past the end; 2^62 bytes leaves that room, and is more memory
  // than any device has.
  const int64_t esize = static_cast<int64_t>(kaio_dtype_size(plan->dtype));
  const int64_t max_elements = (int64_t{1} << 62) / esize;
  if (n > max_elements)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: the shape is %" PRId64 " x %" PRId64 " (%" PRId64 " elements); element-wise "
                "ops take at most %" PRId64 " %s elements (2^62 bytes), as their kernels address "
                "bytes with 64-bit offsets. Check rows and cols, or split the tensor.",
                api_name(), plan->rows, plan->cols, n, max_elements, kaio_dtype_name(plan->dtype));
  BuiltinFunction fn;
  // the kernel, or where it can run its sm_90 twin (a dependent launch)
  KAIO_TRY(resolve_twin(device, kernels::elementwise(kernel_op(*plan), plan->dtype),
                        kernels::elementwise_pdl(kernel_op(*plan), plan->dtype), "", &fn));
  plan->launch = launch_of(fn);
  const int64_t per_vector = 16 / static_cast<int64_t>(kaio_dtype_size(plan->dtype));
  const int64_t per_block = per_vector * kVectorsPerThread * fn.info->block[0];
  int64_t wanted = n / per_block + (n % per_block != 0);
  plan->launch.grid = static_cast<unsigned>(std::clamp<int64_t>(wanted, 1, INT32_MAX));
  return KAIO_OK;
}

}  // namespace

kaio_status ElementwisePlan::plan(kaio_device *device) {
  this->device = device;
  return plan_float_op(device, dtype, rows, cols,
                       [&] { return plan_elementwise(device, this); });
}

kaio_status ElementwisePlan::run(kaio_stream *stream,
                                 const kaio_tensor *tensors, size_t count) const {
  const bool gated = op == Op::silu_gate;
  KAIO_TRY(check_launch(device, stream, tensors, count, gated ? 3 : 2,
                        gated ? "{x, gate, out}" : "{x, out}"));
  const char *names[3] = {"x", gated ? "gate" : "out", "out"};
  CheckedView v[3];
  for (size_t i = 0; i < count; ++i) {
    KAIO_TRY(check_view(names[i], &tensors[i], device, &v[i]));
    KAIO_TRY(check_dtype(names[i], v[i], dtype));
    KAIO_TRY(check_shape(names[i], v[i], rows, cols));
    KAIO_TRY(check_contiguous(names[i], v[i]));
  }
  const CheckedView &out = v[count - 1];
  for (size_t i = 0; i + 1 < count; ++i)
    KAIO_TRY(check_no_partial_overlap(names[i], v[i], "out", out, true));

  unsigned long long x = v[0].address, o = out.address;
  unsigned long long g = gated ? v[1].address : 0;
  unsigned long long n = static_cast<unsigned long long>(rows * cols);
  void *gated_params[] = {&x, &g, &o, &n};
  void *plain_params[] = {&x, &o, &n};
  return launch_builtin(device, launch, stream, gated ? gated_params : plain_params);
}

}  // namespace kaio
