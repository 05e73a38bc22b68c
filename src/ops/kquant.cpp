// GGUF k-quant ops: quantize (bit-exact with ggml's or candle's reference),
// dequantize, and dequant-matmul (matvec kernels for M <= 8; for larger M a
// dequantized f16/bf16 workspace feeds the tensor-core matmul).
#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <string>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "kernels/module_cache.hpp"
#include "ops/kernel_family.hpp"
#include "ops/kquant.hpp"
#include "ops/plan_log.hpp"
#include "runtime/buffer.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

namespace kaio {
namespace {

constexpr int64_t kMatvecMaxRows = 8;
constexpr int64_t kRowsPerMatvecBlock = 8;  // one warp per weight row
constexpr int64_t kRowsPerMmaBlock = 16;    // the tensor-core matvec: one mma tile of rows
constexpr int64_t kSuperblock = 256;          // values per Q4_K / Q5_K / Q6_K block
constexpr int64_t kMmaNarrowMaxBlocks = 32;   // K <= 8192: the 4-warp tensor-core matvec
constexpr int64_t kStreamMinStages = 2;       // a ring of 1 could not overlap copies and arithmetic
constexpr unsigned kConvertPerThread = 8;   // the convert kernels' elements per thread

bool known_format(kaio_quant_format f) { return f >= KAIO_QUANT_Q8_0 && f <= KAIO_QUANT_Q6_K; }
int format_index(kaio_quant_format f) { return f - KAIO_QUANT_Q8_0; }

const char *format_name(kaio_quant_format f) {
  static const char *names[] = {"KAIO_QUANT_Q8_0", "KAIO_QUANT_Q4_K", "KAIO_QUANT_Q5_K",
                                "KAIO_QUANT_Q6_K"};
  return known_format(f) ? names[format_index(f)] : "unknown";
}

// Threads per block: Q8_0 one per block, Q6_K one per 16-value sub-block,
// Q4_K/Q5_K one per 32-value sub-block.
int64_t quantize_groups(kaio_quant_format f) {
  return f == KAIO_QUANT_Q8_0 ? 1 : f == KAIO_QUANT_Q6_K ? 16 : 8;
}

// Alignment the kernels' loads and stores need of the block bytes.
uint64_t quant_alignment(kaio_quant_format f) {
  return f == KAIO_QUANT_Q4_K || f == KAIO_QUANT_Q5_K ? 16 : 2;
}

kaio_status resolve(kaio_device *device, KernelId id, Launch *out) {
  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(id, &fn));
  *out = launch_of(fn);
  return KAIO_OK;
}

// Blocks of launch.block threads for `threads` threads.
unsigned blocks_for(int64_t threads, const Launch &launch) {
  return static_cast<unsigned>((threads + launch.block - 1) / launch.block);
}

kaio_status check_values(const char *what, kaio_quant_format format, int64_t rows, int64_t cols) {
  const int64_t be = kquant_block_elems(format);
  if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: %s is %" PRId64 " x %" PRId64 "; both must be between 1 and %d.", api_name(),
                what, rows, cols, INT32_MAX);
  if (cols % be != 0)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: the row length is %" PRId64 " but %s quantizes whole blocks of %" PRId64
                " values; pad the rows to %" PRId64 ".",
                api_name(), cols, format_name(format), be, (cols + be - 1) / be * be);
  // Every kernel indexes blocks (or 32-value chunks) of all rows with 32 bits.
  if (rows * (cols / 32) > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: %s has %" PRId64 " values; at most %" PRId64 " per call. Split the rows.",
                api_name(), what, rows * cols, static_cast<int64_t>(INT32_MAX) * 32);
  return KAIO_OK;
}

// A float view the kernels read or write with 16-byte vectors.
kaio_status check_float_view(const char *arg, const kaio_tensor *t, const kaio_device *device,
                             kaio_dtype dtype, int64_t rows, int64_t cols, CheckedView *out) {
  KAIO_TRY(check_view(arg, t, device, out));
  KAIO_TRY(check_dtype(arg, *out, dtype));
  KAIO_TRY(check_shape(arg, *out, rows, cols));
  const uint64_t stride_bytes = static_cast<uint64_t>(out->row_stride) * kaio_dtype_size(dtype);
  if (out->address % 16 != 0 || (rows > 1 && stride_bytes % 16 != 0))
    return fail(KAIO_ERROR_MISALIGNED,
                "%s: argument '%s' starts at byte %" PRIu64 " of a 256-byte-aligned allocation "
                "with a row stride of %" PRIu64 " bytes; the k-quant kernels need both to be "
                "multiples of 16 bytes. Pad the rows or copy into an aligned buffer.",
                api_name(), arg, static_cast<uint64_t>(out->address % 256), stride_bytes);
  return KAIO_OK;
}

