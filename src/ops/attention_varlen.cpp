// Attention on packed variable-length batches: descriptor checks, kernel
// choice and launches. The kernels (the varlen entries of
// ptx/gen_attention_sm80.py and gen_attention_sm90.py) read each sequence's
// rows from cu_seqlens themselves; the host sizes the grid with the
// max_seqlen fields.
#include "ops/attention_varlen.hpp"

#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/kernel_family.hpp"
#include "ops/op_flag.hpp"
#include "ops/key_list.hpp"
#include "ops/plan_log.hpp"
#include "ops/tensor_map.hpp"
#include "runtime/context_scope.hpp"

namespace kaio {
namespace {

constexpr const auto &kFwdDims = kernels::keys::attn_fwd_varlen_sm80::head_dim;
constexpr const auto &kBwdDims = kernels::keys::attn_bwd_varlen_sm80::head_dim;
constexpr const auto &kSm90Dims = kernels::keys::attn_fwd_varlen_sm90::head_dim;
constexpr int64_t kMaxGridY = 65535;

unsigned blocks(int64_t n, int64_t per) { return static_cast<unsigned>((n + per - 1) / per); }

// The enum-valued fields: dtypes, mask, variant and the reserved words.
kaio_status check_kinds(const kaio_attention_varlen_desc &d, bool backward) {
  KAIO_TRY(attention_check_types("varlen attention", d.dtype, d.out_dtype, d.o_dtype, d.mask,
                                 backward));
  if (d.variant < KAIO_ATTENTION_AUTO || d.variant > KAIO_ATTENTION_SM90)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->variant is %d; use KAIO_ATTENTION_AUTO, KAIO_ATTENTION_SM80, "
                "KAIO_ATTENTION_SM80_M128 or KAIO_ATTENTION_SM90.",
                api_name(), d.variant);
  if (d.reserved != 0 || d.reserved2 != 0)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->reserved fields must be 0; initialise the desc with "
                "kaio_attention_varlen_desc_init.",
                api_name());
  return KAIO_OK;
}

// paged: K and V are page pools, so total_k is 0 and bounds nothing.
kaio_status check_shape_fields(const kaio_attention_varlen_desc &d, bool backward, bool paged) {
  const struct {
    const char *name;
    int64_t value, low, high;
  } fields[] = {{"batch", d.batch, 1, INT32_MAX},
                {"heads_q", d.heads_q, 1, INT32_MAX},
                {"heads_kv", d.heads_kv, 1, INT32_MAX},
                {"head_dim", d.head_dim, 1, INT32_MAX},
                {"total_q", d.total_q, 1, INT32_MAX},
                {"total_k", d.total_k, paged ? 0 : 1, paged ? 0 : INT32_MAX},
                {"max_seqlen_q", d.max_seqlen_q, 1, d.total_q},
                {"max_seqlen_k", d.max_seqlen_k, 0, paged ? INT32_MAX : d.total_k}};
  for (const auto &f : fields)
    if (f.value < f.low || f.value > f.high)
      return fail(KAIO_ERROR_INVALID_DIMENSION,
                  "%s: desc->%s is %" PRId64 "; it must be between %" PRId64 " and %" PRId64
                  " (max_seqlen_q at most total_q, max_seqlen_k at most total_k; set every shape "
                  "field of the desc).",
                  api_name(), f.name, f.value, f.low, f.high);
  if (d.heads_q % d.heads_kv != 0)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: desc->heads_q is %" PRId64 " and desc->heads_kv is %" PRId64
                "; heads_q must be a multiple of heads_kv.",
                api_name(), d.heads_q, d.heads_kv);
  if (backward ? !in_list(kBwdDims, d.head_dim) : !in_list(kFwdDims, d.head_dim))
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: desc->head_dim is %" PRId64 "; the varlen %s kernels take %s. Pad the head "
                "dimension with zeros to the next supported size.",
                api_name(), d.head_dim, backward ? "backward" : "forward",
                (backward ? list_text(kBwdDims, "or") : list_text(kFwdDims, "or")).c_str());
  if (d.variant == KAIO_ATTENTION_SM90 && (backward || !in_list(kSm90Dims, d.head_dim)))
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: desc->variant is KAIO_ATTENTION_SM90 but %s; the varlen sm_90a kernel is a "
                "forward for head dims %s. Use KAIO_ATTENTION_AUTO.",
                api_name(), backward ? "this is the backward" : "head_dim is not one of them",
                list_text(kSm90Dims, "and").c_str());
  if (d.variant == KAIO_ATTENTION_SM80_M128 && d.head_dim > kMaxM128Dim)
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: desc->variant is KAIO_ATTENTION_SM80_M128 but head_dim is %" PRId64
                "; that variant takes head dims up to %" PRId64 ". Use KAIO_ATTENTION_AUTO.",
                api_name(), d.head_dim, kMaxM128Dim);
  if (d.batch * d.heads_q > kMaxGridY)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: batch * heads_q is %" PRId64 " (desc->batch %" PRId64 ", desc->heads_q %"
                PRId64 "); the kernels run one grid row per (sequence, head), at most %" PRId64
                ". Split the batch across calls.",
                api_name(), d.batch * d.heads_q, d.batch, d.heads_q, kMaxGridY);
  if (d.total_q * d.heads_q > INT32_MAX || d.total_k * d.heads_kv > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: total_q * heads_q is %" PRId64 " and total_k * heads_kv %" PRId64
                "; each must be at most %d. Split the batch.",
                api_name(), d.total_q * d.heads_q, d.total_k * d.heads_kv, INT32_MAX);
  if (!(std::isfinite(d.softmax_scale) && d.softmax_scale > 0.0f))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->softmax_scale is %g; it must be finite and > 0 (0 in the desc means "
                "1/sqrt(head_dim)).",
                api_name(), static_cast<double>(d.softmax_scale));
  return KAIO_OK;
}

