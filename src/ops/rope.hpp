// Rotary position embeddings in place on Q and K (ptx/gen_rope.py):
// desc checks, the inv_freq table, kernel choice and launch.
#pragma once

#include <kaio/kaio.h>

#include <memory>
#include <string>

#include "ops/plan.hpp"
#include "ops/rope_freq.hpp"
#include "runtime/error_flag.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {

struct RopePlan : PlanBase {
  kaio_rope_desc desc{};  // set before plan(); plan() fills rotary_dim 0 in
  RopeFreqs freqs;        // plan(): the table the kernels take by value
  Launch vec, scalar;     // the 16-byte and the element-wise kernel

  // Checks the desc against kaio.h's constraints, computes the table and
  // resolves both kernels (the views pick one at launch).
  kaio_status plan(kaio_device *device);
  // plan() without the kernels or a log line (the KV-cache form's first step).
  kaio_status prepare(kaio_device *device);
  // What KAIO_LOG says the op is: "Hq 32 Hk 8 D 128 rot 128 half split f16 ...".
  std::string subject() const;
  // Tensors {Q, K, positions}; Q or K may have a NULL buffer.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// RoPE on Q in place and on K as it is written into a paged KV cache, V
// copied to its cache (ptx/gen_rope.py's kaio_rope_cache_* kernels).
struct RopeKvCachePlan : PlanBase {
  RopePlan rope;                    // the desc, its table and checks
  Launch vec, scalar;               // the cache kernels
  std::shared_ptr<ErrorFlag> flag;  // the device's op flag (ops/op_flag.hpp)

  kaio_status plan(kaio_device *device);
  kaio_status plan_unlogged(kaio_device *device);
  // Tensors {Q, K, V, positions, slot_mapping, k_cache, v_cache}; Q may be
  // absent, V and v_cache both or neither.
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// What the RoPE launches share (rope.cpp), for the KV-cache form
// (rope_kv_cache.cpp): Q, K and positions checked against the desc, and the
// launch shape of gen_rope.py's kernels.
struct RopeViews {
  CheckedView q, k, pos;
  bool has_q = false, has_k = false;
  int64_t tokens = 0;
};
kaio_status check_rope_views(const RopePlan &plan, const kaio_tensor &q, const kaio_tensor &k,
                             const kaio_tensor &positions, RopeViews *out);
// That two views of one buffer are disjoint column ranges (or apart).
kaio_status check_columns_disjoint(const char *a_name, const CheckedView &a, const char *b_name,
                                   const CheckedView &b);
// Whether a Q or K view suits the 16-byte kernels.
bool rope_vector_ok(const RopePlan &plan, const CheckedView &view);
struct RopeLaunch {
  Launch launch;  // grid and grid_y set
  unsigned units = 0, head_lanes = 1, tok_per_block = 0, head_chunk = 0;
};
// head_lanes: let up to a warp's worth of a token's threads take interleaved
// heads (the plain RoPE kernels); the KV-cache kernels walk every head of a
// chunk per thread (1).
RopeLaunch rope_launch(const RopePlan &plan, const RopeViews &views, bool vector, Launch kernel,
                       bool head_lanes);

}  // namespace kaio