kaio_status check_quant_view(const char *arg, const kaio_tensor *t,
                             const kaio_device *device, kaio_quant_format format, int64_t rows,
                             int64_t cols, CheckedView *out) {
  KAIO_TRY(check_view(arg, t, device, out));
  if (out->dtype != KAIO_DTYPE_U8)
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: argument '%s' is %s; quantized blocks are passed as a KAIO_DTYPE_U8 view of "
                "their bytes.",
                api_name(), arg, kaio_dtype_name(out->dtype));
  const int64_t bytes = cols / kquant_block_elems(format) * kquant_block_bytes(format);
  if (out->rows != rows || out->cols != bytes)
    return fail(KAIO_ERROR_SHAPE_MISMATCH,
                "%s: argument '%s' is %" PRId64 " x %" PRId64 " bytes but %" PRId64
                " rows of %" PRId64 " %s values take %" PRId64 " x %" PRId64
                " bytes (kaio_quant_row_bytes).",
                api_name(), arg, out->rows, out->cols, rows, cols, format_name(format), rows,
                bytes);
  const uint64_t align = quant_alignment(format);
  if (out->address % align != 0 || (rows > 1 && static_cast<uint64_t>(out->row_stride) % align))
    return fail(KAIO_ERROR_MISALIGNED,
                "%s: argument '%s' starts at byte %" PRIu64 " of a 256-byte-aligned allocation "
                "with a row stride of %" PRId64 " bytes; %s blocks need both to be multiples of "
                "%" PRIu64 " bytes.",
                api_name(), arg, static_cast<uint64_t>(out->address % 256), out->row_stride,
                format_name(format), align);
  return KAIO_OK;
}

kaio_status plan_quantize(kaio_device *device, KquantPlan *p) {
  if (p->mode != KAIO_QUANT_MODE_GGML && p->mode != KAIO_QUANT_MODE_CANDLE)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'mode' is %d; use KAIO_QUANT_MODE_GGML (0) or "
                "KAIO_QUANT_MODE_CANDLE (1).",
                api_name(), p->mode);
  if (!is_float_dtype(p->dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: in_dtype is %s (%d); quantize takes KAIO_DTYPE_F32, KAIO_DTYPE_F16 or "
                "KAIO_DTYPE_BF16 values.",
                api_name(), kaio_dtype_name(p->dtype), p->dtype);
  KAIO_TRY(check_values("x", p->format, p->rows, p->cols));
  KAIO_TRY(resolve(device, kernels::kq_quantize(p->format, p->mode), &p->launch));
  const int64_t blocks = p->rows * (p->cols / kquant_block_elems(p->format));
  p->launch.grid = blocks_for(blocks * quantize_groups(p->format), p->launch);
  return KAIO_OK;
}

kaio_status plan_dequantize(kaio_device *device, KquantPlan *p, Launch *out) {
  KAIO_TRY(check_values("y", p->format, p->rows, p->cols));
  KAIO_TRY(resolve(device, kernels::kq_dequantize(p->format), out));
  out->grid = blocks_for(p->rows * (p->cols / 32), *out);
  return KAIO_OK;
}

