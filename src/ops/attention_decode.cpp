// Decode attention (ptx/gen_attention_decode.py): few query rows per
// sequence against a long KV cache, contiguous or paged. One CTA per 16
// (position, head) rows of a KV head and key split; the splits' partial O and
// LSE go to the prepared op's workspace, and the CTA of a (sequence, KV head,
// row block) that finishes last (a count per block in the workspace, which
// that CTA resets) merges them in split order.
#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <vector>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "ops/attention.hpp"
#include "ops/attention_varlen.hpp"
#include "ops/kernel_family.hpp"
#include "ops/key_list.hpp"
#include "ops/op_flag.hpp"
#include "ops/plan_log.hpp"
#include "runtime/buffer.hpp"
#include "runtime/buffer_copy.hpp"
#include "runtime/stream.hpp"

namespace kaio {
namespace {

constexpr const auto &kDecodeDims = kernels::keys::attn_decode::head_dim;
constexpr int64_t kMaxDecodeRows = 16;    // query rows per sequence (Sq)
constexpr int64_t kCtaRows = 16;          // (position, head) rows per CTA
constexpr int64_t kMinSplitKeys = 128;    // 4 warps x 2 tiles of 16 keys
constexpr int64_t kChunkAlign = 16;       // a split starts on a tile boundary
// The split estimate's constants, fitted to H100 sweeps of forced split
// counts (bench/RESULTS.md, session 11 second pass): a CTA streams at most
// 1/kCtaShare of the device's bandwidth (~40 GB/s of ~3 TB/s), and each
// CTA per SM beyond the first, or a split merge, costs ~2.1 us (as bytes).
constexpr double kCtaShare = 75;
constexpr double kLevelBytes = 6.3e6;
constexpr double kTieBytes = 1 << 20;
constexpr int64_t kMaxSplits = 128;       // the merge's weights: 128 per row in shared memory


unsigned u32(int64_t v) { return static_cast<unsigned>(v); }

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

}  // namespace

bool wants_decode(const kaio_attention_desc &d, bool backward) {
  if (backward) return false;
  if (d.variant == KAIO_ATTENTION_DECODE) return true;
  return d.variant == KAIO_ATTENTION_AUTO && d.seq_q <= kMaxDecodeRows &&
         in_list(kDecodeDims, d.head_dim);
}

kaio_status check_decode_desc(const kaio_attention_desc &d, bool backward, bool paged,
                              int32_t page_size) {
  if (paged) KAIO_TRY(attention_check_page_size(page_size));
  if (paged && d.variant != KAIO_ATTENTION_AUTO && d.variant != KAIO_ATTENTION_DECODE)
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: desc->variant is %d; paged attention runs the decode kernels only. Use "
                "KAIO_ATTENTION_AUTO or KAIO_ATTENTION_DECODE.",
                api_name(), d.variant);
  if (!paged && d.variant != KAIO_ATTENTION_DECODE) return KAIO_OK;
  const char *what = paged ? "paged attention" : "desc->variant KAIO_ATTENTION_DECODE";
  if (backward)
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: %s has no backward. Use KAIO_ATTENTION_AUTO for the backward.", api_name(),
                what);
  if (d.seq_q > kMaxDecodeRows)
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: desc->seq_q is %" PRId64 " but %s takes at most %" PRId64
                " query rows per sequence. Split the queries, or use KAIO_ATTENTION_AUTO "
                "(contiguous K/V).",
                api_name(), d.seq_q, what, kMaxDecodeRows);
  if (!in_list(kDecodeDims, d.head_dim))
    return fail(KAIO_ERROR_UNSUPPORTED,
                "%s: desc->head_dim is %" PRId64 " but %s takes head dims %s. Pad the head "
                "dimension with zeros.",
                api_name(), d.head_dim, what, list_text(kDecodeDims, "or").c_str());
  return KAIO_OK;
}

