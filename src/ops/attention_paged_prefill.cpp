// Chunked prefill against a paged KV cache: the varlen forward's queries
// (packed by cu_seqlens_q) with each sequence's keys read from the K and V
// page pools through the block table (the paged entries of
// ptx/gen_attention_sm80.py, and of gen_attention_sm90.py on sm_90, picked
// as the varlen forward picks its kernel). Shares AttentionVarlenPlan and
// its desc checks; this file holds what only the paged op has.
#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <memory>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/attention_varlen.hpp"
#include "ops/op_flag.hpp"
#include "ops/key_list.hpp"
#include "ops/plan_log.hpp"
#include "ops/tensor_map.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/stream.hpp"

namespace kaio {
namespace {

constexpr const auto &kPagedDims = kernels::keys::attn_fwd_paged_sm80::head_dim;


kaio_status check_i32(const char *arg, const kaio_tensor &t, const kaio_device *device,
                      int64_t rows, int64_t cols, CheckedView *out) {
  KAIO_TRY(check_view(arg, &t, device, out));
  KAIO_TRY(check_dtype(arg, *out, KAIO_DTYPE_I32));
  return check_shape(arg, *out, rows, cols);
}

unsigned u32(int64_t v) { return static_cast<unsigned>(v); }

}  // namespace

kaio_status paged_prefill_check(const kaio_attention_varlen_desc &d, int32_t page_size) {
  KAIO_TRY(attention_check_page_size(page_size));
  if (d.total_k != 0)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: desc->total_k is %" PRId64 "; paged prefill reads K and V from the page "
                "pools, so total_k must be 0 (max_seqlen_k is the largest seq_lens entry).",
                api_name(), d.total_k);
  return KAIO_OK;
}

kaio_status paged_prefill_plan(kaio_device *device, AttentionVarlenPlan *plan) {
  const kaio_attention_varlen_desc &d = plan->desc;
  if (!in_list(kPagedDims, d.head_dim))
    return fail(KAIO_ERROR_UNSUPPORTED, "%s: desc->head_dim is %" PRId64 "; paged prefill takes %s.",
                api_name(), d.head_dim, list_text(kPagedDims, "or").c_str());
  KAIO_TRY(varlen_pick_sm90(device, d, &plan->sm90));
  int64_t tile = 0;
  if (plan->sm90) {
    KAIO_TRY(attention_resolve(device, kernels::attn_fwd_paged_sm90(d.dtype, d.head_dim),
                               &plan->fwd, &tile, &plan->fwd_box));
    // a K/V box never crosses a page: the kernel loads min(page_size, box) rows per box
    plan->fwd_box.kv[1] = std::min(plan->fwd_box.kv[1], static_cast<unsigned>(plan->page_size));
  } else {
    const bool m128 = attention_m128(d.variant, d.head_dim);
    KAIO_TRY(attention_resolve(device,
                               kernels::attn_fwd_paged_sm80(d.dtype, d.head_dim, m128 ? 128 : 64),
                               &plan->fwd, &tile));
  }
  plan->fwd.grid = u32((d.max_seqlen_q + tile - 1) / tile);
  plan->fwd.grid_y = u32(d.batch * d.heads_q);
  log_kernel(device, plan->fwd.function,
             d.variant != KAIO_ATTENTION_AUTO ? "paged prefill, variant set in the desc"
             : plan->sm90                     ? "paged prefill, AUTO: sm_90a"
                                              : "paged prefill, AUTO: sm_80");
  return KAIO_OK;
}

