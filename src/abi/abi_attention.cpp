// Attention entry points: the descriptor form (forward, backward) and KAIO's
// rank-2 single-head tensor-core forms.
#include <kaio/kaio.h>

#include <cstring>

#include "abi/op_entry.hpp"
#include "core/call_context.hpp"
#include "core/desc_init.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"

using kaio::api_name;
using kaio::AttentionPlan;
using kaio::fail;

namespace {

kaio_attention_desc default_desc() {
  kaio_attention_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.dtype = KAIO_DTYPE_F16;
  d.mask = KAIO_ATTENTION_MASK_NONE;
  d.variant = KAIO_ATTENTION_AUTO;
  d.deterministic = 1;
  return d;
}

kaio_status create(kaio_op **out, kaio_device *device,
                   const kaio_attention_desc *desc, bool backward) {
  return kaio::create_op<AttentionPlan>(out, device, [&](AttentionPlan *plan) -> kaio_status {
    plan->backward = backward;
    return kaio::read_desc("kaio_attention_desc_init", desc, &plan->desc);
  });
}

// The forward; lse may be NULL (no statistics written).
kaio_status one_shot(kaio_stream *stream, const kaio_tensor *q,
                     const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *o,
                     const kaio_tensor *lse, const kaio_attention_desc &desc) {
  const kaio::NamedView views[] = {{"q", q}, {"k", k}, {"v", v}, {"out", o}, {"lse", lse, true}};
  AttentionPlan plan;
  plan.desc = desc;
  return kaio::one_shot(stream, views, plan);
}

kaio_attention_paged_desc default_paged_desc() {
  kaio_attention_paged_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.page_size = 16;
  return d;
}

// The paged desc into the plan: its reserved fields must be 0.
kaio_status read_paged(const kaio_attention_desc *desc, const kaio_attention_paged_desc *paged,
                       AttentionPlan *plan) {
  KAIO_TRY(kaio::read_desc("kaio_attention_desc_init", desc, &plan->desc));
  kaio_attention_paged_desc p;
  KAIO_TRY(kaio::read_desc("kaio_attention_paged_desc_init", paged, &p));
  if (p.reserved[0] != 0 || p.reserved[1] != 0)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: paged->reserved fields must be 0; initialise the desc with "
                "kaio_attention_paged_desc_init.",
                api_name());
  plan->paged = true;
  plan->page_size = p.page_size;
  return KAIO_OK;
}

// KAIO's rank-2 op: one batch, one head, f16 in, f32 out, top-left causal.
kaio_status single_head(kaio_stream *stream, const kaio_tensor *q, const kaio_tensor *k,
                        const kaio_tensor *v, const kaio_tensor *out, bool causal) {
  const kaio::NamedView views[] = {{"q", q}, {"k", k}, {"v", v}, {"out", out}};
  KAIO_TRY(kaio::require_views(views));
  if (v->cols != q->cols || k->cols != q->cols)
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: q has %lld columns, k %lld and v %lld; this implementation needs k and v "
                "to have q's head dim (Dv == D). Pad v with zero columns to D.",
                api_name(), static_cast<long long>(q->cols), static_cast<long long>(k->cols),
                static_cast<long long>(v->cols));
  kaio_attention_desc d = default_desc();
  d.dtype = KAIO_DTYPE_F16;
  d.out_dtype = KAIO_DTYPE_F32;
  d.mask = causal ? KAIO_ATTENTION_CAUSAL_TOP_LEFT : KAIO_ATTENTION_MASK_NONE;
  d.batch = 1;
  d.heads_q = 1;
  d.heads_kv = 1;
  d.seq_q = q->rows;
  d.seq_k = k->rows;
  d.head_dim = q->cols;
  return one_shot(stream, q, k, v, out, nullptr, d);
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_attention_desc_init(kaio_attention_desc *desc, size_t struct_size) {
  constexpr const char *fn = "kaio_attention_desc_init";
  return kaio::firewall(fn, [&]() -> kaio_status {
    return kaio::init_desc(desc, struct_size, default_desc());
  });
}

KAIO_API kaio_status kaio_op_create_attention(kaio_op **out, kaio_device *device,
                                              const kaio_attention_desc *desc) {
  constexpr const char *fn = "kaio_op_create_attention";
  return kaio::firewall(fn, [&] { return create(out, device, desc, false); });
}

KAIO_API kaio_status kaio_op_create_attention_backward(kaio_op **out, kaio_device *device,
                                                       const kaio_attention_desc *desc) {
  constexpr const char *fn = "kaio_op_create_attention_backward";
  return kaio::firewall(fn, [&] { return create(out, device, desc, true); });
}

KAIO_API kaio_status kaio_attention(kaio_stream *stream, const kaio_tensor *q,
                                    const kaio_tensor *k, const kaio_tensor *v,
                                    const kaio_tensor *o, const kaio_tensor *lse,
                                    const kaio_attention_desc *desc) {
  constexpr const char *fn = "kaio_attention";
  return kaio::firewall(fn, [&]() -> kaio_status {
    kaio_attention_desc d;
    KAIO_TRY(kaio::read_desc("kaio_attention_desc_init", desc, &d));
    return one_shot(stream, q, k, v, o, lse, d);
  });
}