const char *variant_why(const kaio_attention_varlen_desc &d, bool sm90) {
  if (d.variant != KAIO_ATTENTION_AUTO) return "variant set in the desc";
  return sm90 ? "AUTO: sm_90a" : "AUTO: sm_80";
}

}  // namespace

kaio_status varlen_pick_sm90(const kaio_device *device, const kaio_attention_varlen_desc &d,
                             bool *sm90) {
  const FamilyCheck hopper = check_family(device, ModuleId::attention_fwd_sm90, true);
  if (d.variant == KAIO_ATTENTION_SM90 && hopper.verdict == FamilyCheck::Verdict::driver)
    return fail_variant_driver("desc->variant", "KAIO_ATTENTION_SM90", "KAIO_ATTENTION_AUTO",
                               device, ModuleId::attention_fwd_sm90);
  if (d.variant == KAIO_ATTENTION_SM90 && !hopper.ok())
    return fail(KAIO_ERROR_UNSUPPORTED_ARCH,
                "%s: desc->variant is KAIO_ATTENTION_SM90 but device %d has compute capability "
                "%d.%d (or a driver without cuTensorMapEncodeTiled); that variant needs exactly "
                "9.0 (sm_90a). Use KAIO_ATTENTION_AUTO.",
                api_name(), device->ordinal, device->info.cc_major, device->info.cc_minor);
  *sm90 = d.variant == KAIO_ATTENTION_SM90 ||
          (d.variant == KAIO_ATTENTION_AUTO && in_list(kSm90Dims, d.head_dim) && hopper.ok());
  return KAIO_OK;
}

