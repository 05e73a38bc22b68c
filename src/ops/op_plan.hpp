// A validated, resolved op: what kaio_op holds and what one-shot calls build
// on the stack. Planning does every check that does not depend on the views
// and resolves the kernel; running checks the views and launches.
#pragma once

#include <kaio/kaio.h>

#include <memory>

#include "driver/cuda_abi.hpp"
#include "runtime/device.hpp"
#include "runtime/device_memory.hpp"
#include "runtime/handle.hpp"

namespace kaio {

enum class OpKind { silu_gate, gelu, rmsnorm, softmax, matmul };

// What a matmul adds to a plan; see kaio_matmul_desc.
struct MatmulParams {
  kaio_dtype out_dtype = KAIO_DTYPE_F32;
  kaio_trans trans_a = KAIO_TRANS_N;
  kaio_trans trans_b = KAIO_TRANS_N;
  kaio_matmul_variant variant = KAIO_MATMUL_AUTO;
  int64_t k = 0;
  // the names of (rows, cols, k) in the caller's terms: the backward's
  // products are dA [M, K] reducing N and dB [K, N] reducing M
  const char *dims = "MNK";
  float alpha = 1.0f;
  float beta = 0.0f;
  // Hopper path: A and B reach the kernel as TMA tensor maps with these
  // boxes (inner, outer), encoded at every launch from the views.
  bool tma = false;
  unsigned box_a[2] = {0, 0};
  unsigned box_b[2] = {0, 0};
  // Split-K (Hopper path, op handles only): K cut into `splits` slices of
  // `k_steps_per_split` steps of 64, partial products in the op's workspace,
  // summed in split order by `reduce`.
  unsigned splits = 1;
  unsigned k_steps_per_split = 0;
  cu::CUfunction reduce = nullptr;
  unsigned reduce_block = 0;
};

struct OpPlan {
  OpKind kind = OpKind::silu_gate;
  kaio_dtype dtype = KAIO_DTYPE_INVALID;  // of the inputs
  int64_t rows = 0;                       // of the output
  int64_t cols = 0;
  float eps = 0.0f;
  kaio_gelu_mode gelu_mode = 0;
  MatmulParams matmul;
  cu::CUfunction function = nullptr;
  unsigned grid = 0;
  unsigned grid_y = 1;
  unsigned grid_z = 1;
  unsigned block = 0;
  unsigned shared_bytes = 0;
  // Set by kaio_op_create_*: the plan may own a workspace, freed with the op.
  // One-shot plans never allocate.
  bool prepared = false;
  Workspace workspace;
};

// Checks dims, dtype, options and the device's architecture, then resolves
// the kernel (loading its module on first use) and picks the launch shape.
kaio_status plan_op(const char *caller, kaio_device *device, OpPlan *plan);

// Checks the views against the plan and the stream, then launches.
kaio_status run_op(const char *caller, const kaio_device *device, const OpPlan &plan,
                   kaio_stream *stream, const kaio_tensor *tensors, size_t count);

// The checks every launch makes before looking at the views: the stream is
// valid and on the op's device, and `count` tensors (`order` names them)
// were passed.
kaio_status check_launch(const char *caller, const kaio_device *device, kaio_stream *stream,
                         const kaio_tensor *tensors, size_t count, size_t expected,
                         const char *order);

// Family-specific halves, called by plan_op and run_op.
kaio_status plan_elementwise(const char *caller, kaio_device *device, OpPlan *plan);
kaio_status plan_rows(const char *caller, kaio_device *device, OpPlan *plan);
kaio_status plan_matmul(const char *caller, kaio_device *device, OpPlan *plan);
kaio_status run_elementwise(const char *caller, const kaio_device *device, const OpPlan &plan,
                            kaio_stream *stream, const kaio_tensor *tensors);
kaio_status run_rows(const char *caller, const kaio_device *device, const OpPlan &plan,
                     kaio_stream *stream, const kaio_tensor *tensors);
kaio_status run_matmul(const char *caller, const kaio_device *device, const OpPlan &plan,
                       kaio_stream *stream, const kaio_tensor *tensors);

// The stream handle, and that it belongs to the op's device.
kaio_status check_op_stream(const char *caller, const kaio_device *device,
                            const kaio_stream *stream);

// F32, F16 or BF16: the float dtypes most ops take.
bool is_float_dtype(kaio_dtype dtype);

// Enqueues a built-in kernel with the plan's grid, block and shared memory
// under the device's context.
kaio_status launch_builtin(const char *caller, const kaio_device *device, const OpPlan &plan,
                           kaio_stream *stream, void **params);

}  // namespace kaio

namespace kaio {

// GGUF k-quant ops (ops/kquant_plan.hpp); the deleter lives in kquant.cpp.
struct KquantPlan;
struct KquantPlanDeleter {
  void operator()(KquantPlan *plan) const;
};

// Matmul backward: two products on the transposed-operand kernels, plus a
// rounding pass when dC is f32 (into a workspace the op owns).
struct BackwardPlan {
  int64_t m = 0, n = 0, k = 0;
  kaio_dtype in_dtype = KAIO_DTYPE_INVALID;
  kaio_dtype grad_dtype = KAIO_DTYPE_INVALID;
  kaio_dtype out_dtype = KAIO_DTYPE_INVALID;
  OpPlan da;       // dA = dC · Bᵀ
  OpPlan db;       // dB = Aᵀ · dC
  OpPlan convert;  // f32 dC -> in_dtype, when grad_dtype is f32
  Workspace workspace;
};

BackwardPlan make_backward_plan(const kaio_matmul_backward_desc &desc);
kaio_status plan_matmul_backward(const char *caller, kaio_device *device, BackwardPlan *plan);
kaio_status run_matmul_backward(const char *caller, const kaio_device *device,
                                const BackwardPlan &plan, kaio_stream *stream,
                                const kaio_tensor *tensors, size_t count);

}  // namespace kaio

namespace kaio {

// Quantized ops (ops/quant.hpp): their plan, owned by the op handle.
struct QuantPlan;
struct QuantPlanDeleter {
  void operator()(QuantPlan *plan) const;
};
kaio_status run_quant(const char *caller, const kaio_device *device, const QuantPlan &plan,
                      kaio_stream *stream, const kaio_tensor *tensors, size_t count);

// Attention forward/backward (ops/attention.hpp); the deleter lives there.
struct AttentionPlan;
struct AttentionPlanDeleter {
  void operator()(AttentionPlan *plan) const;
};
}  // namespace kaio
