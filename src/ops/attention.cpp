// FlashAttention forward and backward: descriptor checks, kernel choice and
// launches. The kernels' contract is in ptx/gen_attention_sm80.py.
#include "ops/attention.hpp"
#include "ops/attention_varlen.hpp"

#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/kernel_family.hpp"
#include "ops/key_list.hpp"
#include "ops/plan_log.hpp"
#include "ops/tensor_map.hpp"
#include "runtime/buffer.hpp"
#include "runtime/buffer_copy.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

// The head dims each family's kernels take, from the kernel registry.
constexpr const auto &kFwdDims = kernels::keys::attn_fwd_sm80::head_dim;
constexpr const auto &kBwdDims = kernels::keys::attn_bwd_sm80::head_dim;
constexpr const auto &kSm90Dims = kernels::keys::attn_fwd_sm90::head_dim;
static_assert(same_list(kSm90Dims, kernels::keys::attn_bwd_sm90::head_dim),
              "the sm_90a forward and backward take the same head dims");
constexpr int64_t kMaxGridY = 65535;
// Queries per block of the fused sm_90a backward (its dQ workspace rows per
// head are rounded up to it; one semaphore per block).
constexpr int64_t kSm90BwdQueryBlock = 64;
// The fused sm_90a backward from this many keys on, else the dQ and dK/dV
// kernels: H200, deterministic, fused over the two kernels (bench/RESULTS.md,
// session 25) 1.20-1.53x at S 1024 and 1.34-1.37x at S 2048 causal, once its
// dQ convert stopped storing zeros (before that: 0.80-0.92x at S 1024).
// Below 1024 keys not measured.
constexpr int64_t kSm90FusedMinKeys = 1024;

bool is_half(kaio_dtype d) { return d == KAIO_DTYPE_F16 || d == KAIO_DTYPE_BF16; }

// Resolves a kernel into out and its rows per CTA (a tile of queries or
// keys) into tile; with boxes (the sm_90a kernels), also its TMA boxes.
kaio_status resolve(kaio_device *device, KernelId id, Launch *out,
                    int64_t *tile, AttentionPlan::Boxes *boxes = nullptr) {
  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(id, &fn));
  if (fn.info->cols_per_block == 0 ||
      (boxes && !(tma_box(fn, "tmap_q", boxes->q) && tma_box(fn, "tmap_k", boxes->kv))))
    return fail(KAIO_ERROR_INTERNAL, "%s: attention kernel %s lacks its launch facts.", api_name(),
                kernel_info(id).name);
  *out = launch_of(fn);
  *tile = static_cast<int64_t>(fn.info->cols_per_block);
  return KAIO_OK;
}

// SM90 (checked against the device in AttentionPlan::plan), or AUTO where the
// sm_90a kernels exist (kSm90Dims) and can run: compute
// capability 9.0 and a driver that loads their PTX. why: for KAIO_LOG.
bool uses_sm90(const kaio_attention_desc &d, const FamilyCheck &hopper, std::string *why) {
  const bool sm90 = d.variant == KAIO_ATTENTION_SM90 ||
                    (d.variant == KAIO_ATTENTION_AUTO &&
                     in_list(kSm90Dims, d.head_dim) && hopper.ok());
  if (!log_enabled()) return sm90;
  if (d.variant == KAIO_ATTENTION_AUTO)
    *why = sm90 ? "AUTO: " + hopper.why
           : !in_list(kSm90Dims, d.head_dim)
               ? "AUTO: sm_80; the sm_90a kernels take head dims " + list_text(kSm90Dims, "and")
               : "AUTO: sm_80; " + hopper.why;
  else
    *why = d.variant == KAIO_ATTENTION_SM90 ? "variant KAIO_ATTENTION_SM90"
           : d.variant == KAIO_ATTENTION_SM80 ? "variant KAIO_ATTENTION_SM80"
                                               : "variant KAIO_ATTENTION_SM80_M128";
  return sm90;
}

unsigned blocks(int64_t n, int64_t per) { return static_cast<unsigned>((n + per - 1) / per); }