kaio_status plan_decode(kaio_device *device, AttentionPlan *plan) {
  const kaio_attention_desc &d = plan->desc;
  plan->decode = true;
  const int64_t group = d.heads_q / d.heads_kv, rows = group * d.seq_q;
  const int64_t row_blocks = (rows + kCtaRows - 1) / kCtaRows, z = d.batch * d.heads_kv;
  // Splits (a one-shot plan has no workspace, so none): estimated time, in
  // bytes at the device's bandwidth: the cache (plus the partial O and LSE
  // when split) or, when longer, the busiest SM's CTAs at a CTA's rate; plus
  // kLevelBytes per CTA per SM beyond the first and for the merge. Of the
  // counts within kTieBytes of the least, the largest: one CTA per SM that
  // streams its share beats two that split more, and beats fewer CTAs that
  // must each stream faster. Each split takes at least kMinSplitKeys keys.
  int64_t splits = 1, chunk = round_up(d.seq_k, kChunkAlign);
  if (plan->prepared) {
    const int64_t sms = std::max(1, device->info.sm_count);
    const double cache = 4.0 * static_cast<double>(z) * d.seq_k * d.head_dim;
    const double partial = 8.0 * static_cast<double>(z) * rows * (d.head_dim + 1);
    const int64_t most = std::min((d.seq_k + kMinSplitKeys - 1) / kMinSplitKeys, kMaxSplits);
    const auto estimate = [&](int64_t s, int64_t *n, int64_t *c) {
      *c = round_up((d.seq_k + s - 1) / s, kChunkAlign);
      *n = (d.seq_k + *c - 1) / *c;
      const int64_t level = (z * row_blocks * *n + sms - 1) / sms;  // CTAs per SM
      const double per_sm = kCtaShare * static_cast<double>(level) * 4.0 * *c * d.head_dim;
      return std::max(cache + (*n > 1 ? *n * partial : 0.0), per_sm) +
             kLevelBytes * static_cast<double>(level - 1 + (*n > 1 ? 1 : 0));
    };
    double least = 0;
    for (int64_t s = 1, n, c; s <= most; ++s) {
      const double t = estimate(s, &n, &c);
      if (s == 1 || t < least) least = t;
    }
    for (int64_t s = 1, n, c; s <= most; ++s)
      if (estimate(s, &n, &c) <= least + kTieBytes) {
        splits = n;
        chunk = c;
      }
  }
  char why[96];
  std::snprintf(why, sizeof why, "%s, %" PRId64 " split(s) of %" PRId64 " keys",
                d.variant == KAIO_ATTENTION_DECODE ? "variant KAIO_ATTENTION_DECODE"
                : plan->paged                      ? "paged"
                                                   : "AUTO: seq_q <= 16",
                splits, chunk);
  // the kernel, or where it can run its sm_90 twin (a dependent launch; its wait
  // precedes the split counts, so the last-CTA combine sees this launch only)
  BuiltinFunction fn;
  KAIO_TRY(resolve_twin(device, kernels::attn_decode(d.dtype, d.head_dim, plan->paged),
                        kernels::attn_decode_pdl(d.dtype, d.head_dim, plan->paged), why, &fn));
  plan->fwd = launch_of(fn);
  plan->splits = u32(splits);
  plan->chunk = u32(chunk);
  plan->fwd.grid = u32(splits);
  plan->fwd.grid_y = u32(row_blocks);
  plan->fwd.grid_z = u32(z);
  // bad seq_lens / block_table entries: the device's op flag, one-shot calls too
  if (plan->paged) KAIO_TRY(device_op_flag(device, &plan->flag));
  if (splits == 1) return KAIO_OK;
  // partial O [splits * total][D] f32, LSE [splits * total] f32, then one
  // u32 count per (z, row block), zero before the first launch (each launch
  // leaves them zero)
  const uint64_t total = static_cast<uint64_t>(z * rows);
  const uint64_t counts = static_cast<uint64_t>(z * row_blocks);
  const uint64_t count_at = static_cast<uint64_t>(splits) * total * (d.head_dim + 1) * 4;
  KAIO_TRY(DeviceMemory::allocate(device, count_at + counts * 4, &plan->workspace));
  const std::vector<uint32_t> zeros(counts, 0);
  return buffer_write(plan->workspace->buffer(), count_at, zeros.data(), counts * 4);
}

namespace {

// The decode kernel's parameters other than the tensors' addresses.
struct DecodeArgs {
  unsigned long long q = 0, k = 0, v = 0, o = 0, lse = 0, ws_o = 0, ws_lse = 0, table = 0,
                     lens = 0, flag = 0, count = 0;
  unsigned seq_q = 0, seq_k = 0, heads_q = 0, group = 0, splits = 0, chunk = 0;
  unsigned long long q_bs = 0, q_ss = 0, k_bs = 0, k_ss = 0, v_bs = 0, v_ss = 0, o_bs = 0,
                     o_ss = 0, lse_rs = 0, table_rs = 0;
  unsigned num_pages = 0, page_shift = 0;
  float scale_log2 = 0;
  unsigned causal = 0, out_dtype = 0;
};

DecodeArgs common_args(const AttentionPlan &plan, const CheckedView &q, const CheckedView &o,
                       const CheckedView *lse) {
  const kaio_attention_desc &d = plan.desc;
  DecodeArgs a;
  a.q = q.address;
  a.o = o.address;
  a.lse = lse ? lse->address : 0;
  if (plan.splits > 1) {
    const uint64_t total = static_cast<uint64_t>(d.batch * d.heads_q * d.seq_q);
    a.ws_o = plan.workspace->ptr();
    a.ws_lse = a.ws_o + plan.splits * total * static_cast<uint64_t>(d.head_dim) * 4;
    a.count = a.ws_lse + plan.splits * total * 4;
  }
  a.seq_q = u32(d.seq_q);
  a.seq_k = u32(d.seq_k);
  a.heads_q = u32(d.heads_q);
  a.group = u32(d.heads_q / d.heads_kv);
  a.splits = plan.splits;
  a.chunk = plan.chunk;
  a.q_bs = static_cast<unsigned long long>(q.row_stride * d.seq_q);
  a.q_ss = q.row_stride;
  a.o_bs = static_cast<unsigned long long>(o.row_stride * d.seq_q);
  a.o_ss = o.row_stride;
  a.lse_rs = lse ? lse->row_stride : 0;
  a.scale_log2 = static_cast<float>(d.softmax_scale * 1.4426950408889634);
  a.causal = d.mask == KAIO_ATTENTION_CAUSAL ? 1u : d.mask == KAIO_ATTENTION_CAUSAL_TOP_LEFT ? 2u : 0u;
  a.out_dtype = static_cast<unsigned>(d.out_dtype);
  return a;
}

kaio_status launch_decode(const kaio_device *device, const AttentionPlan &plan,
                          kaio_stream *stream, DecodeArgs a) {
  void *params[] = {&a.q,      &a.k,         &a.v,      &a.o,      &a.lse,       &a.ws_o,
                    &a.ws_lse, &a.table,     &a.lens,   &a.flag,   &a.count,     &a.seq_q,
                    &a.seq_k,  &a.heads_q,   &a.group,  &a.splits, &a.chunk,     &a.q_bs,
                    &a.q_ss,   &a.k_bs,      &a.k_ss,   &a.v_bs,   &a.v_ss,      &a.o_bs,
                    &a.o_ss,   &a.lse_rs,    &a.table_rs, &a.num_pages, &a.page_shift,
                    &a.scale_log2, &a.causal, &a.out_dtype};
  KAIO_TRY(launch_builtin(device, plan.fwd, stream, params));
  if (plan.flag) note_op_flag(stream, plan.flag);  // after the launch: see ticket()
  return KAIO_OK;
}

}  // namespace