// sm_90: the streaming tensor-core matvec (ptx/kquant_stream.py), one
// persistent CTA per SM, when A (and what the kernel makes of it) fits in
// shared memory beside the kernel's fixed part and a ring of stages: the
// deepest ring the kernel takes, else a shallower one down to
// kStreamMinStages (a larger A: 2 stages still overlap the copies with the
// arithmetic, and measured far faster than the fallback kernels). Q6_K and
// Q8_0 rows (210 and 34-byte blocks) are copied in 16-byte aligned windows,
// which needs W to start 16-byte aligned and its buffer to hold the last
// row's window (checked at launch: stream_windows_fit; p->unaligned runs
// otherwise).
// why: for KAIO_LOG, why it was or was not planned.
kaio_status plan_stream_matvec(kaio_device *device, KquantPlan *p,
                               bool *planned, std::string *why) {
  *planned = false;
  // Where the device runs sm_90 and the driver loads the kernel's PTX.
  const FamilyCheck hopper = check_family(device, ModuleId::kquant_stream_sm90, false);
  *why = hopper.why;
  if (!hopper.ok()) return KAIO_OK;
  const KernelId id = kernels::kq_stream(p->format, p->dtype);
  BuiltinFunction fn;
  KAIO_TRY(device->modules->function(id, &fn));
  // A (2 bytes a value), or A split into f16 hi + lo (4 bytes a value: f32
  // A, and Q8_0's bf16 A); Q4_K/Q5_K's 32-value group sums as three bf16
  // planes (kquant_stream_act.py: prepare_split, group_sums)
  const int64_t values = p->rows * p->k;
  const bool q45 = p->format == KAIO_QUANT_Q4_K || p->format == KAIO_QUANT_Q5_K;
  const bool split =
      p->dtype == KAIO_DTYPE_F32 || (p->format == KAIO_QUANT_Q8_0 && p->dtype == KAIO_DTYPE_BF16);
  const int64_t tail =
      fn.info->shared_fixed + values * (split ? 4 : 2) + (q45 ? 3 * (values / 32) * 2 : 0);
  int64_t stages = fn.info->ring_stages;
  while (stages >= kStreamMinStages && tail + stages * fn.info->ring_stage > fn.shared_bytes)
    --stages;
  if (stages < kStreamMinStages) {
    if (log_enabled()) *why = "A does not fit the streaming kernel's shared memory";
    return KAIO_OK;
  }
  KAIO_TRY(resolve(device, id, &p->launch));
  p->launch.shared_bytes = static_cast<unsigned>(tail + stages * fn.info->ring_stage);
  p->ring_stages = static_cast<unsigned>(stages);
  const int64_t tiles = (p->cols + kRowsPerMmaBlock - 1) / kRowsPerMmaBlock;
  p->launch.grid = static_cast<unsigned>(std::min<int64_t>(tiles, device->info.sm_count));
  *planned = true;
  return KAIO_OK;
}

// K-quants with f16/bf16 A: the register-fed tensor-core matvec
// (ptx/kquant_mma.py), 16 weight rows per block. Two variants (VARIANTS
// there): rows of at most kMmaNarrowMaxBlocks superblocks run 4 warps per
// CTA, longer rows 8 (measured faster on the H100).
kaio_status plan_mma_matvec(kaio_device *device, const KquantPlan &p, Launch *out) {
  const bool narrow = p.k / kSuperblock <= kMmaNarrowMaxBlocks;
  const kernels::Variant variant = narrow ? kernels::Variant::w4 : kernels::Variant::none;
  KAIO_TRY(resolve(device, kernels::kq_mma(p.format, variant, p.dtype), out));
  out->grid = static_cast<unsigned>((p.cols + kRowsPerMmaBlock - 1) / kRowsPerMmaBlock);
  return KAIO_OK;
}

// Q8_0 and f32 A where the streaming kernel does not apply: the CUDA-core
// matvec, a kernel per M bucket (1, 2, 4, 8), a warp per weight row.
kaio_status plan_cuda_core_matvec(kaio_device *device, const KquantPlan &p, Launch *out) {
  int64_t rows = 1;  // rows per kernel: 1, 2, 4, 8
  while (rows < p.rows) rows *= 2;
  KAIO_TRY(resolve(device, kernels::kq_matvec(p.format, rows), out));
  out->grid = static_cast<unsigned>((p.cols + kRowsPerMatvecBlock - 1) / kRowsPerMatvecBlock);
  return KAIO_OK;
}