kaio_status paged_prefill_run(const AttentionVarlenPlan &plan, kaio_stream *stream,
                              const kaio_tensor *t) {
  const kaio_attention_varlen_desc &d = plan.desc;
  const kaio_device *device = plan.device;
  const int64_t ps = plan.page_size;
  CheckedView q, cu_q, lens, o, lse;
  KAIO_TRY(attention_check_rows("Q", t[0], device, d.dtype, d.total_q, d.heads_q, d.head_dim, &q));
  PagedViews pages;
  KAIO_TRY(attention_check_pages(t[1], t[2], t[4], device, d.dtype, d.heads_kv, d.head_dim, d.batch,
                                 ps, d.max_seqlen_k, "max_seqlen_k", &pages));
  const CheckedView &kp = pages.k_pool, &vp = pages.v_pool, &table = pages.table;
  KAIO_TRY(check_i32("cu_seqlens_q", t[3], device, 1, d.batch + 1, &cu_q));
  KAIO_TRY(check_i32("seq_lens", t[5], device, 1, d.batch, &lens));
  KAIO_TRY(attention_check_rows("O", t[6], device, d.out_dtype, d.total_q, d.heads_q, d.head_dim, &o));
  const bool has_lse = t[7].buffer != nullptr;
  if (has_lse) {
    KAIO_TRY(check_view("LSE", &t[7], device, &lse));
    KAIO_TRY(check_dtype("LSE", lse, KAIO_DTYPE_F32));
    KAIO_TRY(check_shape("LSE", lse, d.heads_q, d.total_q));
  }
  const NamedChecked ins[] = {{"Q", &q},           {"K pool", &kp},     {"V pool", &vp},
                              {"cu_seqlens_q", &cu_q}, {"block_table", &table},
                              {"seq_lens", &lens}, {"O", &o}};
  if (has_lse)
    KAIO_TRY(attention_check_disjoint({{"O", &o}, {"LSE", &lse}},
                                      {ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], ins[6],
                                       {"LSE", &lse}}));
  else
    KAIO_TRY(attention_check_disjoint({{"O", &o}}, {ins[0], ins[1], ins[2], ins[3], ins[4], ins[5]}));

  unsigned long long pq = q.address, pk = kp.address, pv = vp.address, po = o.address,
                     pl = has_lse ? lse.address : 0, zero = 0, q_ss = q.row_stride,
                     k_ss = kp.row_stride, v_ss = vp.row_stride, o_ss = o.row_stride,
                     lse_rs = has_lse ? lse.row_stride : 0, p_cu = cu_q.address,
                     p_table = table.address, p_lens = lens.address,
                     p_flag = plan.flag ? plan.flag->device_address() : 0,
                     table_rs = table.row_stride;
  unsigned sq = u32(d.max_seqlen_q), sk = u32(d.max_seqlen_k), hq = u32(d.heads_q),
           group = u32(d.heads_q / d.heads_kv), off = 0, causal = u32(d.mask),
           out_dtype = u32(d.out_dtype), total_q = u32(d.total_q), num_pages = u32(kp.rows / ps),
           page_shift = u32(__builtin_ctzll(static_cast<unsigned long long>(ps)));
  float scale_log2 = static_cast<float>(d.softmax_scale * 1.4426950408889634);
  if (plan.sm90) {
    // the pools as one batch of num_pages * page_size rows
    TensorMap map_q, map_k, map_v;
    {
      ContextScope scope(device);
      KAIO_TRY(scope.status());
      const AttentionPlan::Boxes &box = plan.fwd_box;
      KAIO_TRY(encode_bshd_map(device, q, d.dtype, d.total_q, d.heads_q, box.q, &map_q));
      KAIO_TRY(encode_bshd_map(device, kp, d.dtype, kp.rows, d.heads_kv, box.kv, &map_k));
      KAIO_TRY(encode_bshd_map(device, vp, d.dtype, vp.rows, d.heads_kv, box.kv, &map_v));
    }
    void *params[] = {&map_q,   &map_k,      &map_v,   &po,      &pl,        &sq,
                      &sk,      &hq,         &group,   &zero,    &o_ss,      &lse_rs,
                      &scale_log2, &causal,  &off,     &out_dtype, &p_cu,    &p_table,
                      &p_lens,  &p_flag,     &table_rs, &total_q, &num_pages, &page_shift};
    KAIO_TRY(launch_builtin(device, plan.fwd, stream, params));
  } else {
    void *params[] = {&pq,     &pk,       &pv,         &po,       &pl,        &sq,
                      &sk,     &hq,       &group,      &zero,     &q_ss,      &zero,
                      &k_ss,   &zero,     &v_ss,       &zero,     &o_ss,      &lse_rs,
                      &scale_log2, &causal, &off,      &out_dtype, &p_cu,     &p_table,
                      &p_lens, &p_flag,   &table_rs,   &total_q,  &num_pages, &page_shift};
    KAIO_TRY(launch_builtin(device, plan.fwd, stream, params));
  }
  note_op_flag(stream, plan.flag);  // after the launch: see ErrorFlagRegistry::ticket
  return KAIO_OK;
}

}  // namespace kaio
