// Paged prefill entry points: the varlen desc plus the paged desc, as an op
// and as a one-shot call.
#include <kaio/kaio.h>

#include "abi/op_entry.hpp"
#include "core/call_context.hpp"
#include "core/desc_init.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "ops/attention_varlen.hpp"

using kaio::AttentionVarlenPlan;

namespace {

// Both descs into the plan; the paged desc's reserved fields must be 0.
kaio_status read_descs(const kaio_attention_varlen_desc *desc,
                       const kaio_attention_paged_desc *paged, AttentionVarlenPlan *plan) {
  KAIO_TRY(kaio::read_desc("kaio_attention_varlen_desc_init", desc, &plan->desc));
  if (!paged)
    return kaio::fail(KAIO_ERROR_INVALID_ARGUMENT,
                      "%s: argument 'paged' is NULL; pass a kaio_attention_paged_desc set up with "
                      "kaio_attention_paged_desc_init.",
                      kaio::api_name());
  kaio_attention_paged_desc p;
  KAIO_TRY(kaio::read_desc("kaio_attention_paged_desc_init", paged, &p));
  if (p.reserved[0] != 0 || p.reserved[1] != 0)
    return kaio::fail(KAIO_ERROR_INVALID_ARGUMENT,
                      "%s: paged->reserved fields must be 0; initialise the desc with "
                      "kaio_attention_paged_desc_init.",
                      kaio::api_name());
  plan->paged = true;
  plan->page_size = p.page_size;
  return KAIO_OK;
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_op_create_attention_paged_prefill(
    kaio_op **out, kaio_device *device, const kaio_attention_varlen_desc *desc,
    const kaio_attention_paged_desc *paged) {
  constexpr const char *fn = "kaio_op_create_attention_paged_prefill";
  return kaio::firewall(fn, [&] {
    return kaio::create_op<AttentionVarlenPlan>(
        out, device, [&](AttentionVarlenPlan *plan) { return read_descs(desc, paged, plan); });
  });
}

KAIO_API kaio_status kaio_attention_paged_prefill(
    kaio_stream *stream, const kaio_tensor *q, const kaio_tensor *k_pool,
    const kaio_tensor *v_pool, const kaio_tensor *cu_seqlens_q, const kaio_tensor *block_table,
    const kaio_tensor *seq_lens, const kaio_tensor *o, const kaio_tensor *lse,
    const kaio_attention_varlen_desc *desc, const kaio_attention_paged_desc *paged) {
  constexpr const char *fn = "kaio_attention_paged_prefill";
  return kaio::firewall(fn, [&]() -> kaio_status {
    AttentionVarlenPlan plan;
    KAIO_TRY(read_descs(desc, paged, &plan));
    const kaio::NamedView views[] = {{"q", q},
                                     {"k_pool", k_pool},
                                     {"v_pool", v_pool},
                                     {"cu_seqlens_q", cu_seqlens_q},
                                     {"block_table", block_table},
                                     {"seq_lens", seq_lens},
                                     {"out", o},
                                     {"lse", lse, true}};
    return kaio::one_shot(stream, views, plan);
  });
}

}  // extern "C"