kaio_status check_desc(const kaio_attention_desc &d, bool backward) {
  KAIO_TRY(attention_check_types("attention", d.dtype, d.out_dtype, d.o_dtype, d.mask, backward));
  if (d.variant < KAIO_ATTENTION_AUTO || d.variant > KAIO_ATTENTION_DECODE)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->variant is %d; use KAIO_ATTENTION_AUTO, KAIO_ATTENTION_SM80, "
                "KAIO_ATTENTION_SM80_M128, KAIO_ATTENTION_SM90 or KAIO_ATTENTION_DECODE.",
                api_name(), d.variant);
  if (d.variant == KAIO_ATTENTION_SM90 && !in_list(kSm90Dims, d.head_dim))
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: desc->variant is KAIO_ATTENTION_SM90 but head_dim is %" PRId64
                "; that variant takes head dims %s. Use KAIO_ATTENTION_AUTO.",
                api_name(), d.head_dim, list_text(kSm90Dims, "and").c_str());
  if (d.variant == KAIO_ATTENTION_SM80_M128 && d.head_dim > kMaxM128Dim)
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: desc->variant is KAIO_ATTENTION_SM80_M128 but head_dim is %" PRId64
                "; that variant takes head dims up to %" PRId64
                ". Use KAIO_ATTENTION_AUTO or KAIO_ATTENTION_SM80.",
                api_name(), d.head_dim, kMaxM128Dim);
  if (d.reserved != 0 || d.reserved2 != 0)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->reserved fields must be 0; initialise the desc with "
                "kaio_attention_desc_init.",
                api_name());
  const struct {
    const char *name;
    int64_t value;
  } dims[] = {{"batch", d.batch},     {"seq_q", d.seq_q},       {"seq_k", d.seq_k},
              {"heads_q", d.heads_q}, {"heads_kv", d.heads_kv}, {"head_dim", d.head_dim}};
  for (const auto &dim : dims)
    if (dim.value < 1 || dim.value > INT32_MAX)
      return fail(KAIO_ERROR_INVALID_DIMENSION,
                  "%s: desc->%s is %" PRId64 "; it must be between 1 and %d (set every shape "
                  "field of the desc).",
                  api_name(), dim.name, dim.value, INT32_MAX);
  if (d.heads_q % d.heads_kv != 0)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: desc->heads_q is %" PRId64 " and desc->heads_kv is %" PRId64
                "; heads_q must be a multiple of heads_kv (each KV head serves heads_q / heads_kv "
                "query heads).",
                api_name(), d.heads_q, d.heads_kv);
  const bool fwd_dim = in_list(kFwdDims, d.head_dim);
  const bool bwd_dim = in_list(kBwdDims, d.head_dim);
  if (!fwd_dim || (backward && !bwd_dim))
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: desc->head_dim is %" PRId64 "; the %s kernels take %s. Pad the head "
                "dimension with zeros to the next supported size.",
                api_name(), d.head_dim, backward ? "backward" : "forward",
                (backward ? list_text(kBwdDims, "or") : list_text(kFwdDims, "or")).c_str());
  if (d.batch * d.heads_q > kMaxGridY)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: batch * heads_q (desc->batch %" PRId64 " * desc->heads_q %" PRId64
                ") is %" PRId64 ", but the kernels run one grid row per (batch, head) and a grid has at most %"
                PRId64 " rows; split the batch across calls.",
                api_name(), d.batch, d.heads_q, d.batch * d.heads_q, kMaxGridY);
  if (d.batch * d.heads_q * d.seq_q > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: batch * heads_q * seq_q is %" PRId64 "; at most %d per call. Split the "
                "batch.",
                api_name(), d.batch * d.heads_q * d.seq_q, INT32_MAX);
  if (!(std::isfinite(d.softmax_scale) && d.softmax_scale > 0.0f))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->softmax_scale is %g; it must be finite and > 0 (0 in the desc means "
                "1/sqrt(head_dim)).",
                api_name(), static_cast<double>(d.softmax_scale));
  return KAIO_OK;
}

}  // namespace

// A BSHD tensor as its rank-2 view [B·S, H·D]; 16-byte start, 8-element stride.
// The 16-byte loads' rule for an attention view: a 16-byte aligned start
// and a row_stride of whole 8-element (16-byte) steps.
kaio_status check_aligned16(const char *arg, const CheckedView &v) {
  if (v.address % 16 != 0 || v.row_stride % 8 != 0)
    return fail(KAIO_ERROR_MISALIGNED,
                "%s: argument '%s' starts at byte offset %" PRIu64 " of a 256-byte-aligned "
                "allocation with row_stride %" PRId64 "; attention needs a 16-byte aligned start "
                "and a row_stride that is a multiple of 8 elements.",
                api_name(), arg, static_cast<uint64_t>(v.address % 256), v.row_stride);
  return KAIO_OK;
}

kaio_status check_bshd(const char *arg, const kaio_tensor &t,
                       const kaio_device *device, kaio_dtype dtype, int64_t batch, int64_t seq,
                       int64_t heads, int64_t dim, CheckedView *out) {
  KAIO_TRY(check_view(arg, &t, device, out));
  KAIO_TRY(check_dtype(arg, *out, dtype));
  KAIO_TRY(check_shape(arg, *out, batch * seq, heads * dim));
  return check_aligned16(arg, *out);
}

kaio_status check_lse(const kaio_tensor &t, const kaio_device *device,
                      const kaio_attention_desc &d, CheckedView *out) {
  KAIO_TRY(check_view("LSE", &t, device, out));
  KAIO_TRY(check_dtype("LSE", *out, KAIO_DTYPE_F32));
  return check_shape("LSE", *out, d.batch * d.heads_q, d.seq_q);
}