kaio_status run_decode(const kaio_device *device, const AttentionPlan &plan, kaio_stream *stream,
                       const CheckedView &q, const CheckedView &k, const CheckedView &v,
                       const CheckedView &o, const CheckedView *lse) {
  const kaio_attention_desc &d = plan.desc;
  DecodeArgs a = common_args(plan, q, o, lse);
  a.k = k.address;
  a.v = v.address;
  a.k_bs = static_cast<unsigned long long>(k.row_stride * d.seq_k);
  a.k_ss = k.row_stride;
  a.v_bs = static_cast<unsigned long long>(v.row_stride * d.seq_k);
  a.v_ss = v.row_stride;
  return launch_decode(device, plan, stream, a);
}

namespace {


}  // namespace

kaio_status run_paged(const kaio_device *device, const AttentionPlan &plan, kaio_stream *stream,
                      const kaio_tensor *t) {
  const kaio_attention_desc &d = plan.desc;
  const int64_t ps = plan.page_size;
  CheckedView q, lens, o, lse;
  KAIO_TRY(check_bshd("Q", t[0], device, d.dtype, d.batch, d.seq_q, d.heads_q, d.head_dim, &q));
  PagedViews pages;
  KAIO_TRY(attention_check_pages(t[1], t[2], t[3], device, d.dtype, d.heads_kv, d.head_dim, d.batch,
                                 ps, d.seq_k, "seq_k", &pages));
  const CheckedView &kp = pages.k_pool, &vp = pages.v_pool, &table = pages.table;
  KAIO_TRY(check_view("seq_lens", &t[4], device, &lens));
  KAIO_TRY(check_dtype("seq_lens", lens, KAIO_DTYPE_I32));
  KAIO_TRY(check_shape("seq_lens", lens, 1, d.batch));
  KAIO_TRY(check_bshd("O", t[5], device, d.out_dtype, d.batch, d.seq_q, d.heads_q, d.head_dim, &o));
  const bool has_lse = t[6].buffer != nullptr;
  if (has_lse) KAIO_TRY(check_lse(t[6], device, d, &lse));
  const std::pair<const char *, const CheckedView *> ins[] = {
      {"Q", &q}, {"K pool", &kp}, {"V pool", &vp}, {"block_table", &table}, {"seq_lens", &lens}};
  for (const auto &[name, view] : ins) {
    KAIO_TRY(check_no_partial_overlap("O", o, name, *view, false));
    if (has_lse) KAIO_TRY(check_no_partial_overlap("LSE", lse, name, *view, false));
  }
  if (has_lse) KAIO_TRY(check_no_partial_overlap("O", o, "LSE", lse, false));
  DecodeArgs a = common_args(plan, q, o, has_lse ? &lse : nullptr);
  a.k = kp.address;
  a.v = vp.address;
  a.k_ss = kp.row_stride;
  a.v_ss = vp.row_stride;
  a.table = table.address;
  a.table_rs = table.row_stride;
  a.lens = lens.address;
  a.flag = plan.flag ? plan.flag->device_address() : 0;
  a.num_pages = u32(kp.rows / ps);
  a.page_shift = u32(__builtin_ctzll(static_cast<unsigned long long>(ps)));
  return launch_decode(device, plan, stream, a);
}

}  // namespace kaio
