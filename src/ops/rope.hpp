// Rotary position embeddings in place on Q and K (ptx/gen_rope.py):
// desc checks, the inv_freq table, kernel choice and launch.
#pragma once

#include <kaio/kaio.h>

#include "ops/plan.hpp"
#include "ops/rope_freq.hpp"

namespace kaio {

struct RopePlan : PlanBase {
  kaio_rope_desc desc{};  // set before plan(); plan() fills rotary_dim 0 in
  RopeFreqs freqs;        // plan(): the table the kernels take by value
  Launch vec, scalar;     // the 16-byte and the element-wise kernel

  // Checks the desc against kaio.h's constraints, computes the table and
  // resolves both kernels (the views pick one at launch).
  kaio_status plan(kaio_device *device);
  // Tensors {Q, K, positions}; Q or K may have a NULL buffer.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

}  // namespace kaio