namespace {

kaio_status check_disjoint(std::initializer_list<std::pair<const char *, const CheckedView *>> outs,
                           std::initializer_list<std::pair<const char *, const CheckedView *>> all) {
  for (const auto &[oname, o] : outs)
    for (const auto &[name, v] : all)
      if (o != v) KAIO_TRY(check_no_partial_overlap(oname, *o, name, *v, false));
  return KAIO_OK;
}

unsigned long long bstride(const CheckedView &v, int64_t seq) {
  return static_cast<unsigned long long>(v.row_stride * seq);
}

kaio_status plan_unlogged(kaio_device *device,
                          const kaio_attention_desc &desc, bool backward, AttentionPlan *plan) {
  kaio_attention_desc d = desc;
  if (d.out_dtype == 0) d.out_dtype = d.dtype;
  if (d.o_dtype == 0) d.o_dtype = d.dtype;
  if (d.softmax_scale == 0.0f)
    d.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim)));
  KAIO_TRY(check_desc(d, backward));
  KAIO_TRY(check_decode_desc(d, backward, plan->paged, plan->page_size));
  KAIO_TRY(require_arch(device, 8, 0, "attention (mma.sync m16n8k16, cp.async)"));
  plan->backward = backward;
  plan->desc = d;
  plan->causal = d.mask != KAIO_ATTENTION_MASK_NONE;
  plan->causal_off = d.mask == KAIO_ATTENTION_CAUSAL ? static_cast<int32_t>(d.seq_k - d.seq_q) : 0;
  if (plan->paged || wants_decode(d, backward)) return plan_decode(device, plan);
  const unsigned bh = static_cast<unsigned>(d.batch * d.heads_q);
  const ModuleId sm90_module =
      backward ? ModuleId::attention_bwd_sm90 : ModuleId::attention_fwd_sm90;
  const FamilyCheck hopper = check_family(device, sm90_module, true);
  if (d.variant == KAIO_ATTENTION_SM90 && hopper.verdict == FamilyCheck::Verdict::driver)
    return fail_variant_driver("desc->variant", "KAIO_ATTENTION_SM90",
                               "KAIO_ATTENTION_AUTO", device, sm90_module);
  if (d.variant == KAIO_ATTENTION_SM90 && !hopper.ok())
    return fail(KAIO_ERROR_UNSUPPORTED_ARCH,
                "%s: desc->variant is KAIO_ATTENTION_SM90 but device %d has compute capability "
                "%d.%d (or a driver without cuTensorMapEncodeTiled); that variant needs exactly "
                "9.0 (sm_90a). Use KAIO_ATTENTION_AUTO.",
                api_name(), device->ordinal, device->info.cc_major, device->info.cc_minor);
  std::string why;
  const bool sm90 = uses_sm90(d, hopper, &why);
  int64_t tile = 0;
  if (!backward) {
    if (sm90) {
      KAIO_TRY(resolve(device, kernels::attn_fwd_sm90(d.dtype, d.head_dim), &plan->fwd,
                       &tile, &plan->fwd_box));
      plan->sm90 = true;
      plan->fwd.grid = blocks(d.seq_q, tile);
      plan->fwd.grid_y = bh;
      log_kernel(device, plan->fwd.function, why);
      return KAIO_OK;
    }
    const bool m128 = attention_m128(d.variant, d.head_dim);
    KAIO_TRY(resolve(device, kernels::attn_fwd_sm80(d.dtype, d.head_dim, m128 ? 128 : 64),
                     &plan->fwd, &tile));
    plan->fwd.grid = blocks(d.seq_q, tile);
    plan->fwd.grid_y = bh;
    log_kernel(device, plan->fwd.function, why);
    return KAIO_OK;
  }
  int64_t pre_rows = 0, dq_tile = 0, dkdv_tile = 0;
  KAIO_TRY(resolve(device, kernels::attn_bwd_pre_sm80(d.dtype), &plan->pre, &pre_rows));
  log_kernel(device, plan->pre.function, "sm_80, the only family");
  if (sm90) {
    using kernels::Pass;
    plan->fused = d.seq_k >= kSm90FusedMinKeys;
    if (plan->fused) {
      KAIO_TRY(resolve(device, kernels::attn_bwd_sm90(Pass::bwd_dq_convert, d.dtype, d.head_dim),
                       &plan->convert, &dq_tile));
      KAIO_TRY(resolve(device, kernels::attn_bwd_sm90(Pass::bwd_fused, d.dtype, d.head_dim),
                       &plan->dkdv, &dkdv_tile, &plan->dkdv_box));
    } else {
      KAIO_TRY(resolve(device, kernels::attn_bwd_sm90(Pass::bwd_dq, d.dtype, d.head_dim),
                       &plan->dq, &dq_tile, &plan->dq_box));
      KAIO_TRY(resolve(device, kernels::attn_bwd_sm90(Pass::bwd_dkdv, d.dtype, d.head_dim),
                       &plan->dkdv, &dkdv_tile, &plan->dkdv_box));
    }
    plan->sm90 = true;
  } else {
    using kernels::Pass;
    KAIO_TRY(resolve(device, kernels::attn_bwd_sm80(Pass::bwd_dq, d.dtype, d.head_dim),
                     &plan->dq, &dq_tile));
    KAIO_TRY(resolve(device, kernels::attn_bwd_sm80(Pass::bwd_dkdv, d.dtype, d.head_dim),
                     &plan->dkdv, &dkdv_tile));
  }
  log_kernel(device, (plan->fused ? plan->convert : plan->dq).function, why);
  log_kernel(device, plan->dkdv.function, why);
  const int64_t rows = d.batch * d.seq_q * d.heads_q;
  plan->pre.grid = blocks(rows, pre_rows);
  Launch &dq = plan->fused ? plan->convert : plan->dq;
  dq.grid = blocks(d.seq_q, dq_tile);
  dq.grid_y = bh;
  plan->dkdv.grid = blocks(d.seq_k, dkdv_tile);
  plan->dkdv.grid_y = static_cast<unsigned>(d.batch * d.heads_kv);
  uint64_t bytes = static_cast<uint64_t>(rows) * 4;
  if (plan->fused) {
    // Dv, then the f32 dQ rows [B*Hq, sq_pad, D] (16-byte aligned for the
    // vector adds), then a u32 semaphore per (b, hq, query block); zero
    // before the first launch, each launch leaves them zero.
    const uint64_t qblocks = static_cast<uint64_t>(blocks(d.seq_q, kSm90BwdQueryBlock));
    plan->sq_pad = static_cast<unsigned>(qblocks * kSm90BwdQueryBlock);
    plan->dq_ws = (bytes + 255) / 256 * 256;
    plan->sem = plan->dq_ws + static_cast<uint64_t>(bh) * plan->sq_pad * d.head_dim * 4;
    bytes = plan->sem + static_cast<uint64_t>(bh) * qblocks * 4;
  }
  KAIO_TRY(DeviceMemory::allocate(device, bytes, &plan->workspace));
  if (!plan->fused) return KAIO_OK;
  plan->dq_ws_dirty = std::make_shared<std::atomic<bool>>(false);
  return buffer_zero(plan->workspace->buffer(), plan->dq_ws, bytes - plan->dq_ws);
}

}  // namespace

