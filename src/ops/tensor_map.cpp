#include "ops/tensor_map.hpp"

#include "core/error.hpp"

namespace kaio {
namespace {

// cuTensorMapEncodeTiled enums (values fixed by the driver ABI).
constexpr int kTmaUint8 = 0, kTmaFloat16 = 6, kTmaBfloat16 = 9;
constexpr int kInterleaveNone = 0, kSwizzle128 = 3, kL2Promote128 = 2, kOobZeroFill = 0;

}  // namespace

kaio_status encode_tensor_map(const char *caller, const kaio_device *device,
                              const CheckedView &v, kaio_dtype dtype, const unsigned box[2],
                              TensorMap *out) {
  const int tma_dtype = dtype == KAIO_DTYPE_BF16  ? kTmaBfloat16
                        : dtype == KAIO_DTYPE_F16 ? kTmaFloat16
                                                  : kTmaUint8;
  unsigned long long dims[2] = {static_cast<unsigned long long>(v.cols),
                                static_cast<unsigned long long>(v.rows)};
  unsigned long long strides[1] = {static_cast<unsigned long long>(v.row_stride) *
                                   kaio_dtype_size(dtype)};
  unsigned element_strides[2] = {1, 1};
  cu::CUresult r = device->api->cuTensorMapEncodeTiled(
      out, tma_dtype, 2, reinterpret_cast<void *>(v.address), dims, strides, box,
      element_strides, kInterleaveNone, kSwizzle128, kL2Promote128, kOobZeroFill);
  if (r) return fail_driver(r, caller, "cuTensorMapEncodeTiled");
  return KAIO_OK;
}

}  // namespace kaio
