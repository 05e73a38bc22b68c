// Validation of kaio_tensor views, done at every op call: a view is the only
// thing standing between a kernel and memory outside its buffer.
#pragma once

#include <kaio/kaio.h>

#include "runtime/buffer.hpp"
#include "runtime/stream.hpp"

namespace kaio {

// A view that passed check_view: everything a launch needs, in bytes.
struct CheckedView {
  cu::CUdeviceptr address = 0;  // of element (0, 0)
  kaio_dtype dtype = KAIO_DTYPE_INVALID;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;       // elements; never 0 once checked
  uint64_t span_bytes = 0;      // from element (0,0) to one past the last element
  const kaio_buffer *buffer = nullptr;
  bool contiguous() const { return row_stride == cols; }
};

// Checks the view pointer, the buffer handle, dtype, dims, stride, alignment
// of the offset to the element size, bounds, and that the buffer lives on
// `device`. `arg` is the argument's name in messages.
kaio_status check_view(const char *arg, const kaio_tensor *view,
                       const kaio_device *device, CheckedView *out);

// Fails with KAIO_ERROR_SHAPE_MISMATCH unless `view` is rows × cols.
kaio_status check_shape(const char *arg, const CheckedView &view, int64_t rows, int64_t cols);

kaio_status check_dtype(const char *arg, const CheckedView &view, kaio_dtype expected);

// Fails with KAIO_ERROR_UNSUPPORTED unless the view's rows are back to back.
kaio_status check_contiguous(const char *arg, const CheckedView &view);

// Fails with KAIO_ERROR_INVALID_ARGUMENT if the two views overlap in memory
// without being the same view (in-place element-wise is allowed by caller).
kaio_status check_no_partial_overlap(const char *a_name, const CheckedView &a, const char *b_name,
                                     const CheckedView &b, bool allow_identical);

// That a stream the ABI layer resolved is a live object.
kaio_status check_stream(const kaio_stream *stream);

}  // namespace kaio