kaio_status AttentionPlan::plan(kaio_device *device) {
  this->device = device;
  const kaio_attention_desc asked = desc;
  return log_plan(
      [&] { return plan_unlogged(device, asked, backward, this); },
      [&] {
        char s[192];
        std::snprintf(s, sizeof s,
                      "%s B=%" PRId64 " Sq=%" PRId64 " Sk=%" PRId64 " Hq=%" PRId64
                      " Hkv=%" PRId64 " D=%" PRId64 " %s",
                      backward ? "backward" : paged ? "paged" : "forward", asked.batch, asked.seq_q, asked.seq_k,
                      asked.heads_q, asked.heads_kv, asked.head_dim, kaio_dtype_name(asked.dtype));
        return std::string(s);
      });
}

namespace {

kaio_status run_forward_sm90(const kaio_device *device, const AttentionPlan &plan,
                             kaio_stream *stream, const CheckedView &q, const CheckedView &k,
                             const CheckedView &v, const CheckedView &o, const CheckedView *lse) {
  const kaio_attention_desc &d = plan.desc;
  TensorMap map_q, map_k, map_v;
  {
    ContextScope scope(device);
    KAIO_TRY(scope.status());
    const AttentionPlan::Boxes &box = plan.fwd_box;
    const kaio_dtype dt = d.dtype;
    KAIO_TRY(encode_bshd_map(device, q, dt, d.seq_q, d.heads_q, box.q, &map_q));
    KAIO_TRY(encode_bshd_map(device, k, dt, d.seq_k, d.heads_kv, box.kv, &map_k));
    KAIO_TRY(encode_bshd_map(device, v, dt, d.seq_k, d.heads_kv, box.kv, &map_v));
  }
  unsigned long long po = o.address, pl = lse ? lse->address : 0;
  unsigned sq = static_cast<unsigned>(d.seq_q), sk = static_cast<unsigned>(d.seq_k),
           hq = static_cast<unsigned>(d.heads_q),
           group = static_cast<unsigned>(d.heads_q / d.heads_kv);
  unsigned long long o_bs = bstride(o, d.seq_q), o_ss = o.row_stride,
                     lse_rs = lse ? lse->row_stride : 0;
  float scale_log2 = static_cast<float>(d.softmax_scale * 1.4426950408889634);
  unsigned causal = plan.causal, causal_off = static_cast<unsigned>(plan.causal_off),
           out_dtype = static_cast<unsigned>(d.out_dtype);
  void *params[] = {&map_q, &map_k, &map_v, &po,         &pl,     &sq,         &sk,       &hq,
                    &group, &o_bs,  &o_ss,  &lse_rs,     &scale_log2, &causal, &causal_off,
                    &out_dtype};
  return launch_builtin(device, plan.fwd, stream, params);
}

kaio_status run_forward(const kaio_device *device, const AttentionPlan &plan,
                        kaio_stream *stream, const kaio_tensor *t) {
  const kaio_attention_desc &d = plan.desc;
  CheckedView q, k, v, o, lse;
  KAIO_TRY(check_bshd("Q", t[0], device, d.dtype, d.batch, d.seq_q, d.heads_q, d.head_dim, &q));
  KAIO_TRY(check_bshd("K", t[1], device, d.dtype, d.batch, d.seq_k, d.heads_kv, d.head_dim, &k));
  KAIO_TRY(check_bshd("V", t[2], device, d.dtype, d.batch, d.seq_k, d.heads_kv, d.head_dim, &v));
  KAIO_TRY(check_bshd("O", t[3], device, d.out_dtype, d.batch, d.seq_q, d.heads_q, d.head_dim, &o));
  const bool has_lse = t[4].buffer != nullptr;
  if (has_lse) {
    KAIO_TRY(check_lse(t[4], device, d, &lse));
    KAIO_TRY(check_disjoint({{"O", &o}, {"LSE", &lse}},
                            {{"Q", &q}, {"K", &k}, {"V", &v}, {"O", &o}, {"LSE", &lse}}));
  } else {
    KAIO_TRY(check_disjoint({{"O", &o}}, {{"Q", &q}, {"K", &k}, {"V", &v}}));
  }
  if (plan.decode) return run_decode(device, plan, stream, q, k, v, o, has_lse ? &lse : nullptr);
  if (plan.sm90)
    return run_forward_sm90(device, plan, stream, q, k, v, o, has_lse ? &lse : nullptr);
  unsigned long long pq = q.address, pk = k.address, pv = v.address, po = o.address,
                     pl = has_lse ? lse.address : 0;
  unsigned sq = static_cast<unsigned>(d.seq_q), sk = static_cast<unsigned>(d.seq_k),
           hq = static_cast<unsigned>(d.heads_q),
           group = static_cast<unsigned>(d.heads_q / d.heads_kv);
  unsigned long long q_bs = bstride(q, d.seq_q), q_ss = q.row_stride, k_bs = bstride(k, d.seq_k),
                     k_ss = k.row_stride, v_bs = bstride(v, d.seq_k), v_ss = v.row_stride,
                     o_bs = bstride(o, d.seq_q), o_ss = o.row_stride,
                     lse_rs = has_lse ? lse.row_stride : 0;
  float scale_log2 = static_cast<float>(d.softmax_scale * 1.4426950408889634);
  unsigned causal = plan.causal, causal_off = static_cast<unsigned>(plan.causal_off),
           out_dtype = static_cast<unsigned>(d.out_dtype);
  void *params[] = {&pq,   &pk,   &pv,   &po,   &pl,   &sq,     &sk,         &hq,
                    &group, &q_bs, &q_ss, &k_bs, &k_ss, &v_bs,  &v_ss,       &o_bs,
                    &o_ss, &lse_rs, &scale_log2, &causal, &causal_off, &out_dtype};
  return launch_builtin(device, plan.fwd, stream, params);
}

// The sm_90a backward kernels' tensor maps, encoded before anything is
// enqueued. dq: Q, dO, K, V (the two-kernel path only); dkdv (also the
// fused kernel's): K, V, Q, dO.
struct BackwardMaps {
  TensorMap dq[4], dkdv[4];
};

kaio_status encode_backward_maps(const kaio_device *device, const AttentionPlan &plan,
                                 const CheckedView &dout, const CheckedView &q,
                                 const CheckedView &k, const CheckedView &v, BackwardMaps *out) {
  const kaio_attention_desc &d = plan.desc;
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  const kaio_dtype dt = d.dtype;
  for (const auto &[maps, box, query_first] :
       {std::tuple{out->dq, &plan.dq_box, true}, std::tuple{out->dkdv, &plan.dkdv_box, false}}) {
    if (query_first && plan.fused) continue;
    TensorMap *qside = maps + (query_first ? 0 : 2), *kside = maps + (query_first ? 2 : 0);
    KAIO_TRY(encode_bshd_map(device, q, dt, d.seq_q, d.heads_q, box->q, &qside[0]));
    KAIO_TRY(encode_bshd_map(device, dout, dt, d.seq_q, d.heads_q, box->q, &qside[1]));
    KAIO_TRY(encode_bshd_map(device, k, dt, d.seq_k, d.heads_kv, box->kv, &kside[0]));
    KAIO_TRY(encode_bshd_map(device, v, dt, d.seq_k, d.heads_kv, box->kv, &kside[1]));
  }
  return KAIO_OK;
}

// The sm_90a backward (Dv is at the workspace's start). Two kernels: dQ, then
// dK and dV. Fused: the dK/dV kernel also adds dQ's f32 sums into the
// workspace (its four last parameters, which the two-kernel dK/dV kernel
// does not take), then the convert kernel scales them into dQ.
kaio_status run_backward_sm90(const kaio_device *device,
                              const AttentionPlan &plan, kaio_stream *stream,
                              const BackwardMaps &encoded, const CheckedView &lse,
                              const CheckedView &dq, const CheckedView &dk, const CheckedView &dv) {
  const kaio_attention_desc &d = plan.desc;
  BackwardMaps maps = encoded;  // the launch takes non-const parameter pointers
  TensorMap *dq_maps = maps.dq, *dkdv_maps = maps.dkdv;
  unsigned long long pl = lse.address, p_ws = plan.workspace->ptr(), lse_rs = lse.row_stride,
                     p_dq_ws = p_ws + plan.dq_ws, p_sem = p_ws + plan.sem;
  unsigned sq = static_cast<unsigned>(d.seq_q), sk = static_cast<unsigned>(d.seq_k),
           hq = static_cast<unsigned>(d.heads_q),
           group = static_cast<unsigned>(d.heads_q / d.heads_kv), sq_pad = plan.sq_pad,
           ordered = d.deterministic != 0 ? 1u : 0u;
  float scale = d.softmax_scale;
  float scale_log2 = static_cast<float>(d.softmax_scale * 1.4426950408889634);
  unsigned causal = plan.causal, causal_off = static_cast<unsigned>(plan.causal_off),
           out_dtype = static_cast<unsigned>(d.out_dtype);
  unsigned long long ga = dq.address, ga_bs = bstride(dq, d.seq_q), ga_ss = dq.row_stride;
  if (!plan.fused) {
    void *dq_params[] = {&dq_maps[0], &dq_maps[1], &dq_maps[2], &dq_maps[3], &pl,     &p_ws,
                         &ga,         &sq,         &sk,         &hq,         &group,  &ga_bs,
                         &ga_ss,      &lse_rs,     &scale,      &scale_log2, &causal, &causal_off,
                         &out_dtype};
    KAIO_TRY(launch_builtin(device, plan.dq, stream, dq_params));
  }
  unsigned long long pk = dk.address, pv = dv.address, k_bs = bstride(dk, d.seq_k),
                     k_ss = dk.row_stride, v_bs = bstride(dv, d.seq_k), v_ss = dv.row_stride;
  void *dkdv_params[] = {&dkdv_maps[0], &dkdv_maps[1], &dkdv_maps[2], &dkdv_maps[3], &pl,
                         &p_ws,         &pk,           &pv,           &sq,           &sk,
                         &hq,           &group,        &k_bs,         &k_ss,         &v_bs,
                         &v_ss,         &lse_rs,       &scale,        &scale_log2,   &causal,
                         &causal_off,   &out_dtype,    &p_dq_ws,      &p_sem,        &sq_pad,
                         &ordered};
  if (!plan.fused) return launch_builtin(device, plan.dkdv, stream, dkdv_params);
  // The fused kernel leaves dQ's sums in the workspace for convert (the
  // semaphores come back to 0 in the fused kernel, and convert zeroes them
  // too). If convert (or the memset after it) was not enqueued after the
  // last fused launch, zero sums and semaphores first.
  std::atomic<bool> &dirty = *plan.dq_ws_dirty;
  if (dirty.load())
    KAIO_TRY(buffer_memset(plan.workspace->buffer(), stream, plan.dq_ws, 0,
                           plan.workspace->buffer()->size - plan.dq_ws));
  dirty.store(true);
  KAIO_TRY(launch_builtin(device, plan.dkdv, stream, dkdv_params));
  // rows below first_row see no key (bottom-right causal with Sq > Sk)
  unsigned first_row = plan.causal_off < 0 ? static_cast<unsigned>(-plan.causal_off) : 0u;
  void *convert_params[] = {&p_dq_ws, &p_sem, &ga,    &sq,        &hq,       &sq_pad,
                            &ga_bs,   &ga_ss, &scale, &out_dtype, &first_row};
  KAIO_TRY(launch_builtin(device, plan.convert, stream, convert_params));
  // Ordered, each query block's first add stores: the sums need no zeroing.
  // Unordered they do, before the next launch: a memset (convert storing the
  // zeros itself took 389 us against 51 without, 2 x 32 x 4096 x 128 on an
  // H200: bench/RESULTS.md, session 25).
  if (!ordered)
    KAIO_TRY(buffer_memset(plan.workspace->buffer(), stream, plan.dq_ws, 0, plan.sem - plan.dq_ws));
  dirty.store(false);
  return KAIO_OK;
}

kaio_status run_backward(const kaio_device *device, const AttentionPlan &plan,
                         kaio_stream *stream, const kaio_tensor *t) {
  const kaio_attention_desc &d = plan.desc;
  CheckedView dout, q, k, v, o, lse, dq, dk, dv;
  const int64_t B = d.batch, Sq = d.seq_q, Sk = d.seq_k, Hq = d.heads_q, Hkv = d.heads_kv,
                D = d.head_dim;
  KAIO_TRY(check_bshd("dO", t[0], device, d.dtype, B, Sq, Hq, D, &dout));
  KAIO_TRY(check_bshd("Q", t[1], device, d.dtype, B, Sq, Hq, D, &q));
  KAIO_TRY(check_bshd("K", t[2], device, d.dtype, B, Sk, Hkv, D, &k));
  KAIO_TRY(check_bshd("V", t[3], device, d.dtype, B, Sk, Hkv, D, &v));
  KAIO_TRY(check_bshd("O", t[4], device, d.o_dtype, B, Sq, Hq, D, &o));
  KAIO_TRY(check_lse(t[5], device, d, &lse));
  KAIO_TRY(check_bshd("dQ", t[6], device, d.out_dtype, B, Sq, Hq, D, &dq));
  KAIO_TRY(check_bshd("dK", t[7], device, d.out_dtype, B, Sk, Hkv, D, &dk));
  KAIO_TRY(check_bshd("dV", t[8], device, d.out_dtype, B, Sk, Hkv, D, &dv));
  KAIO_TRY(check_disjoint({{"dQ", &dq}, {"dK", &dk}, {"dV", &dv}},
                          {{"dO", &dout}, {"Q", &q}, {"K", &k}, {"V", &v}, {"O", &o},
                           {"LSE", &lse}, {"dQ", &dq}, {"dK", &dk}, {"dV", &dv}}));

  unsigned long long p_do = dout.address, p_o = o.address, p_ws = plan.workspace->ptr();
  unsigned rows = static_cast<unsigned>(B * Sq * Hq), sq = static_cast<unsigned>(Sq),
           hq = static_cast<unsigned>(Hq), hd = static_cast<unsigned>(D),
           o_f32 = d.o_dtype == KAIO_DTYPE_F32 ? 1u : 0u;
  unsigned long long do_bs = bstride(dout, Sq), do_ss = dout.row_stride, o_bs = bstride(o, Sq),
                     o_ss = o.row_stride;
  void *pre[] = {&p_do, &p_o, &p_ws, &rows, &sq, &hq, &hd, &do_bs, &do_ss, &o_bs, &o_ss, &o_f32};
  BackwardMaps maps;
  if (plan.sm90) KAIO_TRY(encode_backward_maps(device, plan, dout, q, k, v, &maps));
  KAIO_TRY(launch_builtin(device, plan.pre, stream, pre));
  if (plan.sm90) return run_backward_sm90(device, plan, stream, maps, lse, dq, dk, dv);

  unsigned long long pq = q.address, pk = k.address, pv = v.address, pl = lse.address;
  unsigned sk = static_cast<unsigned>(Sk), group = static_cast<unsigned>(Hq / Hkv);
  unsigned long long q_bs = bstride(q, Sq), q_ss = q.row_stride, k_bs = bstride(k, Sk),
                     k_ss = k.row_stride, v_bs = bstride(v, Sk), v_ss = v.row_stride,
                     lse_rs = lse.row_stride;
  float scale = d.softmax_scale;
  float scale_log2 = static_cast<float>(d.softmax_scale * 1.4426950408889634);
  unsigned causal = plan.causal, causal_off = static_cast<unsigned>(plan.causal_off),
           out_dtype = static_cast<unsigned>(d.out_dtype);
  // dQ: grad_a = dQ, grad_b unused.
  unsigned long long ga = dq.address, gb = 0, ga_bs = bstride(dq, Sq), ga_ss = dq.row_stride,
                     gb_bs = 0, gb_ss = 0;
  void *params[] = {&pq,    &pk,    &pv,    &p_do,  &pl,     &p_ws,   &ga,         &gb,
                    &sq,    &sk,    &hq,    &group, &q_bs,   &q_ss,   &k_bs,       &k_ss,
                    &v_bs,  &v_ss,  &do_bs, &do_ss, &ga_bs,  &ga_ss,  &gb_bs,      &gb_ss,
                    &lse_rs, &scale, &scale_log2, &causal, &causal_off, &out_dtype};
  KAIO_TRY(launch_builtin(device, plan.dq, stream, params));
  // dK, dV: grad_a = dK, grad_b = dV (same parameter list).
  ga = dk.address;
  ga_bs = bstride(dk, Sk);
  ga_ss = dk.row_stride;
  gb = dv.address;
  gb_bs = bstride(dv, Sk);
  gb_ss = dv.row_stride;
  return launch_builtin(device, plan.dkdv, stream, params);
}

}  // namespace