KAIO_API kaio_status kaio_attention_paged_desc_init(kaio_attention_paged_desc *desc,
                                                   size_t struct_size) {
  constexpr const char *fn = "kaio_attention_paged_desc_init";
  return kaio::firewall(fn, [&]() -> kaio_status {
    return kaio::init_desc(desc, struct_size, default_paged_desc());
  });
}

KAIO_API kaio_status kaio_op_create_attention_paged(kaio_op **out, kaio_device *device,
                                                    const kaio_attention_desc *desc,
                                                    const kaio_attention_paged_desc *paged) {
  constexpr const char *fn = "kaio_op_create_attention_paged";
  return kaio::firewall(fn, [&] {
    return kaio::create_op<AttentionPlan>(
        out, device, [&](AttentionPlan *plan) { return read_paged(desc, paged, plan); });
  });
}

KAIO_API kaio_status kaio_attention_paged(kaio_stream *stream, const kaio_tensor *q,
                                          const kaio_tensor *k_pool, const kaio_tensor *v_pool,
                                          const kaio_tensor *block_table,
                                          const kaio_tensor *seq_lens, const kaio_tensor *o,
                                          const kaio_tensor *lse, const kaio_attention_desc *desc,
                                          const kaio_attention_paged_desc *paged) {
  constexpr const char *fn = "kaio_attention_paged";
  return kaio::firewall(fn, [&]() -> kaio_status {
    AttentionPlan plan;
    KAIO_TRY(read_paged(desc, paged, &plan));
    const kaio::NamedView views[] = {{"q", q},           {"k_pool", k_pool},
                                     {"v_pool", v_pool}, {"block_table", block_table},
                                     {"seq_lens", seq_lens}, {"out", o},
                                     {"lse", lse, true}};
    return kaio::one_shot(stream, views, plan);
  });
}

KAIO_API kaio_status kaio_attention_tc(kaio_stream *stream, const kaio_tensor *q,
                                       const kaio_tensor *k, const kaio_tensor *v,
                                       const kaio_tensor *out) {
  constexpr const char *fn = "kaio_attention_tc";
  return kaio::firewall(fn, [&] { return single_head(stream, q, k, v, out, false); });
}

KAIO_API kaio_status kaio_attention_tc_causal(kaio_stream *stream, const kaio_tensor *q,
                                              const kaio_tensor *k, const kaio_tensor *v,
                                              const kaio_tensor *out) {
  constexpr const char *fn = "kaio_attention_tc_causal";
  return kaio::firewall(fn, [&] { return single_head(stream, q, k, v, out, true); });
}

}  // extern "C"

// KAIO's f32 flash family.
extern "C" {

#define KAIO_FLASH_F32(name, causal)                                                         \
  KAIO_API kaio_status kaio_##name(kaio_stream *stream, const kaio_tensor *q,                \
                                   const kaio_tensor *k, const kaio_tensor *v,               \
                                   const kaio_tensor *out) {                                 \
    constexpr const char *fn = "kaio_" #name;                                                \
    return kaio::firewall(fn, [&]() -> kaio_status {                                         \
      KAIO_TRY(kaio::resolve_handle("stream", stream));                                  \
      return kaio::run_attention_f32(stream, q, k, v, out, nullptr, causal);             \
    });                                                                                      \
  }                                                                                          \
  KAIO_API kaio_status kaio_##name##_with_stats(kaio_stream *stream, const kaio_tensor *q,   \
                                                const kaio_tensor *k, const kaio_tensor *v,  \
                                                const kaio_tensor *out,                      \
                                                const kaio_tensor *lse) {                    \
    constexpr const char *fn = "kaio_" #name "_with_stats";                                  \
    return kaio::firewall(fn, [&]() -> kaio_status {                                         \
      if (!lse)                                                                              \
        return fail(KAIO_ERROR_INVALID_ARGUMENT,                                             \
                    "%s: argument 'lse' is NULL; pass an f32 [1, S] view.", fn);             \
      KAIO_TRY(kaio::resolve_handle("stream", stream));                                  \
      return kaio::run_attention_f32(stream, q, k, v, out, lse, causal);                 \
    });                                                                                      \
  }                                                                                          \
  KAIO_API kaio_status kaio_##name##_backward(                                               \
      kaio_stream *stream, const kaio_tensor *dout, const kaio_tensor *q,                    \
      const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *out,                    \
      const kaio_tensor *lse, const kaio_tensor *dq, const kaio_tensor *dk,                  \
      const kaio_tensor *dv) {                                                               \
    constexpr const char *fn = "kaio_" #name "_backward";                                    \
    const kaio_tensor *const views[9] = {dout, q, k, v, out, lse, dq, dk, dv};               \
    return kaio::firewall(fn, [&]() -> kaio_status {                                         \
      KAIO_TRY(kaio::resolve_handle("stream", stream));                                  \
      return kaio::run_attention_f32_backward(stream, views, causal);                    \
    });                                                                                      \
  }

KAIO_FLASH_F32(attention_flash, false)
KAIO_FLASH_F32(attention_flash_causal, true)
#undef KAIO_FLASH_F32

}  // extern "C"
