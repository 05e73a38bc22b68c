// Token sampling: logits [B, V] -> token ids, greedy or sampled with
// temperature, top-k, top-p, min-p and penalties (kaio_op_create_sampling).
#pragma once

#include <kaio/kaio.h>

#include "ops/plan.hpp"

namespace kaio {

struct SamplingPlan : PlanBase {
  kaio_sampling_desc desc{};
  Launch sample, penalty;
  Workspace workspace;  // PENALTIES: B·V f32 penalised rows, then B·V u32 counts

  kaio_status plan(kaio_device *device);
  // Tensors: {logits, temperature, top_k, top_p, min_p, rng, prev, prev_lens,
  // penalties, tokens, probs, logprobs}.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

}  // namespace kaio