kaio_status AttentionPlan::run(kaio_stream *stream, const kaio_tensor *tensors,
                               size_t count) const {
  KAIO_TRY(check_op_stream(device, stream));
  if (paged) {
    KAIO_TRY(check_launch(device, stream, tensors, count, 7,
                          "{Q, K pool, V pool, block_table, seq_lens, O, LSE}"));
    return run_paged(device, *this, stream, tensors);
  }
  const size_t expected = backward ? 9 : 5;
  const char *order = backward ? "{dO, Q, K, V, O, LSE, dQ, dK, dV}" : "{Q, K, V, O, LSE}";
  if (!tensors)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'tensors' is NULL; pass %s.", api_name(),
                order);
  if (count != expected)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'count' is %zu but attention %s takes %zu tensors: %s.", api_name(),
                count, backward ? "backward" : "forward", expected, order);
  return backward ? run_backward(device, *this, stream, tensors)
                  : run_forward(device, *this, stream, tensors);
}

}  // namespace kaio

// The helpers the varlen op (ops/attention_varlen.cpp) shares.
namespace kaio {

kaio_status attention_resolve(kaio_device *device, KernelId id, Launch *out, int64_t *tile,
                              AttentionPlan::Boxes *boxes) {
  return resolve(device, id, out, tile, boxes);
}

kaio_status attention_check_rows(const char *arg, const kaio_tensor &t, const kaio_device *device,
                                 kaio_dtype dtype, int64_t rows, int64_t heads, int64_t dim,
                                 CheckedView *out) {
  return check_bshd(arg, t, device, dtype, 1, rows, heads, dim, out);
}

kaio_status attention_check_disjoint(std::initializer_list<NamedChecked> outs,
                                     std::initializer_list<NamedChecked> all) {
  return check_disjoint(outs, all);
}

kaio_status attention_check_page_size(int32_t page_size) {
  static constexpr int64_t kPageSizes[] = {16, 32, 64, 128, 256};
  if (!in_list(kPageSizes, page_size))
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: paged->page_size is %" PRId32 "; use %s.",
                api_name(), page_size, list_text(kPageSizes, "or").c_str());
  return KAIO_OK;
}

