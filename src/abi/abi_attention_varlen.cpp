// Varlen attention entry points: the desc, the forward op and one-shot, and
// the backward op.
#include <kaio/kaio.h>

#include <cstring>

#include "abi/op_entry.hpp"
#include "core/desc_init.hpp"
#include "core/firewall.hpp"
#include "ops/attention_varlen.hpp"

using kaio::AttentionVarlenPlan;

namespace {

kaio_attention_varlen_desc default_desc() {
  kaio_attention_varlen_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.dtype = KAIO_DTYPE_F16;
  d.mask = KAIO_ATTENTION_MASK_NONE;
  d.variant = KAIO_ATTENTION_AUTO;
  return d;
}

constexpr const char *kInit = "kaio_attention_varlen_desc_init";

kaio_status create(kaio_op **out, kaio_device *device, const kaio_attention_varlen_desc *desc,
                   bool backward) {
  return kaio::create_op<AttentionVarlenPlan>(out, device, [&](AttentionVarlenPlan *plan) {
    plan->backward = backward;
    return kaio::read_desc(kInit, desc, &plan->desc);
  });
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_attention_varlen_desc_init(kaio_attention_varlen_desc *desc,
                                                     size_t struct_size) {
  return kaio::firewall(kInit, [&]() -> kaio_status {
    return kaio::init_desc(desc, struct_size, default_desc());
  });
}

KAIO_API kaio_status kaio_op_create_attention_varlen(kaio_op **out, kaio_device *device,
                                                     const kaio_attention_varlen_desc *desc) {
  constexpr const char *fn = "kaio_op_create_attention_varlen";
  return kaio::firewall(fn, [&] { return create(out, device, desc, false); });
}

KAIO_API kaio_status kaio_op_create_attention_varlen_backward(
    kaio_op **out, kaio_device *device, const kaio_attention_varlen_desc *desc) {
  constexpr const char *fn = "kaio_op_create_attention_varlen_backward";
  return kaio::firewall(fn, [&] { return create(out, device, desc, true); });
}

KAIO_API kaio_status kaio_attention_varlen(kaio_stream *stream, const kaio_tensor *q,
                                           const kaio_tensor *k, const kaio_tensor *v,
                                           const kaio_tensor *cu_seqlens_q,
                                           const kaio_tensor *cu_seqlens_k, const kaio_tensor *o,
                                           const kaio_tensor *lse,
                                           const kaio_attention_varlen_desc *desc) {
  constexpr const char *fn = "kaio_attention_varlen";
  return kaio::firewall(fn, [&]() -> kaio_status {
    AttentionVarlenPlan plan;
    KAIO_TRY(kaio::read_desc(kInit, desc, &plan.desc));
    const kaio::NamedView views[] = {{"q", q},   {"k", k},
                                     {"v", v},   {"cu_seqlens_q", cu_seqlens_q},
                                     {"cu_seqlens_k", cu_seqlens_k},
                                     {"out", o}, {"lse", lse, true}};
    return kaio::one_shot(stream, views, plan);
  });
}

}  // extern "C"
