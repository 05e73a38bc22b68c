// Attention on packed variable-length batches (kaio_attention_varlen_desc):
// the varlen kernels of ptx/gen_attention_sm80.py and gen_attention_sm90.py,
// which read each sequence's rows from cu_seqlens on the device.
#pragma once

#include <kaio/kaio.h>

#include <initializer_list>
#include <memory>
#include <utility>

#include "kernels/builtin_kernels.hpp"
#include "ops/attention.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {

struct AttentionVarlenPlan : PlanBase {
  bool backward = false;
  kaio_attention_varlen_desc desc{};  // plan() fills in out_dtype, o_dtype and the scale
  bool sm90 = false;                  // fwd is an sm_90a kernel (TMA maps)
  AttentionPlan::Boxes fwd_box;
  Launch fwd;                         // forward
  Launch pre, dq, dkdv;               // backward: Dv, dQ, dK and dV
  Workspace workspace;                // backward: Dv, Hq·total_q f32
  bool paged = false;                 // set before plan(): the paged prefill op
  int32_t page_size = 0;              // paged: set before plan()
  std::shared_ptr<ErrorFlag> flag;    // the device's op flag (bad cu_seqlens, seq_lens, block_table)

  kaio_status plan(kaio_device *device);
  // {Q, K, V, cu_q, cu_k, O, LSE}, {dO, Q, K, V, cu_q, cu_k, O, LSE, dQ, dK, dV}
  // or, paged, {Q, K pool, V pool, cu_q, block_table, seq_lens, O, LSE}
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

// attention.cpp's helpers, shared with the varlen op: a kernel's launch and
// rows per CTA (and TMA boxes), a rank-2 attention view [rows, heads·dim]
// with its alignment, and outputs that overlap no other view.
kaio_status attention_resolve(kaio_device *device, KernelId id, Launch *out, int64_t *tile,
                              AttentionPlan::Boxes *boxes = nullptr);
kaio_status attention_check_rows(const char *arg, const kaio_tensor &t, const kaio_device *device,
                                 kaio_dtype dtype, int64_t rows, int64_t heads, int64_t dim,
                                 CheckedView *out);
using NamedChecked = std::pair<const char *, const CheckedView *>;
kaio_status attention_check_disjoint(std::initializer_list<NamedChecked> outs,
                                     std::initializer_list<NamedChecked> all);
// The dtype, out_dtype, o_dtype (backward) and mask fields of an attention
// desc; family names the op in the dtype message ("attention", "varlen
// attention").
kaio_status attention_check_types(const char *family, kaio_dtype dtype, kaio_dtype out_dtype,
                                  kaio_dtype o_dtype, int32_t mask, bool backward);
// The paged ops' page_size: 16, 32, 64, 128 or 256 (INVALID_ARGUMENT else).
kaio_status attention_check_page_size(int32_t page_size);
// A paged op's K and V pools (views [num_pages · page_size, heads_kv ·
// head_dim] of dtype, num_pages >= 1, the same rows, 16-byte aligned) and
// its block table (I32 [batch, >= ceil(max_len / page_size)]; max_len_field
// names the desc field that bounds the sequences' lengths).
struct PagedViews {
  CheckedView k_pool, v_pool, table;
};
kaio_status attention_check_pages(const kaio_tensor &k_pool, const kaio_tensor &v_pool,
                                  const kaio_tensor &table, const kaio_device *device,
                                  kaio_dtype dtype, int64_t heads_kv, int64_t head_dim,
                                  int64_t batch, int64_t page_size, int64_t max_len,
                                  const char *max_len_field, PagedViews *out);
// The sm_80 forward's 128-row kernels take head dims up to 128: variant
// SM80_M128 forces them, AUTO takes them where they exist.
inline constexpr int64_t kMaxM128Dim = 128;
inline bool attention_m128(int32_t variant, int64_t head_dim) {
  return variant == KAIO_ATTENTION_SM80_M128 ||
         (variant == KAIO_ATTENTION_AUTO && head_dim <= kMaxM128Dim);
}

// Whether a forward runs the sm_90a kernel: variant SM90 (an error where
// the device or driver can't run it), or AUTO for the sm_90a head dims on
// an sm_90 device with tensor maps.
kaio_status varlen_pick_sm90(const kaio_device *device, const kaio_attention_varlen_desc &d,
                             bool *sm90);

// Paged prefill (ops/attention_paged_prefill.cpp): the desc fields and page
// size only it has (before the varlen checks); its kernel and flag; its
// launch on the 8 views.
kaio_status paged_prefill_check(const kaio_attention_varlen_desc &d, int32_t page_size);
kaio_status paged_prefill_plan(kaio_device *device, AttentionVarlenPlan *plan);
kaio_status paged_prefill_run(const AttentionVarlenPlan &plan, kaio_stream *stream,
                              const kaio_tensor *t);

}  // namespace kaio