namespace {

kaio_status plan_unlogged(kaio_device *device, bool backward, AttentionVarlenPlan *plan) {
  kaio_attention_varlen_desc &d = plan->desc;
  if (d.out_dtype == 0) d.out_dtype = d.dtype;
  if (d.o_dtype == 0) d.o_dtype = d.dtype;
  if (d.softmax_scale == 0.0f)
    d.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim)));
  const bool paged = plan->paged;
  KAIO_TRY(check_kinds(d, backward));
  if (paged) KAIO_TRY(paged_prefill_check(d, plan->page_size));
  KAIO_TRY(check_shape_fields(d, backward, paged));
  KAIO_TRY(require_arch(device, 8, 0, "varlen attention (mma.sync m16n8k16, cp.async)"));
  // bad device data (cu_seqlens; a paged cache's seq_lens and block table)
  // is reported through the device's op flag, one-shot calls included
  KAIO_TRY(device_op_flag(device, &plan->flag));
  if (paged) return paged_prefill_plan(device, plan);
  const unsigned bh = static_cast<unsigned>(d.batch * d.heads_q);
  int64_t tile = 0;
  if (!backward) {
    KAIO_TRY(varlen_pick_sm90(device, d, &plan->sm90));
    if (plan->sm90) {
      KAIO_TRY(attention_resolve(device, kernels::attn_fwd_varlen_sm90(d.dtype, d.head_dim),
                                 &plan->fwd, &tile, &plan->fwd_box));
    } else {
      const bool m128 = attention_m128(d.variant, d.head_dim);
      KAIO_TRY(attention_resolve(
          device, kernels::attn_fwd_varlen_sm80(d.dtype, d.head_dim, m128 ? 128 : 64), &plan->fwd,
          &tile));
    }
    plan->fwd.grid = blocks(d.max_seqlen_q, tile);
    plan->fwd.grid_y = bh;
    log_kernel(device, plan->fwd.function, variant_why(d, plan->sm90));
    return KAIO_OK;
  }
  using kernels::Pass;
  int64_t pre_rows = 0, dq_tile = 0, dkdv_tile = 0;
  KAIO_TRY(attention_resolve(device, kernels::attn_bwd_pre_sm80(d.dtype), &plan->pre, &pre_rows));
  KAIO_TRY(attention_resolve(device, kernels::attn_bwd_varlen_sm80(Pass::bwd_dq, d.dtype, d.head_dim),
                             &plan->dq, &dq_tile));
  KAIO_TRY(attention_resolve(
      device, kernels::attn_bwd_varlen_sm80(Pass::bwd_dkdv, d.dtype, d.head_dim), &plan->dkdv,
      &dkdv_tile));
  for (const Launch *l : {&plan->pre, &plan->dq, &plan->dkdv})
    log_kernel(device, l->function, "sm_80, the only varlen backward");
  const int64_t rows = d.total_q * d.heads_q;
  plan->pre.grid = blocks(rows, pre_rows);
  plan->dq.grid = blocks(d.max_seqlen_q, dq_tile);
  plan->dq.grid_y = bh;
  plan->dkdv.grid = blocks(d.max_seqlen_k, dkdv_tile);  // 0: no key rows, no launch
  plan->dkdv.grid_y = static_cast<unsigned>(d.batch * d.heads_kv);
  if (!plan->prepared) return KAIO_OK;  // the backward is an op only
  return DeviceMemory::allocate(device, static_cast<uint64_t>(rows) * 4, &plan->workspace);
}

}  // namespace

kaio_status AttentionVarlenPlan::plan(kaio_device *device) {
  this->device = device;
  const kaio_attention_varlen_desc asked = desc;
  return log_plan([&] { return plan_unlogged(device, backward, this); },
                  [&] {
                    char s[192];
                    std::snprintf(s, sizeof s,
                                  "%s B=%" PRId64 " max_q=%" PRId64 " max_k=%" PRId64
                                  " total_q=%" PRId64 " total_k=%" PRId64 " Hq=%" PRId64
                                  " Hkv=%" PRId64 " D=%" PRId64 " %s",
                                  backward     ? "varlen backward"
                                  : paged      ? "paged prefill"
                                               : "varlen forward",
                                  asked.batch,
                                  asked.max_seqlen_q, asked.max_seqlen_k, asked.total_q,
                                  asked.total_k, asked.heads_q, asked.heads_kv, asked.head_dim,
                                  kaio_dtype_name(asked.dtype));
                    return std::string(s);
                  });
}

