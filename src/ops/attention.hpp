// FlashAttention forward and backward on the sm_80 mma.sync kernels
// (ptx/gen_attention_sm80.py) and the sm_90a wgmma + TMA forward
// (ptx/gen_attention_sm90.py): planning (checks, kernel resolution, the
// backward's workspace) and launching from rank-2 BSHD views.
#pragma once

#include <kaio/kaio.h>

#include "ops/plan.hpp"

namespace kaio {

struct AttentionPlan : PlanBase {
  // Set before plan(): the op asked for.
  bool backward = false;
  kaio_attention_desc desc{};  // plan() normalises it: out_dtype, o_dtype and scale filled in
  unsigned causal = 0;         // kernel flag
  int32_t causal_off = 0;      // key j visible to query i iff j <= i + causal_off
  Launch fwd;                  // forward kernel (or unused)
  // The sm_90a kernels (ptx/gen_attention_sm90.py, gen_attention_bwd_sm90.py)
  // take TMA maps: boxes {inner, rows} of the query side (Q, dO) and of the
  // key side (K, V), per kernel.
  struct Boxes {
    unsigned q[2] = {0, 0};
    unsigned kv[2] = {0, 0};
  };
  bool sm90 = false;           // fwd, or dq and dkdv, are the sm_90a kernels
  Boxes fwd_box, dq_box, dkdv_box;
  Launch pre;                  // backward: Dv = rowsum(dO ∘ O)
  Launch dq;                   // backward: dQ over query tiles
  Launch dkdv;                 // backward: dK, dV over key tiles
  Workspace workspace;  // backward: Dv, B·Hq·Sq f32

  // Checks the descriptor against the constraints in kaio.h, resolves the
  // kernels and, for the backward, allocates the workspace.
  kaio_status plan(kaio_device *device);
  // Checks the views ({Q, K, V, O, LSE} or {dO, Q, K, V, O, LSE, dQ, dK,
  // dV}) and the stream, then enqueues the kernels.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// KAIO's f32 single-head flash ops (ptx/gen_attention_f32.py): q, k, v, out
// [S, D] f32, D <= 256, top-left causal. lse may be NULL (forward only).
kaio_status run_attention_f32(kaio_stream *stream, const kaio_tensor *q,
                              const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *out,
                              const kaio_tensor *lse, bool causal);
kaio_status run_attention_f32_backward(kaio_stream *stream,
                                       const kaio_tensor *const views[9], bool causal);

}  // namespace kaio
