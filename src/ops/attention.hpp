// FlashAttention forward and backward on the sm_80 mma.sync kernels
// (ptx/gen_attention_sm80.py) and the sm_90a wgmma + TMA forward
// (ptx/gen_attention_sm90.py): planning (checks, kernel resolution, the
// backward's workspace) and launching from rank-2 BSHD views.
#pragma once

#include <kaio/kaio.h>

#include <atomic>
#include <memory>

#include "ops/plan.hpp"
#include "runtime/error_flag.hpp"
#include "runtime/tensor_view.hpp"

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
  bool fused = false;          // sm_90a backward: the fused kernel (kSm90FusedMinKeys)
  // sm_90a backward, fused: one kernel for dK, dV and dQ (f32 adds into the
  // workspace at dq_ws, ordered by the semaphores at sem when the desc is
  // deterministic), then convert (dQ out of the workspace, which it zeroes).
  Launch convert;
  uint64_t dq_ws = 0, sem = 0;  // byte offsets in the workspace
  unsigned sq_pad = 0;         // seq_q rounded up to the fused kernel's query block
  // Fused: set from the fused kernel's launch until convert is enqueued. A
  // launch that finds it set (convert failed: the dQ sums stay in the
  // workspace) zeroes dq_ws and the semaphores on its stream first.
  std::shared_ptr<std::atomic<bool>> dq_ws_dirty;
  Workspace workspace;  // backward: Dv, B·Hq·Sq f32 (sm_90a: then dQ, semaphores); decode: the splits' O, LSE, merge counts
  // The decode kernels (ptx/gen_attention_decode.py, src/ops/attention_decode.cpp).
  bool paged = false;          // set before plan(): the paged op
  int32_t page_size = 0;       // paged: set before plan()
  bool decode = false;         // set by plan(): the forward runs the decode kernels
  unsigned splits = 1;         // key splits (1: no workspace, no merge)
  unsigned chunk = 0;          // keys per split
  std::shared_ptr<ErrorFlag> flag;  // paged, prepared: bad seq_lens / block_table

  // Checks the descriptor against the constraints in kaio.h, resolves the
  // kernels and, for the backward, allocates the workspace.
  kaio_status plan(kaio_device *device);
  // Checks the views ({Q, K, V, O, LSE} or {dO, Q, K, V, O, LSE, dQ, dK,
  // dV}) and the stream, then enqueues the kernels.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// The checks the forward makes of its views (src/ops/attention.cpp).
kaio_status check_bshd(const char *arg, const kaio_tensor &t, const kaio_device *device,
                       kaio_dtype dtype, int64_t batch, int64_t seq, int64_t heads, int64_t dim,
                       CheckedView *out);
kaio_status check_lse(const kaio_tensor &t, const kaio_device *device,
                      const kaio_attention_desc &d, CheckedView *out);

// Decode (src/ops/attention_decode.cpp). Whether the forward of a checked
// desc takes the decode kernels; plan_decode resolves them, the split count
// and, when prepared, the workspace (and the paged flag); run_decode
// launches on checked views (lse null: not written); run_paged checks the
// paged op's 7 views and launches.
bool wants_decode(const kaio_attention_desc &d, bool backward);
kaio_status check_decode_desc(const kaio_attention_desc &d, bool backward, bool paged,
                              int32_t page_size);
kaio_status plan_decode(kaio_device *device, AttentionPlan *plan);
kaio_status run_decode(const kaio_device *device, const AttentionPlan &plan, kaio_stream *stream,
                       const CheckedView &q, const CheckedView &k, const CheckedView &v,
                       const CheckedView &o, const CheckedView *lse);
kaio_status run_paged(const kaio_device *device, const AttentionPlan &plan, kaio_stream *stream,
                      const kaio_tensor *t);

// KAIO's f32 single-head flash ops (ptx/gen_attention_f32.py): q, k, v, out
// [S, D] f32, D <= 256, top-left causal. lse may be NULL (forward only).
kaio_status run_attention_f32(kaio_stream *stream, const kaio_tensor *q,
                              const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *out,
                              const kaio_tensor *lse, bool causal);
kaio_status run_attention_f32_backward(kaio_stream *stream,
                                       const kaio_tensor *const views[9], bool causal);

}  // namespace kaio