namespace {

// The views every varlen launch takes, checked.
struct Views {
  CheckedView q, k, v, cu_q, cu_k, o, lse;
};

kaio_status check_cu(const char *arg, const kaio_tensor &t, const kaio_device *device,
                     int64_t batch, CheckedView *out) {
  KAIO_TRY(check_view(arg, &t, device, out));
  KAIO_TRY(check_dtype(arg, *out, KAIO_DTYPE_I32));
  return check_shape(arg, *out, 1, batch + 1);
}

// Q, K, V, cu_seqlens_q, cu_seqlens_k and O (of o_dtype) at t[0..5].
kaio_status check_common(const kaio_device *device, const kaio_attention_varlen_desc &d,
                         const kaio_tensor *t, kaio_dtype o_dtype, Views *v) {
  KAIO_TRY(attention_check_rows("Q", t[0], device, d.dtype, d.total_q, d.heads_q, d.head_dim, &v->q));
  KAIO_TRY(attention_check_rows("K", t[1], device, d.dtype, d.total_k, d.heads_kv, d.head_dim, &v->k));
  KAIO_TRY(attention_check_rows("V", t[2], device, d.dtype, d.total_k, d.heads_kv, d.head_dim, &v->v));
  KAIO_TRY(check_cu("cu_seqlens_q", t[3], device, d.batch, &v->cu_q));
  KAIO_TRY(check_cu("cu_seqlens_k", t[4], device, d.batch, &v->cu_k));
  return attention_check_rows("O", t[5], device, o_dtype, d.total_q, d.heads_q, d.head_dim, &v->o);
}

kaio_status check_lse(const kaio_tensor &t, const kaio_device *device,
                      const kaio_attention_varlen_desc &d, CheckedView *out) {
  KAIO_TRY(check_view("LSE", &t, device, out));
  KAIO_TRY(check_dtype("LSE", *out, KAIO_DTYPE_F32));
  return check_shape("LSE", *out, d.heads_q, d.total_q);
}

// The kernels' tail parameters: cu_q, cu_k, total_q, total_k, and the
// device's op flag, raised for a cu_seqlens pair that breaks the prefix sums
// or the max_seqlen it was planned for.
struct Packed {
  unsigned long long cu_q, cu_k;
  unsigned total_q, total_k;
  unsigned long long flag;
  Packed(const Views &v, const AttentionVarlenPlan &plan)
      : cu_q(v.cu_q.address), cu_k(v.cu_k.address),
        total_q(static_cast<unsigned>(plan.desc.total_q)),
        total_k(static_cast<unsigned>(plan.desc.total_k)), flag(plan.flag->device_address()) {}
};

kaio_status run_forward(const AttentionVarlenPlan &plan, kaio_stream *stream,
                        const kaio_tensor *t) {
  const kaio_attention_varlen_desc &d = plan.desc;
  const kaio_device *device = plan.device;
  Views v;
  KAIO_TRY(check_common(device, d, t, d.out_dtype, &v));
  const bool has_lse = t[6].buffer != nullptr;
  if (has_lse) {
    KAIO_TRY(check_lse(t[6], device, d, &v.lse));
    KAIO_TRY(attention_check_disjoint({{"O", &v.o}, {"LSE", &v.lse}},
                                      {{"Q", &v.q}, {"K", &v.k}, {"V", &v.v},
                                       {"cu_seqlens_q", &v.cu_q}, {"cu_seqlens_k", &v.cu_k},
                                       {"O", &v.o}, {"LSE", &v.lse}}));
  } else {
    KAIO_TRY(attention_check_disjoint({{"O", &v.o}},
                                      {{"Q", &v.q}, {"K", &v.k}, {"V", &v.v},
                                       {"cu_seqlens_q", &v.cu_q}, {"cu_seqlens_k", &v.cu_k}}));
  }
  Packed pk(v, plan);
  unsigned long long po = v.o.address, pl = has_lse ? v.lse.address : 0, zero = 0;
  unsigned sq = static_cast<unsigned>(d.max_seqlen_q), sk = static_cast<unsigned>(d.max_seqlen_k),
           hq = static_cast<unsigned>(d.heads_q),
           group = static_cast<unsigned>(d.heads_q / d.heads_kv), off = 0,
           causal = static_cast<unsigned>(d.mask), out_dtype = static_cast<unsigned>(d.out_dtype);
  unsigned long long o_ss = v.o.row_stride, lse_rs = has_lse ? v.lse.row_stride : 0;
  float scale_log2 = static_cast<float>(d.softmax_scale * 1.4426950408889634);
  if (plan.sm90) {
    TensorMap map_q, map_k, map_v;
    {
      ContextScope scope(device);
      KAIO_TRY(scope.status());
      const AttentionPlan::Boxes &box = plan.fwd_box;
      KAIO_TRY(encode_bshd_map(device, v.q, d.dtype, d.total_q, d.heads_q, box.q, &map_q));
      KAIO_TRY(encode_bshd_map(device, v.k, d.dtype, d.total_k, d.heads_kv, box.kv, &map_k));
      KAIO_TRY(encode_bshd_map(device, v.v, d.dtype, d.total_k, d.heads_kv, box.kv, &map_v));
    }
    void *params[] = {&map_q,      &map_k,  &map_v, &po,        &pl,       &sq,
                      &sk,         &hq,     &group, &zero,      &o_ss,     &lse_rs,
                      &scale_log2, &causal, &off,   &out_dtype, &pk.cu_q,  &pk.cu_k,
                      &pk.total_q, &pk.total_k, &pk.flag};
    KAIO_TRY(launch_builtin(device, plan.fwd, stream, params));
    note_op_flag(stream, plan.flag);
    return KAIO_OK;
  }
  unsigned long long pq = v.q.address, pkk = v.k.address, pv = v.v.address,
                     q_ss = v.q.row_stride, k_ss = v.k.row_stride, v_ss = v.v.row_stride;
  void *params[] = {&pq,     &pkk,  &pv,         &po,     &pl,   &sq,        &sk,
                    &hq,     &group, &zero,      &q_ss,   &zero, &k_ss,      &zero,
                    &v_ss,   &zero, &o_ss,       &lse_rs, &scale_log2,       &causal,
                    &off,    &out_dtype, &pk.cu_q, &pk.cu_k, &pk.total_q,    &pk.total_k,
                    &pk.flag};
  KAIO_TRY(launch_builtin(device, plan.fwd, stream, params));
  note_op_flag(stream, plan.flag);  // after the launch: see ErrorFlagRegistry::ticket
  return KAIO_OK;
}

kaio_status run_backward(const AttentionVarlenPlan &plan, kaio_stream *stream,
                         const kaio_tensor *t) {
  const kaio_attention_varlen_desc &d = plan.desc;
  const kaio_device *device = plan.device;
  const int64_t Hq = d.heads_q, Hkv = d.heads_kv, D = d.head_dim;
  CheckedView dout, dq, dk, dv;
  Views v;
  KAIO_TRY(attention_check_rows("dO", t[0], device, d.dtype, d.total_q, Hq, D, &dout));
  KAIO_TRY(check_common(device, d, t + 1, d.o_dtype, &v));
  KAIO_TRY(check_lse(t[7], device, d, &v.lse));
  KAIO_TRY(attention_check_rows("dQ", t[8], device, d.out_dtype, d.total_q, Hq, D, &dq));
  KAIO_TRY(attention_check_rows("dK", t[9], device, d.out_dtype, d.total_k, Hkv, D, &dk));
  KAIO_TRY(attention_check_rows("dV", t[10], device, d.out_dtype, d.total_k, Hkv, D, &dv));
  KAIO_TRY(attention_check_disjoint(
      {{"dQ", &dq}, {"dK", &dk}, {"dV", &dv}},
      {{"dO", &dout}, {"Q", &v.q}, {"K", &v.k}, {"V", &v.v}, {"cu_seqlens_q", &v.cu_q},
       {"cu_seqlens_k", &v.cu_k}, {"O", &v.o}, {"LSE", &v.lse}, {"dQ", &dq}, {"dK", &dk},
       {"dV", &dv}}));

  // Dv = rowsum(dO ∘ O) over the packed rows: the contiguous pre kernel with
  // one batch of total_q rows, so Dv is [Hq, total_q] like the LSE.
  unsigned long long p_do = dout.address, p_o = v.o.address, p_ws = plan.workspace->ptr(),
                     do_ss = dout.row_stride, o_ss = v.o.row_stride, zero = 0;
  unsigned rows = static_cast<unsigned>(d.total_q * Hq), tq = static_cast<unsigned>(d.total_q),
           hq = static_cast<unsigned>(Hq), hd = static_cast<unsigned>(D),
           o_f32 = d.o_dtype == KAIO_DTYPE_F32 ? 1u : 0u;
  void *pre[] = {&p_do, &p_o, &p_ws, &rows, &tq, &hq, &hd, &zero, &do_ss, &zero, &o_ss, &o_f32};
  KAIO_TRY(launch_builtin(device, plan.pre, stream, pre));

  Packed pk(v, plan);
  unsigned long long pq = v.q.address, pkk = v.k.address, pv = v.v.address, pl = v.lse.address,
                     q_ss = v.q.row_stride, k_ss = v.k.row_stride, v_ss = v.v.row_stride,
                     lse_rs = v.lse.row_stride;
  unsigned sq = static_cast<unsigned>(d.max_seqlen_q), sk = static_cast<unsigned>(d.max_seqlen_k),
           group = static_cast<unsigned>(Hq / Hkv), off = 0,
           causal = static_cast<unsigned>(d.mask), out_dtype = static_cast<unsigned>(d.out_dtype);
  float scale = d.softmax_scale;
  float scale_log2 = static_cast<float>(d.softmax_scale * 1.4426950408889634);
  unsigned long long ga = dq.address, gb = 0, ga_ss = dq.row_stride, gb_ss = 0;
  void *params[] = {&pq,    &pkk,   &pv,      &p_do,    &pl,         &p_ws,    &ga,
                    &gb,    &sq,    &sk,      &hq,      &group,      &zero,    &q_ss,
                    &zero,  &k_ss,  &zero,    &v_ss,    &zero,       &do_ss,   &zero,
                    &ga_ss, &zero,  &gb_ss,   &lse_rs,  &scale,      &scale_log2,
                    &causal, &off,  &out_dtype, &pk.cu_q, &pk.cu_k,  &pk.total_q,
                    &pk.total_k, &pk.flag};
  KAIO_TRY(launch_builtin(device, plan.dq, stream, params));
  note_op_flag(stream, plan.flag);
  if (plan.dkdv.grid == 0) return KAIO_OK;  // max_seqlen_k 0: no key row to write
  ga = dk.address;
  ga_ss = dk.row_stride;
  gb = dv.address;
  gb_ss = dv.row_stride;
  return launch_builtin(device, plan.dkdv, stream, params);
}

}  // namespace

kaio_status AttentionVarlenPlan::run(kaio_stream *stream, const kaio_tensor *tensors,
                                     size_t count) const {
  if (paged) {
    KAIO_TRY(check_launch(device, stream, tensors, count, 8,
                          "{Q, K pool, V pool, cu_seqlens_q, block_table, seq_lens, O, LSE}"));
    return paged_prefill_run(*this, stream, tensors);
  }
  const char *order = backward
                          ? "{dO, Q, K, V, cu_seqlens_q, cu_seqlens_k, O, LSE, dQ, dK, dV}"
                          : "{Q, K, V, cu_seqlens_q, cu_seqlens_k, O, LSE}";
  KAIO_TRY(check_launch(device, stream, tensors, count, backward ? 11 : 7, order));
  return backward ? run_backward(*this, stream, tensors) : run_forward(*this, stream, tensors);
}

}  // namespace kaio
