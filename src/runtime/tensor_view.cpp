#include "runtime/tensor_view.hpp"

#include <cinttypes>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "runtime/handle_check.hpp"

namespace kaio {

kaio_status check_stream(const kaio_stream *stream) {
  if (is_live(stream)) return KAIO_OK;
  return fail(KAIO_ERROR_INTERNAL, "%s: internal error: the stream handle was not resolved. Please "
              "report this.", api_name());
}

kaio_status check_view(const char *arg, const kaio_tensor *view,
                       const kaio_device *device, CheckedView *out) {
  if (!view)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument '%s' is NULL; pass a kaio_tensor.",
                api_name(), arg);
  const kaio_buffer *b = find_handle(view->buffer);
  if (!b)
    return fail(KAIO_ERROR_INVALID_HANDLE,
                "%s: argument '%s' has %s buffer; set %s.buffer to a live kaio_buffer.", api_name(),
                arg, view->buffer ? "a destroyed or invalid" : "a NULL", arg);
  size_t esize = kaio_dtype_size(view->dtype);
  if (esize == 0)
    return fail(KAIO_ERROR_INVALID_DTYPE,
                "%s: argument '%s' has dtype %d, which is not a kaio_dtype; use KAIO_DTYPE_F32, "
                "_F16, _BF16, _I8, _U8, _I32 or _U32.",
                api_name(), arg, view->dtype);
  if (view->reserved != 0)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument '%s' has reserved = %u; it must be 0.",
                api_name(), arg, view->reserved);
  if (view->rows < 1 || view->cols < 1)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: argument '%s' is %" PRId64 " x %" PRId64 "; rows and cols must be >= 1.",
                api_name(), arg, view->rows, view->cols);
  int64_t stride = view->row_stride == 0 ? view->cols : view->row_stride;
  if (stride < view->cols)
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: argument '%s' has row_stride %" PRId64 " < cols %" PRId64
                "; rows would overlap. Use row_stride >= cols, or 0 for contiguous.",
                api_name(), arg, view->row_stride, view->cols);
  if (view->offset_bytes % esize != 0)
    return fail(KAIO_ERROR_MISALIGNED,
                "%s: argument '%s' has offset_bytes %" PRIu64 ", not a multiple of the %zu-byte "
                "%s element; align the offset.",
                api_name(), arg, view->offset_bytes, esize, kaio_dtype_name(view->dtype));
  // Elements spanned: (rows - 1) * stride + cols, all in int64 without overflow.
  int64_t last_row = 0, elements = 0, bytes = 0;
  if (__builtin_mul_overflow(view->rows - 1, stride, &last_row) ||
      __builtin_add_overflow(last_row, view->cols, &elements) ||
      __builtin_mul_overflow(elements, static_cast<int64_t>(esize), &bytes))
    return fail(KAIO_ERROR_INVALID_DIMENSION,
                "%s: argument '%s' (%" PRId64 " x %" PRId64 ", row_stride %" PRId64
                ") spans more bytes than fit in 64 bits.",
                api_name(), arg, view->rows, view->cols, stride);
  uint64_t end = 0;
  // A wrapped sum would print as a small number that looks in bounds.
  if (__builtin_add_overflow(view->offset_bytes, static_cast<uint64_t>(bytes), &end))
    return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                "%s: argument '%s' (%" PRId64 " x %" PRId64 " %s, row_stride %" PRId64
                ") has offset_bytes %" PRIu64 " + %" PRId64 " bytes spanned, which exceeds "
                "2^64; its buffer holds %" PRIu64 " bytes, so use an offset_bytes within it.",
                api_name(), arg, view->rows, view->cols, kaio_dtype_name(view->dtype), stride,
                view->offset_bytes, bytes, b->size);
  if (end > b->size)
    return fail(KAIO_ERROR_OUT_OF_BOUNDS,
                "%s: argument '%s' (%" PRId64 " x %" PRId64 " %s, row_stride %" PRId64
                ", offset_bytes %" PRIu64 ") needs bytes up to %" PRIu64
                " but its buffer holds %" PRIu64 "; use a smaller view or a larger buffer.",
                api_name(), arg, view->rows, view->cols, kaio_dtype_name(view->dtype), stride,
                view->offset_bytes, end, b->size);
  if (b->device != device)
    return fail(KAIO_ERROR_WRONG_DEVICE,
                "%s: argument '%s' lives on device %d but the call runs on device %d; copy it "
                "to device %d first.",
                api_name(), arg, b->device->ordinal, device->ordinal, device->ordinal);
  out->address = b->ptr + view->offset_bytes;
  out->dtype = view->dtype;
  out->rows = view->rows;
  out->cols = view->cols;
  out->row_stride = stride;
  out->span_bytes = static_cast<uint64_t>(bytes);
  out->buffer = b;
  return KAIO_OK;
}

kaio_status check_shape(const char *arg, const CheckedView &view, int64_t rows, int64_t cols) {
  if (view.rows == rows && view.cols == cols) return KAIO_OK;
  return fail(KAIO_ERROR_SHAPE_MISMATCH,
              "%s: argument '%s' is %" PRId64 " x %" PRId64 " but must be %" PRId64 " x %" PRId64
              ".",
              api_name(), arg, view.rows, view.cols, rows, cols);
}

kaio_status check_dtype(const char *arg, const CheckedView &view, kaio_dtype expected) {
  if (view.dtype == expected) return KAIO_OK;
  return fail(KAIO_ERROR_INVALID_DTYPE, "%s: argument '%s' has dtype %s but must be %s.",
              api_name(), arg, kaio_dtype_name(view.dtype), kaio_dtype_name(expected));
}

kaio_status check_contiguous(const char *arg, const CheckedView &view) {
  if (view.contiguous()) return KAIO_OK;
  return fail(KAIO_ERROR_UNSUPPORTED,
              "%s: argument '%s' has row_stride %" PRId64 " but this op needs contiguous rows "
              "(row_stride == cols == %" PRId64 ", or 0); copy it into a contiguous buffer.",
              api_name(), arg, view.row_stride, view.cols);
}

kaio_status check_no_partial_overlap(const char *a_name, const CheckedView &a, const char *b_name,
                                     const CheckedView &b, bool allow_identical) {
  bool disjoint = a.address + a.span_bytes <= b.address || b.address + b.span_bytes <= a.address;
  if (disjoint) return KAIO_OK;
  bool identical = a.address == b.address && a.rows == b.rows && a.cols == b.cols &&
                   a.row_stride == b.row_stride && a.dtype == b.dtype;
  if (identical && allow_identical) return KAIO_OK;
  return fail(KAIO_ERROR_INVALID_ARGUMENT,
              "%s: arguments '%s' and '%s' overlap in memory%s; use separate buffers.", api_name(),
              a_name, b_name, identical ? " (in-place is not supported by this op)" : "");
}

}  // namespace kaio