namespace {

// A K or V pool: [num_pages · page_size, heads_kv · head_dim] of dtype,
// num_pages >= 1, 16-byte aligned (the kernels' 16-byte loads).
kaio_status check_pool(const char *arg, const kaio_tensor &t, const kaio_device *device,
                       kaio_dtype dtype, int64_t width, int64_t page_size, CheckedView *out) {
  KAIO_TRY(check_view(arg, &t, device, out));
  KAIO_TRY(check_dtype(arg, *out, dtype));
  if (out->cols != width || out->rows < page_size || out->rows % page_size != 0 ||
      out->rows > INT32_MAX)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: argument '%s' is %" PRId64 " x %" PRId64 "; a page pool is [num_pages * "
                "page_size, heads_kv * head_dim] = [a multiple of %" PRId64 " up to %d, %" PRId64
                "] with num_pages >= 1.",
                api_name(), arg, out->rows, out->cols, page_size, INT32_MAX, width);
  return check_aligned16(arg, *out);
}

}  // namespace

kaio_status attention_check_pages(const kaio_tensor &k_pool, const kaio_tensor &v_pool,
                                  const kaio_tensor &table, const kaio_device *device,
                                  kaio_dtype dtype, int64_t heads_kv, int64_t head_dim,
                                  int64_t batch, int64_t page_size, int64_t max_len,
                                  const char *max_len_field, PagedViews *out) {
  KAIO_TRY(check_pool("K pool", k_pool, device, dtype, heads_kv * head_dim, page_size, &out->k_pool));
  KAIO_TRY(check_pool("V pool", v_pool, device, dtype, heads_kv * head_dim, page_size, &out->v_pool));
  if (out->v_pool.rows != out->k_pool.rows)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: the K pool has %" PRId64 " rows but the V pool %" PRId64
                "; both hold the same pages.",
                api_name(), out->k_pool.rows, out->v_pool.rows);
  KAIO_TRY(check_view("block_table", &table, device, &out->table));
  KAIO_TRY(check_dtype("block_table", out->table, KAIO_DTYPE_I32));
  const int64_t need_pages = (max_len + page_size - 1) / page_size;
  if (out->table.rows != batch || out->table.cols < need_pages)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: argument 'block_table' is %" PRId64 " x %" PRId64 "; it must have desc->batch "
                "(%" PRId64 ") rows and at least ceil(desc->%s / page_size) = %" PRId64
                " columns.",
                api_name(), out->table.rows, out->table.cols, batch, max_len_field, need_pages);
  return KAIO_OK;
}

