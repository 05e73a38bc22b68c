// Token sampling: logits [B, V] -> token ids, greedy or sampled with
// temperature, top-k, top-p, min-p and penalties (kaio_op_create_sampling).
#pragma once

#include <kaio/kaio.h>

#include "ops/plan.hpp"

namespace kaio {

struct SamplingPlan : PlanBase {
  kaio_sampling_desc desc{};
  Launch sample, penalty, split;
  Workspace workspace;  // PENALTIES: B·V f32 penalised rows, then B·V u32 counts
  // Rows split over split.grid CTAs of span quads each (prepared ops with
  // few rows); split_ws: one record per row (see gen_sampling.py).
  unsigned span = 0;
  Workspace split_ws;
  // Top-k without top-p: the split kernel's one-launch stage 7 (split.grid
  // may be 1 there).
  bool fast_topk = false;

  kaio_status plan(kaio_device *device);
  kaio_status plan_split(kaio_device *device, bool pen);
  // Tensors: {logits, temperature, top_k, top_p, min_p, rng, prev, prev_lens,
  // penalties, tokens, probs, logprobs}.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

}  // namespace kaio