kaio_status plan_matmul_kq(kaio_device *device, KquantPlan *p) {
  if (!is_float_dtype(p->dtype))
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: a_dtype is %s (%d); activations are KAIO_DTYPE_F32, KAIO_DTYPE_F16 or "
                "KAIO_DTYPE_BF16.",
                api_name(), kaio_dtype_name(p->dtype), p->dtype);
  if (p->out_dtype != KAIO_DTYPE_F32 && p->out_dtype != KAIO_DTYPE_F16)
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: out_dtype is %s (%d); dequant-matmul writes KAIO_DTYPE_F32 or "
                "KAIO_DTYPE_F16.",
                api_name(), kaio_dtype_name(p->out_dtype), p->out_dtype);
  if (p->rows < 1 || p->rows > INT32_MAX)
    return fail(KAIO_ERROR_INVALID_DIMENSION, "%s: M is %" PRId64 "; it must be between 1 and %d.",
                api_name(), p->rows, INT32_MAX);
  KAIO_TRY(check_values("W (N x K)", p->format, p->cols, p->k));
  if (p->rows <= kMatvecMaxRows) {
    bool streamed = false;
    std::string why;
    KAIO_TRY(plan_stream_matvec(device, p, &streamed, &why));
    if (streamed && log_enabled()) log_kernel(device, p->launch.function, "AUTO: M <= 8, " + why);
    // The streamed Q6_K and Q8_0 kernels need a 16-byte aligned W with room
    // for the last window; the kernel planned into p->unaligned runs a W
    // that has not.
    if (streamed && p->format != KAIO_QUANT_Q6_K && p->format != KAIO_QUANT_Q8_0) return KAIO_OK;
    Launch *out = streamed ? &p->unaligned : &p->launch;
    KAIO_TRY(p->dtype != KAIO_DTYPE_F32 && p->format != KAIO_QUANT_Q8_0
                 ? plan_mma_matvec(device, *p, out)
                 : plan_cuda_core_matvec(device, *p, out));
    if (log_enabled())
      log_kernel(device, out->function,
                 streamed ? std::string("for a W the streaming kernel's windows do not fit")
                          : "AUTO: M <= 8, sm_80 matvec; " + why);
    return KAIO_OK;
  }
  // Tensor-core path: dequantize W into the workspace, then C = A · W16ᵀ.
  p->tensor_core = true;
  const kaio_dtype ws = p->dtype == KAIO_DTYPE_BF16 ? KAIO_DTYPE_BF16 : KAIO_DTYPE_F16;
  KquantPlan dq;
  dq.format = p->format;
  dq.rows = p->cols;
  dq.cols = p->k;
  KAIO_TRY(plan_dequantize(device, &dq, &p->launch));
  log_kernel(device, p->launch.function, "M > 8: dequantize W, then the matmul");
  p->matmul.dtype = ws;
  p->matmul.rows = p->rows;
  p->matmul.cols = p->cols;
  p->matmul.out_dtype = p->out_dtype;
  p->matmul.trans_a = KAIO_TRANS_N;
  p->matmul.trans_b = KAIO_TRANS_T;
  p->matmul.k = p->k;
  KAIO_TRY(p->matmul.plan(device));
  if (p->dtype == KAIO_DTYPE_F32) {
    KAIO_TRY(resolve(device, kernels::convert(KAIO_DTYPE_F16), &p->convert_a));
    log_kernel(device, p->convert_a.function, "A is f32: rounded to f16 first");
    p->convert_a.grid =
        blocks_for((p->rows * p->k + kConvertPerThread - 1) / kConvertPerThread, p->convert_a);
    KAIO_TRY(DeviceMemory::allocate(device, static_cast<uint64_t>(p->rows * p->k) * 2, &p->a16));
  }
  return DeviceMemory::allocate(device, static_cast<uint64_t>(p->cols * p->k) * 2, &p->w16);
}

kaio_status launch_quantize(const kaio_device *device, const KquantPlan &p,
                            kaio_stream *stream, const kaio_tensor *t) {
  CheckedView x, q;
  KAIO_TRY(check_float_view("x", &t[0], device, p.dtype, p.rows, p.cols, &x));
  KAIO_TRY(check_quant_view("q", &t[1], device, p.format, p.rows, p.cols, &q));
  KAIO_TRY(check_no_partial_overlap("x", x, "q", q, false));
  unsigned long long xa = x.address, qa = q.address;
  unsigned per_row = static_cast<unsigned>(p.cols / kquant_block_elems(p.format));
  unsigned blocks = static_cast<unsigned>(p.rows) * per_row;
  unsigned long long xs = static_cast<unsigned long long>(x.row_stride);
  unsigned long long qs = static_cast<unsigned long long>(q.row_stride);
  unsigned dtype = static_cast<unsigned>(p.dtype);
  void *params[] = {&xa, &qa, &blocks, &per_row, &xs, &qs, &dtype};
  return launch_builtin(device, p.launch, stream, params);
}

// Dequantizes the checked quantized view q into y (address, row stride in
// elements, dtype).
kaio_status launch_dequantize(const kaio_device *device, const Launch &launch, kaio_stream *stream,
                              const CheckedView &q, int64_t rows, int64_t cols,
                              unsigned long long y, unsigned long long y_stride, kaio_dtype dtype) {
  unsigned long long qa = q.address, qs = static_cast<unsigned long long>(q.row_stride);
  unsigned per_row = static_cast<unsigned>(cols / 32);
  unsigned chunks = static_cast<unsigned>(rows) * per_row;
  unsigned dt = static_cast<unsigned>(dtype);
  void *params[] = {&qa, &y, &chunks, &per_row, &qs, &y_stride, &dt};
  return launch_builtin(device, launch, stream, params);
}

