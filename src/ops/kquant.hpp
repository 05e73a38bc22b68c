// GGUF k-quant ops (quantize, dequantize, dequant-matmul): what a kaio_op
// holds for them. The kernels are ptx/gen_kquant.py's.
#pragma once

#include <kaio/kaio.h>

#include "ops/matmul.hpp"

namespace kaio {

struct KquantPlan : PlanBase {
  enum class Kind { quantize, dequantize, matmul };
  Kind kind = Kind::quantize;
  kaio_quant_format format = 0;
  kaio_quant_mode mode = KAIO_QUANT_MODE_GGML;
  kaio_dtype dtype = KAIO_DTYPE_INVALID;      // x (quantize), y (dequantize), A (matmul)
  kaio_dtype out_dtype = KAIO_DTYPE_INVALID;  // C (matmul)
  int64_t rows = 0, cols = 0;                 // values; matmul: rows = M, cols = N
  int64_t k = 0;                              // matmul
  Launch launch;                              // the quantize / dequantize / matvec kernel
  Launch unaligned;                           // streamed Q6_K / Q8_0 matvec: the kernel for
                                              // a W its windows do not fit
                                              // (stream_windows_fit)
  unsigned ring_stages = 0;                   // streamed matvec: its ring's depth

  // M > 8 matmul: W is dequantized into w16 (N x K, f16 or bf16), an f32 A
  // is rounded into a16 (M x K f16), then the tensor-core matmul runs.
  bool tensor_core = false;
  Launch convert_a;
  MatmulPlan matmul;
  Workspace w16;
  Workspace a16;

  // Checks the format, mode, dtypes and shapes, resolves the kernels and,
  // for a tensor-core matmul, allocates the workspaces.
  kaio_status plan(kaio_device *device);
  // Checks the views and enqueues. Tensors: quantize {x, q}, dequantize
  // {q, y}, matmul {A, W, C}.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// Values and bytes per block; 0 for an unknown format.
int64_t kquant_block_elems(kaio_quant_format format);
int64_t kquant_block_bytes(kaio_quant_format format);

}  // namespace kaio