kaio_status attention_check_types(const char *family, kaio_dtype dtype, kaio_dtype out_dtype,
                                  kaio_dtype o_dtype, int32_t mask, bool backward) {
  if (!is_half(dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: desc->dtype is %s (%d); %s takes KAIO_DTYPE_F16 or KAIO_DTYPE_BF16.",
                api_name(), kaio_dtype_name(dtype), dtype, family);
  if (!is_float_dtype(out_dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: desc->out_dtype is %s (%d); use 0 (same as dtype), KAIO_DTYPE_F32, "
                "KAIO_DTYPE_F16 or KAIO_DTYPE_BF16.",
                api_name(), kaio_dtype_name(out_dtype), out_dtype);
  if (backward && o_dtype != dtype && o_dtype != KAIO_DTYPE_F32)
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: desc->o_dtype is %s (%d); O must be dtype (%s) or KAIO_DTYPE_F32 (0 means "
                "dtype).",
                api_name(), kaio_dtype_name(o_dtype), o_dtype, kaio_dtype_name(dtype));
  if (mask < KAIO_ATTENTION_MASK_NONE || mask > KAIO_ATTENTION_CAUSAL_TOP_LEFT)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: desc->mask is %d; use KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL or "
                "KAIO_ATTENTION_CAUSAL_TOP_LEFT.",
                api_name(), mask);
  return KAIO_OK;
}

}  // namespace kaio
