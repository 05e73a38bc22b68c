// kaio_op: what an op handle holds. Each family plans into its own type; the
// handle keeps exactly one of them, so a launch dispatches on what was made.
#pragma once

#include <kaio/kaio.h>

#include <memory>
#include <variant>

#include "ops/attention.hpp"
#include "ops/attention_varlen.hpp"
#include "ops/elementwise.hpp"
#include "ops/kquant.hpp"
#include "ops/kv_cache.hpp"
#include "ops/matmul.hpp"
#include "ops/matmul_backward.hpp"
#include "ops/quant.hpp"
#include "ops/rope.hpp"
#include "ops/rows.hpp"
#include "ops/sampling.hpp"
#include "runtime/handle.hpp"

struct kaio_op {
  static constexpr kaio::HandleTag kTag = kaio::HandleTag::op;
  static constexpr const char *kName = "kaio_op";
  static constexpr const char *kHowToMake = "create one with a kaio_op_create_* function";
  // A new family adds its plan type here; run_op_handle needs nothing more.
  using Body = std::variant<kaio::ElementwisePlan, kaio::RowsPlan, kaio::MatmulPlan,
                            kaio::MatmulBackwardPlan, kaio::KquantPlan, kaio::Int8Plan,
                            kaio::Int4Plan, kaio::QkvInt8Plan, kaio::AttentionPlan,
                            kaio::KvCacheWritePlan, kaio::RopePlan, kaio::RopeKvCachePlan,
                            kaio::SamplingPlan, kaio::AttentionVarlenPlan>;
  kaio::HandleTag tag = kTag;
  kaio_device *device = nullptr;
  Body body;
};  // destroying it frees the workspace the plan owns, if any

namespace kaio {

// Hands a planned op to the caller: the op retains device.
kaio_status publish_op(kaio_op **out, kaio_device *device, std::unique_ptr<kaio_op> op);

// Checks the views against the handle's plan and the stream, then launches.
kaio_status run_op_handle(const kaio_op &op, kaio_stream *stream,
                          const kaio_tensor *tensors, size_t count);

}  // namespace kaio
