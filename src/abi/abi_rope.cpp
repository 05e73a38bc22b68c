// RoPE entry points: the desc's defaults, the prepared op and the one-shot
// call.
#include <kaio/kaio.h>

#include <cstring>

#include "abi/op_entry.hpp"
#include "core/call_context.hpp"
#include "core/desc_init.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"

using kaio::RopeKvCachePlan;
using kaio::RopePlan;

namespace {

kaio_rope_desc default_desc() {
  kaio_rope_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.style = KAIO_ROPE_HALF_SPLIT;
  d.dtype = KAIO_DTYPE_BF16;
  d.scaling = KAIO_ROPE_SCALING_NONE;
  d.theta = 10000.0;
  d.factor = 1.0;
  d.low_freq_factor = 1.0;
  d.high_freq_factor = 4.0;
  d.original_max_position_embeddings = 8192;
  d.beta_fast = 32.0;
  d.beta_slow = 1.0;
  d.truncate = 1;
  return d;
}

// An absent Q or K: a NULL pointer reads as a view with a NULL buffer.
const kaio_tensor *or_absent(const kaio_tensor *t) {
  static const kaio_tensor absent{};
  return t ? t : &absent;
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_rope_desc_init(kaio_rope_desc *desc, size_t struct_size) {
  constexpr const char *fn = "kaio_rope_desc_init";
  return kaio::firewall(fn, [&]() -> kaio_status {
    return kaio::init_desc(desc, struct_size, default_desc());
  });
}

KAIO_API kaio_status kaio_op_create_rope(kaio_op **out, kaio_device *device,
                                         const kaio_rope_desc *desc) {
  constexpr const char *fn = "kaio_op_create_rope";
  return kaio::firewall(fn, [&] {
    return kaio::create_op<RopePlan>(out, device, [&](RopePlan *plan) {
      return kaio::read_desc("kaio_rope_desc_init", desc, &plan->desc);
    });
  });
}

KAIO_API kaio_status kaio_rope(kaio_stream *stream, const kaio_tensor *q, const kaio_tensor *k,
                               const kaio_tensor *positions, const kaio_rope_desc *desc) {
  constexpr const char *fn = "kaio_rope";
  return kaio::firewall(fn, [&]() -> kaio_status {
    RopePlan plan;
    KAIO_TRY(kaio::read_desc("kaio_rope_desc_init", desc, &plan.desc));
    const kaio::NamedView views[] = {
        {"q", or_absent(q), true}, {"k", or_absent(k), true}, {"positions", positions}};
    return kaio::one_shot(stream, views, plan, kaio::FromViews{},
                          " (an I32 [1, tokens] view)");
  });
}

KAIO_API kaio_status kaio_op_create_rope_kv_cache_write(kaio_op **out, kaio_device *device,
                                                       const kaio_rope_desc *desc) {
  constexpr const char *fn = "kaio_op_create_rope_kv_cache_write";
  return kaio::firewall(fn, [&] {
    return kaio::create_op<RopeKvCachePlan>(out, device, [&](RopeKvCachePlan *plan) {
      return kaio::read_desc("kaio_rope_desc_init", desc, &plan->rope.desc);
    });
  });
}

KAIO_API kaio_status kaio_rope_kv_cache_write(kaio_stream *stream, const kaio_tensor *q,
                                              const kaio_tensor *k, const kaio_tensor *v,
                                              const kaio_tensor *positions,
                                              const kaio_tensor *slot_mapping,
                                              const kaio_tensor *k_cache,
                                              const kaio_tensor *v_cache,
                                              const kaio_rope_desc *desc) {
  constexpr const char *fn = "kaio_rope_kv_cache_write";
  return kaio::firewall(fn, [&]() -> kaio_status {
    RopeKvCachePlan plan;
    KAIO_TRY(kaio::read_desc("kaio_rope_desc_init", desc, &plan.rope.desc));
    const kaio::NamedView views[] = {{"q", or_absent(q), true},
                                     {"k", k},
                                     {"v", or_absent(v), true},
                                     {"positions", positions},
                                     {"slot_mapping", slot_mapping},
                                     {"k_cache", k_cache},
                                     {"v_cache", or_absent(v_cache), true}};
    return kaio::one_shot(stream, views, plan);
  });
}

}  // extern "C"