// Whether the streamed Q6_K / Q8_0 matvec may read W: its bulk copies take
// each row's chunk in the 16-byte aligned window around it, so W must start
// 16-byte aligned (no window reaches before it) and its buffer must hold the
// up to 15 bytes that the last row's window reads past W's end.
bool stream_windows_fit(const CheckedView &w) {
  const uint64_t end = w.address + w.span_bytes;
  return w.address % 16 == 0 && (end + 15) / 16 * 16 <= w.buffer->ptr + w.buffer->size;
}

// Whether those copies need the windows at all: not when every row chunk
// starts on 32 bytes and ends on 16 (W starts 32-byte aligned, rows a
// multiple of 32 bytes apart; whole 8-block runs of 210 or 34 bytes), where
// the kernel issues plain copies. The windowed copies also place a row that
// starts at 16 mod 32 (Q6_K at K 14336: rows 11760 bytes apart) 16 bytes
// into its shared row: a bulk copy whose two ends differ by 16 mod 32 asks
// L2 for about 12 % more sectors (bench/RESULTS.md, session 13).
unsigned stream_windows(const KquantPlan &p, const CheckedView &w) {
  if (p.format != KAIO_QUANT_Q6_K && p.format != KAIO_QUANT_Q8_0) return 0;
  const bool aligned = w.address % 32 == 0 && (w.rows == 1 || w.row_stride % 32 == 0) &&
                       (p.k / kquant_block_elems(p.format)) % 8 == 0;
  return aligned ? 0 : 1;
}

kaio_status launch_matmul_kq(const kaio_device *device, const KquantPlan &p,
                             kaio_stream *stream, const kaio_tensor *t) {
  const int64_t m = p.rows, n = p.cols, k = p.k;
  CheckedView a, w, c;
  KAIO_TRY(check_float_view("A", &t[0], device, p.dtype, m, k, &a));
  KAIO_TRY(check_quant_view("W", &t[1], device, p.format, n, k, &w));
  KAIO_TRY(check_view("C", &t[2], device, &c));
  KAIO_TRY(check_dtype("C", c, p.out_dtype));
  KAIO_TRY(check_shape("C", c, m, n));
  KAIO_TRY(check_no_partial_overlap("A", a, "C", c, false));
  KAIO_TRY(check_no_partial_overlap("W", w, "C", c, false));
  if (!p.tensor_core) {
    unsigned long long aa = a.address, wa = w.address, ca = c.address;
    unsigned um = static_cast<unsigned>(m), un = static_cast<unsigned>(n);
    unsigned units = static_cast<unsigned>(
        k / (p.format == KAIO_QUANT_Q6_K ? 128 : p.format == KAIO_QUANT_Q8_0 ? 32 : 64));
    unsigned long long lda = a.row_stride, ws = w.row_stride, ldc = c.row_stride;
    unsigned adt = static_cast<unsigned>(p.dtype), odt = static_cast<unsigned>(p.out_dtype);
    // the streaming kernels' last two parameters; the others have none
    unsigned stages = p.ring_stages, windows = stream_windows(p, w);
    void *params[] = {&aa, &wa,  &ca,  &um,  &un,     &units,  &lda,
                      &ws, &ldc, &adt, &odt, &stages, &windows};
    const bool stream_ok = !p.unaligned.function || stream_windows_fit(w);
    return launch_builtin(device, stream_ok ? p.launch : p.unaligned, stream, params);
  }
  // the product's views are checked before anything is enqueued
  const bool round_a = p.dtype == KAIO_DTYPE_F32;
  if (round_a) KAIO_TRY(check_contiguous("A", a));
  const kaio_tensor mm[] = {
      round_a ? kaio_tensor_2d(p.a16->handle(), KAIO_DTYPE_F16, m, k) : t[0],
      kaio_tensor_2d(p.w16->handle(), p.matmul.dtype, n, k), t[2]};
  MatmulViews product;
  KAIO_TRY(prepare_matmul(p.matmul, mm, {"A", "W", "C"}, &product));
  KAIO_TRY(launch_dequantize(device, p.launch, stream, w, n, k, p.w16->ptr(),
                             static_cast<unsigned long long>(k), p.matmul.dtype));
  if (round_a) {
    unsigned long long src = a.address, dst = p.a16->ptr();
    unsigned long long count = static_cast<unsigned long long>(m * k);
    void *params[] = {&src, &dst, &count};
    KAIO_TRY(launch_builtin(device, p.convert_a, stream, params));
  }
  return enqueue_matmul(p.matmul, stream, product);
}

}  // namespace

int64_t kquant_block_elems(kaio_quant_format format) {
  if (!known_format(format)) return 0;
  return format == KAIO_QUANT_Q8_0 ? 32 : 256;
}

int64_t kquant_block_bytes(kaio_quant_format format) {
  static const int64_t bytes[] = {34, 144, 176, 210};
  return known_format(format) ? bytes[format_index(format)] : 0;
}

namespace {

kaio_status plan_unlogged(kaio_device *device, KquantPlan *plan) {
  if (!known_format(plan->format))
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'format' is %d; use KAIO_QUANT_Q8_0 (1), KAIO_QUANT_Q4_K (2), "
                "KAIO_QUANT_Q5_K (3) or KAIO_QUANT_Q6_K (4).",
                api_name(), plan->format);
  KAIO_TRY(require_arch(device, 8, 0, "k-quant kernels (PTX sm_80)"));
  switch (plan->kind) {
    case KquantPlan::Kind::quantize:
      KAIO_TRY(plan_quantize(device, plan));
      log_kernel(device, plan->launch.function, "sm_80, the only family");
      return KAIO_OK;
    case KquantPlan::Kind::dequantize:
      if (!is_float_dtype(plan->dtype))
        return fail(KAIO_ERROR_INVALID_DTYPE,
                    "%s: out_dtype is %s (%d); dequantize writes KAIO_DTYPE_F32, KAIO_DTYPE_F16 "
                    "or KAIO_DTYPE_BF16.",
                    api_name(), kaio_dtype_name(plan->dtype), plan->dtype);
      KAIO_TRY(plan_dequantize(device, plan, &plan->launch));
      log_kernel(device, plan->launch.function, "sm_80, the only family");
      return KAIO_OK;
    case KquantPlan::Kind::matmul: return plan_matmul_kq(device, plan);
  }
  return fail(KAIO_ERROR_INTERNAL, "%s: unknown k-quant op kind.", api_name());
}

std::string subject(const KquantPlan &p) {
  static const char *kinds[] = {"quantize", "dequantize", "matmul"};
  char s[160];
  const int kind = static_cast<int>(p.kind);
  if (p.kind == KquantPlan::Kind::matmul)
    std::snprintf(s, sizeof s, "%s %s M=%" PRId64 " N=%" PRId64 " K=%" PRId64 " %s",
                  kinds[kind], format_name(p.format), p.rows, p.cols, p.k,
                  kaio_dtype_name(p.dtype));
  else
    std::snprintf(s, sizeof s, "%s %s %" PRId64 " x %" PRId64 " %s", kinds[kind],
                  format_name(p.format), p.rows, p.cols, kaio_dtype_name(p.dtype));
  return s;
}

}  // namespace

kaio_status KquantPlan::plan(kaio_device *device) {
  this->device = device;
  return log_plan([&] { return plan_unlogged(device, this); },
                  [&] { return subject(*this); });
}

kaio_status KquantPlan::run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const {
  const size_t expected = kind == Kind::matmul ? 3 : 2;
  const char *order = kind == Kind::quantize     ? "{x, q}"
                      : kind == Kind::dequantize ? "{q, y}"
                                                 : "{A, W, C}";
  KAIO_TRY(check_launch(device, stream, tensors, count, expected, order));
  switch (kind) {
    case Kind::quantize: return launch_quantize(device, *this, stream, tensors);
    case Kind::dequantize: {
      CheckedView q, y;
      KAIO_TRY(check_quant_view("q", &tensors[0], device, format, rows, cols, &q));
      KAIO_TRY(check_float_view("y", &tensors[1], device, dtype, rows, cols, &y));
      KAIO_TRY(check_no_partial_overlap("q", q, "y", y, false));
      return launch_dequantize(device, launch, stream, q, rows, cols, y.address,
                               static_cast<unsigned long long>(y.row_stride), dtype);
    }
    case Kind::matmul: return launch_matmul_kq(device, *this, stream, tensors);
  }
  return fail(KAIO_ERROR_INTERNAL, "%s: unknown k-quant op kind.", api_name());
}

}  // namespace kaio
